"""Environments answer scripted policy turns with the observations, rewards and done the format promises."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.configs import small_config
from tests.offline.engine.test_logprobs import trainer_loss_inputs
from workers import metrics as metric
from workers.environments import ENVIRONMENTS
from workers.environments.calculator import CalculatorKnobs
from workers.environments.calculator.component import evaluate
from workers.environments.episodes import TurnRecord
from workers.reporting import MemoryReporter
from workers.rollout import Generations
from workers.tasks import Example, build_task
from workers.training.report import batch_metrics, called
from workers.training.trainer import Trainer


def calculator(task_section=None, **knobs):
    cfg = small_config(**({"task": task_section} if task_section else {}))
    return ENVIRONMENTS.get("calculator")(CalculatorKnobs(**knobs), build_task(cfg))


def play(environment, example, turns):
    episode = environment.reset(example, np.random.default_rng(0))
    return episode, [episode.step(turn) for turn in turns]


def test_a_calculator_episode_computes_then_answers():
    example = Example(prompt="12*7+5=", answer="89")
    episode, (first, second, answer) = play(calculator(), example, ["<calc>12*7</calc>", "<calc>84+5</calc>", "89"])
    assert episode.opening == "12*7+5=" and episode.start_state == ""
    assert (first.observation, first.reward, first.done, first.state) == ("<result>84</result>", 0.0, False, "84")
    assert (second.observation, second.done, second.state) == ("<result>89</result>", False, "84|89")
    assert (answer.observation, answer.reward, answer.done, answer.well_formed) == ("", 1.0, True, True)


def test_a_wrong_or_unreadable_answer_ends_the_episode_with_nothing():
    example = Example(prompt="12*7+5=", answer="89")
    _, (wrong,) = play(calculator(), example, ["88"])
    _, (unclosed,) = play(calculator(), example, ["<calc>12*7+5"])
    assert (wrong.reward, wrong.done, wrong.well_formed) == (0.0, True, True)
    assert (unclosed.reward, unclosed.done, unclosed.well_formed) == (0.0, True, False)


def test_a_word_problem_is_answered_in_a_sentence_after_a_call():
    task = {"name": "word-problems", "extraction": "flexible"}
    example = Example(prompt="Ann has 3 boxes of 12 pens. How many pens?", answer="36")
    _, turns = play(calculator(task), example, ["3 boxes of 12: <calc>3 × 12</calc>", "She has 36 pens."])
    assert [t.observation for t in turns] == ["<result>36</result>", ""]
    assert [t.reward for t in turns] == [0.0, 1.0]


@pytest.mark.parametrize(
    ("expression", "result"),
    [
        ("7/2", "3.5"),
        ("1/3", "0.333333"),
        ("-(2+3)*4", "-20"),
        ("1,000*3", "3000"),
        ("0.1+0.2", "0.3"),  # exact: fractions, not floats
        ("12 ÷ 4 − 1", "2"),
        ("2**3", "error: only numbers, + - * / and parentheses"),
        ("1/0", "error: division by zero"),
        ("12 apples", "error: cannot read '12 apples'"),
        ("", "error: empty expression"),
        ("9" * 20, "error: a value past 10^15"),
        ("__import__('os')", "error: only numbers, + - * / and parentheses"),
        ("1+" * 40 + "1", "error: expression longer than 64 characters"),
    ],
)
def test_the_calculator_answers_every_expression_and_errors_are_observations(expression, result):
    _, (turn,) = play(calculator(), Example(prompt="?", answer="0"), [f"<calc>{expression}</calc>"])
    assert turn.observation == f"<result>{result}</result>" and not turn.done and turn.reward == 0.0
    assert turn.well_formed == (not result.startswith("error"))


def test_the_turn_limit_ends_an_episode_that_keeps_calling():
    _, turns = play(calculator(max_turns=2), Example(prompt="?", answer="4"), ["<calc>2+2</calc>"] * 2)
    assert [(t.done, t.observation, t.reward) for t in turns] == [(False, "<result>4</result>", 0.0), (True, "", 0.0)]


def test_text_after_a_closed_call_makes_the_turn_an_answer():
    # a turn ends at </calc>; one that goes on after its call was not stopped there: it answers
    _, (turn,) = play(calculator(), Example(prompt="?", answer="4"), ["<calc>2+2</calc> so 4"])
    assert turn.done


def test_the_tiny_models_warm_up_shows_a_share_of_its_questions_as_episodes():
    pairs = [("12*7+5=", "89"), ("3-5=", "-2"), ("what?", "4"), ("2+2=", "5")] * 50
    shown = calculator(demonstrated_calls=0.5).demonstrations(pairs, np.random.default_rng(0))
    episodes = [(prompt, target) for prompt, target in shown if target.startswith("<calc>")]
    assert ("12*7+5=", "<calc>12*7+5</calc><result>89</result>89") in episodes
    assert ("3-5=", "<calc>3-5</calc><result>-2</result>-2") in episodes
    assert {prompt for prompt, _ in episodes} == {"12*7+5=", "3-5="}  # never one it does not compute to its answer
    assert 0.35 < len(episodes) / 100 < 0.65  # half of the 100 it computes
    assert calculator(demonstrated_calls=0.0).demonstrations(pairs, np.random.default_rng(0)) == pairs


def test_a_chat_models_observation_is_a_user_message_then_the_assistants_header(tmp_path):
    from tests.support.chat_models import save_chat_llama
    from workers.models.policy import load_policy

    path = save_chat_llama(tmp_path / "chat")
    cfg = small_config(model={"name": str(path)})
    policy = load_policy(cfg, build_task(cfg), torch.device("cpu"))
    closed = policy.tokenizer.decode(policy.prompts.observation_ids("<result>7</result>", turn_closed=True))
    cut = policy.tokenizer.decode(policy.prompts.observation_ids("<result>7</result>", turn_closed=False))
    assert closed == "\n<|im_start|>user\n<result>7</result><|im_end|>\n<|im_start|>assistant\n"
    assert cut == "<|im_end|>" + closed  # a turn cut at a stop string is closed first


def test_the_single_turn_environment_has_no_episodes():
    single = ENVIRONMENTS.get("none")(None, None)
    assert single.max_turns == 1
    with pytest.raises(TypeError, match="single-turn"):
        single.reset(Example(prompt="?", answer="1"), np.random.default_rng(0))


# ---------------------------------------------------------------- episodes in a batch, and what trains
# The policy's turns come from a script: the tests' tiny model, random or briefly warmed, never writes a tool call.
# The network itself is the real one: it scores the episodes and takes the gradient.


class ScriptedTurns:
    """A rollout backend that writes, at each turn, what `script(question, row, turn)` says (text, and whether the
    turn ends with the end-of-turn token), continuing each row's prefix as the real backends do."""

    def __init__(self, policy, script):
        self.policy, self.script, self.turn = policy, script, 0

    def generate(self, prompts, n, params, generator, limits=None, prefixes=None, stop=None):
        from workers.rollout.hf import prepend

        assert n == 1 or self.turn == 0
        sizes = [n] * len(prompts) if isinstance(n, int) else list(n)
        questions = [self.policy.decode(list(p)) for p, size in zip(prompts, sizes) for _ in range(size)]
        new = []
        for row, question in enumerate(questions):
            text, ends = self.script(question, row, self.turn)
            ids = self.policy.tokenizer(text, add_special_tokens=False)["input_ids"]
            new.append(ids + ([self.policy.eos_id] if ends else []))
        self.turn += 1
        width = max(len(ids) for ids in new)
        tokens = torch.full((len(new), width), self.policy.pad_id)
        mask = torch.zeros(len(new), width)
        for row, ids in enumerate(new):
            tokens[row, : len(ids)], mask[row, : len(ids)] = torch.tensor(ids), 1
        out = Generations(tokens, -0.5 * mask, mask, torch.zeros(len(new), dtype=torch.bool))
        return out if prefixes is None else prepend(prefixes, out, self.policy.pad_id)

    def sync_weights(self):
        pass

    def release_memory(self):
        pass


def calculator_run(**sections):
    cfg = small_config(environment={"name": "calculator", "max_turns": 3}, model={"warmup_steps": 0},
                       rollout={"prompts_per_step": 2, "group_size": 2, "max_new_tokens": 16}, **sections)  # fmt: skip
    return Trainer(cfg, MemoryReporter())


def compute_then_answer(question, row, turn):
    """Turn 0: a call computing the question; turn 1: the right answer (even rows) or a wrong one (odd rows)."""
    expression = question.rstrip("=")
    if turn == 0:
        return f"<calc>{expression}</calc>", False
    value = int(evaluate(expression, 64))
    return str(value if row % 2 == 0 else value + 1), True


def test_an_episode_is_its_turns_and_observations_and_only_the_turns_are_the_policys():
    trainer = calculator_run()
    policy = trainer.policy
    backend = ScriptedTurns(policy, compute_then_answer)
    collected = trainer.collector.collect(1, policy, backend, version=0)
    batch = collected.batch
    assert batch.episodes is not None and len(batch.episodes) == 4
    for row, episode in enumerate(batch.episodes):
        example = batch.example_of(row)
        value = int(evaluate(example.prompt.rstrip("="), 64))
        call, observation = f"<calc>{example.prompt.rstrip('=')}</calc>", f"<result>{value}</result>"
        answer = str(value if row % 2 == 0 else value + 1)
        tokens = batch.tokens[row, : int(batch.mask[row].sum())].tolist()
        encode = lambda text: policy.tokenizer(text, add_special_tokens=False)["input_ids"]  # noqa: E731
        assert tokens == encode(call) + encode(observation) + encode(answer) + [policy.eos_id]
        owned = batch.policy_tokens[row, : len(tokens)].tolist()
        assert owned == [True] * len(call) + [False] * len(observation) + [True] * (len(answer) + 1)
        observed = ~batch.policy_tokens[row] & (batch.mask[row] > 0)
        assert (batch.logprobs[row][observed] == 0).all()
        assert (batch.logprobs[row][batch.policy_tokens[row]] != 0).all()
        first, second = episode.turns
        assert (first.start, first.end, first.observation_end) == (0, len(call), len(call) + len(observation))
        assert (first.reward, first.state, first.well_formed) == (0.0, str(value), True)
        assert (second.start, second.observation_end) == (len(call) + len(observation), len(tokens))
        assert second.reward == float(row % 2 == 0)
        assert episode.solved == (row % 2 == 0) and episode.final_turn == answer
        assert batch.texts[row] == call + observation + answer
    assert batch.rewards.tolist() == [1.0, 0.0, 1.0, 0.0] and batch.correct.tolist() == [True, False, True, False]
    assert batch.reward_parts["environment"].tolist() == [1.0, 0.0, 1.0, 0.0]
    assert collected.generated.decoded == float(batch.policy_tokens.sum())  # observations are written, not decoded
    stored = trainer.inspector.describe_sample(batch, 1, None, 0)["turns"]
    assert [(t["start"], t["end"], t["reward"]) for t in stored] == [
        (t.start, t.end, t.reward) for t in batch.episodes[1].turns
    ]
    seen = batch_metrics(collected, trainer.state.stages)
    observations = [len(f"<result>{e.answer}</result>") for e in batch.examples for _ in range(2)]
    assert seen[metric.EPISODE_SUCCESS] == 0.5 and seen[metric.EPISODE_TURNS] == 2
    assert seen[metric.EPISODE_WELL_FORMED] == 1.0 and seen[metric.EPISODE_TRUNCATED] == 0.0
    assert seen[metric.EPISODE_CALLED] == 1.0  # every episode called the calculator before its answer
    assert seen[metric.EPISODE_OBSERVATION_TOKENS] == pytest.approx(np.mean(observations))
    assert seen[metric.EPISODE_POLICY_TOKENS] == pytest.approx(float(batch.policy_tokens.sum()) / 4)


def test_an_episode_called_its_tool_only_with_a_call_the_environment_could_read():
    def record(*turns):  # (action, well_formed) per turn
        return [TurnRecord(0, 1, 1, 0.0, "", well_formed, action=action) for action, well_formed in turns]

    assert called(record(("12*7", True), ("", True)))  # a call, then the answer
    assert not called(record(("", True)))  # answered in its head
    assert not called(record(("12 apples", False), ("", True)))  # its only call was malformed
    assert called(record(("12 apples", False), ("12*7", True), ("", True)))


def logit_gradients(trainer, batch):
    """The gradient of the loss at the logits that predict each completion token of `batch` (after its advantages):
    (B, T-1) summed |grad| per position of the rows in the loss, those rows, and the update's inputs."""
    model = trainer.policy.model
    trainer.learner.compute_advantages(batch)
    rows = batch.in_loss.nonzero().flatten()
    inputs = trainer.learner.training_inputs(batch, rows)
    captured = []

    def keep(module, args, output):
        output.retain_grad()
        captured.append(output)

    handle = model.get_output_embeddings().register_forward_hook(keep)
    model.train()
    logprobs, _ = trainer.learner.forwards.logprobs(model, inputs)
    handle.remove()
    inputs["old_logprobs"] = logprobs.detach()  # on policy (the script's log-probabilities are made up): no clip
    trainer.stages.objective(trainer_loss_inputs(trainer, logprobs, inputs)).loss.backward()
    completion_logits = captured[-1]  # (B, T-1, V) the completions' (the prompts' come first)
    return completion_logits.grad.abs().sum(-1), rows, inputs  # position t predicts token t+1


def assert_observations_get_no_gradient(trainer, batch) -> torch.Tensor:
    """Exactly zero gradient at every observation token's logits, a positive one at every policy token's, and the
    observations still attended; returns the (B, T-1) observation positions."""
    predicts, rows, inputs = logit_gradients(trainer, batch)
    policy, attended = batch.policy_tokens[rows][:, 1:], batch.mask[rows][:, 1:] > 0
    observation = attended & ~policy
    assert observation.any() and (predicts[observation] == 0).all()  # exactly zero
    assert (predicts[policy] > 0).all()  # every token the policy wrote gets its push
    assert torch.equal(inputs["attention_mask"][:, -batch.mask.shape[1] :], batch.mask[rows].long())  # still read
    return observation


def test_no_gradient_reaches_the_logits_of_observation_tokens():
    trainer = calculator_run()
    batch = trainer.collector.collect(1, trainer.policy, ScriptedTurns(trainer.policy, compute_then_answer), 0).batch
    assert_observations_get_no_gradient(trainer, batch)


# ---------------------------------------------------------------- what the inspector stores of an episode
def scripted_episode_samples(**sections):
    """A step of scripted calculator episodes through the real collector, advantage stage and inspector: the
    samples the run page shows, and the batch they describe."""
    trainer = calculator_run(**sections)
    batch = trainer.collector.collect(1, trainer.policy, ScriptedTurns(trainer.policy, compute_then_answer), 0).batch
    trainer.learner.compute_advantages(batch)
    rows = list(range(batch.num_samples))
    samples = trainer.inspector.describe(batch, batch, rows, [])
    return [{**sample, "step": 1} for sample in samples], batch


def test_the_inspector_stores_each_turns_action_reward_advantage_and_trained_tokens():
    samples, batch = scripted_episode_samples(advantage={"name": "gigpo"})
    assert batch.advantages.dim() == 2  # per token: each turn its own
    for row, sample in enumerate(samples):
        policy = batch.trained_tokens()[row] > 0
        assert sample["advantage"] == pytest.approx(float(batch.advantages[row][policy].mean()))
        for turn, record in zip(sample["turns"], batch.episodes[row].turns, strict=True):
            span = batch.advantages[row, record.start : record.end]
            assert turn["advantage"] == pytest.approx(float(span.mean()))
            assert turn["trained"] == record.end - record.start  # every token of the turn, none of the observation
            assert not policy[record.end : record.observation_end].any()
        call, answer = sample["turns"]
        assert call["action"] == sample["prompt"].rstrip("=") and answer["action"] == ""
        assert (call["reward"], answer["reward"]) == (0.0, float(sample["correct"]))
        assert "".join(sample["tokens"][call["end"] : call["observation_end"]]).startswith("<result>")
    untrained, _ = scripted_episode_samples()
    described = calculator_run().inspector.describe_sample(batch, 0, None, 0)  # a group never trained on
    assert all(t["advantage"] is None and t["trained"] == 0 for t in described["turns"])
    assert untrained[0]["turns"][0]["advantage"] == untrained[0]["advantage"]  # grpo: the episode's, every turn
