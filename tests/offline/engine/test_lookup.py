"""The lookup task's generated world and questions, and the lookup environment's searches, by scripted turns."""

from __future__ import annotations

import numpy as np
import pytest

from tests.configs import small_config
from tests.offline.engine.test_environments import ScriptedTurns, assert_observations_get_no_gradient
from workers.environments import ENVIRONMENTS
from workers.environments.lookup import LookupEnvironmentKnobs
from workers.errors import ConfigError
from workers.reporting import MemoryReporter
from workers.tasks import Example, build_task
from workers.tasks.lookup import world
from workers.training.trainer import Trainer

# how each relation a question names is written on the page it is read from (the PAGES of workers/tasks/lookup.py)
WRITTEN = {
    "birthplace": "born in",
    "employer": "works for",
    "mentor": "mentor",
    "founder": "founded by",
    "base": "based in",
    "country": "a city in",
    "mayor": "mayor",
    "capital": "capital",
}


def lookup_task(seed=0, **task):
    return build_task(small_config(seed=seed, task={"name": "lookup", **task}))


def lookup(task=None, **knobs):
    return ENVIRONMENTS.get("lookup")(LookupEnvironmentKnobs(**knobs), task or lookup_task())


def play(environment, example, turns):
    episode = environment.reset(example, np.random.default_rng(0))
    return episode, [episode.step(turn) for turn in turns]


def asked(question: str) -> tuple[str, list[str]]:
    """The start entity and the relations of a question, first hop first, read from its words."""
    path = question.split(" is the ", 1)[1].rstrip("?")
    *outer, innermost = path.split(" of the ")
    first, start = innermost.split(" of ", 1)
    return start, [first, *reversed(outer)]


def page(task, name: str) -> str:
    return next(d for d in task.world.documents if d.startswith(f"{name}: "))


# ---------------------------------------------------------------- the generated world and its questions


def test_the_corpus_is_the_same_under_its_seed_and_another_under_another():
    first, again = world.__wrapped__(0, 300), world.__wrapped__(0, 300)  # built twice, not read from the cache
    other = world.__wrapped__(1, 300)
    assert first.documents == again.documents and len(first.documents) == 300
    assert first.documents != other.documents
    assert lookup_task().fingerprint() == lookup_task().fingerprint() != lookup_task(world_seed=1).fingerprint()
    assert lookup_task(seed=5).fingerprint() == lookup_task().fingerprint()  # the run seed draws no other world


def test_every_page_is_one_short_line_of_the_tiny_models_characters_about_one_entity():
    corpus = world(0, 300)
    titles = [document.split(": ", 1)[0] for document in corpus.documents]
    assert len(set(titles)) == len(titles)  # one page an entity
    for document in corpus.documents:
        assert 25 <= len(document) <= 80 and all(" " <= c <= "~" for c in document)
    kinds = {entity.kind for entity in corpus.entities}
    assert kinds == {"person", "city", "org", "country"}


@pytest.mark.parametrize("hops", [2, 3])
def test_every_question_is_answered_by_following_its_hops_one_page_each(hops):
    task = lookup_task(hops=hops)
    examples = task.eval_examples() + task.train_batch(200, np.random.default_rng(0))
    for example in examples:
        start, relations = asked(example.prompt)
        assert len(relations) == hops
        name, read = start, []
        for relation in relations:
            text = page(task, name)
            following = text.split(f" {WRITTEN[relation]} ", 1)[1].split(",")[0].rstrip(".")
            read.append(text)
            name = following
        assert name == example.answer
        # needing every hop: the answer is named on no page read before the last, and no page is read twice
        assert not any(example.answer in text for text in read[:-1]) and len(set(read)) == hops
        assert task.searches(example.prompt) == [t.split(": ")[0] for t in read]


def test_held_out_questions_are_never_trained_on_and_do_not_depend_on_the_run_seed():
    task = lookup_task()
    held_out = {e.prompt for e in task.eval_examples()}
    assert len(held_out) == 16
    drawn = {e.prompt for e in task.train_batch(3000, np.random.default_rng(1))}
    drawn |= {p for p, _ in task.warmup_pairs(3000, np.random.default_rng(2))}
    assert drawn and not drawn & held_out
    assert lookup_task(seed=9).eval_examples() == task.eval_examples()


def test_the_warmup_slice_asks_fewer_hops_and_a_share_of_full_ones():
    task = lookup_task(hops=3, warmup_hops=1, warmup_full_share=0.25)
    hops = [len(asked(prompt)[1]) for prompt, _ in task.warmup_pairs(400, np.random.default_rng(0))]
    assert set(hops) == {1, 3} and 0.15 < hops.count(3) / 400 < 0.35


def test_the_problem_space_counts_the_worlds_questions():
    cfg = small_config(task={"name": "lookup", "documents": 120})
    assert cfg.task.problem_space() == len(build_task(cfg).world.questions(2)) > 100
    with pytest.raises(ConfigError, match="eval.size"):
        small_config(task={"name": "lookup", "documents": 40}, eval={"size": 10_000})


def test_a_single_turn_answer_is_the_exact_name_case_and_spacing_aside():
    task, example = lookup_task(), Example("Who is the mentor of Bima Kesh?", "Tola Venn")
    assert task.is_correct(example, "Tola Venn") and task.is_correct(example, "  tola   VENN\n")
    assert not task.is_correct(example, "Tola") and not task.is_correct(example, "Tola Venn.")
    assert not task.is_correct(example, "Tola Venns") and not task.is_correct(example, "Tola Venn Tola Venn")
    assert task.answer_key(example, " Tola  venn ") == "tola venn"
    assert task.format_ok(example, "Someone Else") and not task.format_ok(example, "<search>Tola")


# ---------------------------------------------------------------- the environment: scripted turns


def test_searching_each_hop_reads_its_pages_then_the_answer_is_rewarded():
    task = lookup_task()
    example = task.eval_examples()[0]
    names = task.searches(example.prompt)
    episode, turns = play(lookup(task), example, [f"<search>{n}</search>" for n in names] + [example.answer])
    assert episode.opening == example.prompt and episode.start_state == ""
    assert [t.observation for t in turns] == [f"<doc>{page(task, n)}</doc>" for n in names] + [""]
    assert [(t.reward, t.done, t.solved, t.well_formed) for t in turns] == [(0.0, False, False, True)] * 2 + [
        (1.0, True, True, True)
    ]
    both = ",".join(str(i) for i in sorted(task.world.page_of(n) for n in names))
    assert [t.state for t in turns] == [str(task.world.page_of(names[0])), both, both]


def test_the_state_is_the_set_of_pages_read_whatever_the_queries_and_their_order():
    task = lookup_task()
    a, b = task.searches(task.eval_examples()[0].prompt)
    environment, example = lookup(task), task.eval_examples()[0]
    _, forward = play(environment, example, [f"<search>{a}</search>", f"<search>{b}</search>"])
    _, backward = play(environment, example, [f"<search>{b.upper()}</search>", f"<search> {a} </search>"])
    _, again = play(environment, example, [f"<search>{a}</search>", f"<search>{a}</search>"])
    assert forward[-1].state == backward[-1].state != again[-1].state == forward[0].state


def test_a_wrong_answer_ends_the_episode_unrewarded_and_an_unclosed_call_is_not_well_formed():
    task = lookup_task()
    example = task.eval_examples()[0]
    _, (wrong,) = play(lookup(task), example, ["Nobody Here"])
    _, (unclosed,) = play(lookup(task), example, [f"<search>{example.answer}"])
    assert (wrong.reward, wrong.done, wrong.solved, wrong.well_formed) == (0.0, True, False, True)
    assert (unclosed.reward, unclosed.done, unclosed.well_formed) == (0.0, True, False)


def test_a_search_that_matches_nothing_says_so_and_reads_no_page():
    _, (turn,) = play(lookup(), Example("?", "x"), ["<search>Qqxq Zzyz</search>"])
    assert (turn.observation, turn.done, turn.reward, turn.state, turn.well_formed) == (
        "<doc>no results</doc>",
        False,
        0.0,
        "",
        True,  # the call was read: it found nothing
    )


@pytest.mark.parametrize(
    ("query", "error"),
    [
        ("", "empty query"),
        ("   ", "empty query"),
        ("x" * 41, "query longer than 40 characters"),
        ("<b>Bima</b>", "a query is words, without tags or new lines"),
        ("Bima\nKesh", "a query is words, without tags or new lines"),
    ],
)
def test_a_malformed_call_is_an_error_the_policy_reads(query, error):
    _, (turn,) = play(lookup(), Example("?", "x"), [f"<search>{query}</search>"])
    assert (turn.observation, turn.done, turn.well_formed, turn.state) == (
        f"<doc>error: {error}</doc>",
        False,
        False,
        "",
    )


def test_the_exact_name_ranks_first_then_pages_that_name_it_then_namesakes():
    task = lookup_task()
    documents = task.world.documents
    named = lambda name: [d for d in documents if f" {name}" in d]  # noqa: E731 (pages naming it, not its own)
    person = next(e.name for e in task.world.entities if e.kind == "person" and len(named(e.name)) == 2)
    _, (turn,) = play(lookup(task, top_k=4), Example("?", "x"), [f"<search>{person.lower()}</search>"])
    pages = turn.observation.removeprefix("<doc>").removesuffix("</doc>").split("</doc><doc>")
    assert pages[0] == page(task, person) and set(pages[1:3]) == set(named(person))
    first, last = person.split()
    assert first in pages[3] or last in pages[3]  # a namesake: one of the name's words, not both
    _, (asked_in_words,) = play(lookup(task), Example("?", "x"), [f"<search>the mentor of {person}</search>"])
    assert asked_in_words.observation == f"<doc>{page(task, person)}</doc>"  # its title decides the tie


def test_the_turn_limit_ends_an_episode_that_keeps_searching():
    task = lookup_task()
    name = task.searches(task.eval_examples()[0].prompt)[0]
    _, turns = play(lookup(task, max_turns=3), Example("?", "x"), [f"<search>{name}</search>"] * 3)
    assert [(t.done, t.observation == "", t.reward) for t in turns] == [(False, False, 0.0)] * 2 + [(True, True, 0.0)]


def test_the_environment_needs_the_lookup_task_and_turns_for_every_hop():
    check = ENVIRONMENTS.declaration("lookup").check
    with pytest.raises(ConfigError, match="set task.name lookup"):  # when the config is read
        small_config(environment={"name": "lookup"})  # the default task: arith
    with pytest.raises(ValueError, match="set task.name lookup"):
        ENVIRONMENTS.get("lookup")(LookupEnvironmentKnobs(), build_task(small_config()))
    with pytest.raises(ConfigError, match="at least 4"):
        small_config(task={"name": "lookup", "hops": 3}, environment={"name": "lookup", "max_turns": 3})
    check(small_config(task={"name": "lookup", "hops": 3}, environment={"name": "lookup", "max_turns": 4}))


def test_the_tiny_models_warm_up_shows_a_share_of_its_questions_as_real_episodes():
    task = lookup_task()
    environment = lookup(task, demonstrated_searches=0.5)
    pairs = task.warmup_pairs(200, np.random.default_rng(0)) + [("What?", "Bima Kesh")] * 50
    shown = environment.demonstrations(pairs, np.random.default_rng(0))
    episodes = [(prompt, target) for prompt, target in shown if target.startswith("<search>")]
    assert 0.35 < len(episodes) / 200 < 0.65 and "What?" not in {prompt for prompt, _ in episodes}
    for prompt, target in episodes:
        answer = dict(pairs)[prompt]
        calls = [f"<search>{name}</search>" for name in task.searches(prompt)]
        _, played = play(environment, Example(prompt, answer), [*calls, answer])
        assert target == "".join(call + turn.observation for call, turn in zip(calls, played)) + answer
        assert played[-1].solved and target.count("<doc>") == len(calls)
    assert lookup(task, demonstrated_searches=0.0).demonstrations(pairs, np.random.default_rng(0)) == pairs


# ---------------------------------------------------------------- a lookup episode in a batch, and what trains


def lookup_run():
    cfg = small_config(
        task={"name": "lookup", "documents": 120},
        environment={"name": "lookup", "max_turns": 3, "max_episode_tokens": 400},
        model={"warmup_steps": 0},
        rollout={"prompts_per_step": 2, "group_size": 2, "max_new_tokens": 32},
    )
    return Trainer(cfg, MemoryReporter())


def search_then_answer(task):
    """Turns 0 and 1: a search for each page the question needs; turn 2: the right answer (even rows) or a wrong
    one (odd rows)."""

    def script(question, row, turn):
        names = task.searches(question)
        if turn < len(names):
            return f"<search>{names[turn]}</search>", False
        start, relations = asked(question.strip())
        return ("Nobody Here" if row % 2 else task.world.follow(start, tuple(relations))[-1]), True

    return script


def test_no_gradient_reaches_the_logits_of_observation_tokens_in_a_lookup_episode():
    trainer = lookup_run()
    batch = trainer.collector.collect(
        1, trainer.policy, ScriptedTurns(trainer.policy, search_then_answer(trainer.task)), 0
    ).batch
    assert [episode.solved for episode in batch.episodes] == [True, False, True, False]
    assert all(len(episode.turns) == 3 for episode in batch.episodes)
    observation = assert_observations_get_no_gradient(trainer, batch)
    assert observation.sum() > 100  # the pages read
