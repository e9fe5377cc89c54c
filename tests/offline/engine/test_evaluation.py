"""Evaluation: pass@k is the unbiased estimator from n samples, maj@k votes over blocks of k."""

import itertools
import math

import pytest
import torch

from tests.conftest import small_config
from workers.errors import ConfigError
from workers.reporting import MemoryReporter
from workers.rollout import Generations
from workers.tasks import Example
from workers.training.evaluation import pass_at_k, score_eval, unsolved_problems
from workers.training.trainer import Trainer


@pytest.mark.parametrize("n,c,k", [(5, 0, 1), (5, 2, 1), (5, 2, 3), (6, 1, 4), (8, 3, 8), (10, 7, 4)])
def test_pass_at_k_is_the_mean_over_every_k_subset_of_the_n_samples(n, c, k):
    samples = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(samples, k))
    assert pass_at_k(n, c, k) == pytest.approx(sum(any(s) for s in subsets) / len(subsets))


def test_pass_at_k_stays_exact_for_many_samples():
    assert pass_at_k(1000, 1, 10) == pytest.approx(10 / 1000)
    assert pass_at_k(1000, 0, 10) == 0 and pass_at_k(1000, 991, 10) == 1
    with pytest.raises(ValueError):
        pass_at_k(4, 1, 5)


class StubTask:
    """Answers are the prompts' own numbers; a completion commits to the digits it holds."""

    def is_correct(self, example, text):
        return text == example.answer

    def answer_key(self, example, text):
        return text if text.isdigit() else None


EXAMPLES = [Example("a", "1"), Example("b", "2"), Example("c", "3")]
GREEDY = ["1", "0", "3"]
SAMPLED = [
    *["1", "1", "5", "x"],  # a: 2 of 4 right; blocks (1, 1) right, (5, x) wrong
    *["7", "7", "2", "7"],  # b: 1 of 4; blocks (7, 7) wrong, (2, 7) a tie that goes to the first answer, 2
    *["9", "8", "8", "9"],  # c: 0 of 4
]


def test_eval_metrics_on_a_stub_task_with_known_answers():
    scores = score_eval(StubTask(), EXAMPLES, GREEDY, SAMPLED, n=4, k=2)
    assert scores["eval/pass@1"] == pytest.approx(2 / 3)
    pass2 = [1 - math.comb(2, 2) / math.comb(4, 2), 1 - math.comb(3, 2) / math.comb(4, 2), 0.0]
    assert scores["eval/pass@k"] == pytest.approx(sum(pass2) / 3)
    assert scores["eval/maj@k"] == pytest.approx((1 / 2 + 1 / 2 + 0) / 3)


def test_an_episodes_correctness_is_the_environments_solved_not_its_last_turns_text():
    # a puzzle is solved by its moves: its last turn alone ("R") is no answer the task's verifier would take
    solved_greedy, solved_sampled = [False, True, True], [True, False, False, False] * 3
    scores = score_eval(StubTask(), EXAMPLES, GREEDY, SAMPLED, n=4, k=2, solved=(solved_greedy, solved_sampled))
    assert scores["eval/pass@1"] == pytest.approx(2 / 3)  # examples b and c, whatever the texts say
    assert scores["eval/pass@k"] == pytest.approx(1 - math.comb(3, 2) / math.comb(4, 2))  # 1 of 4 solved each
    assert scores["eval/maj@k"] == pytest.approx((1 / 2 + 1 / 2 + 0) / 3)  # votes are still on the answers


def test_pass_at_k_over_the_problems_nothing_solved_at_the_start():
    greedy = ["0", "0", "0"]  # a and b are solved by a sample only, c by nothing
    correct = ([False] * 3, [text == e.answer for i, text in enumerate(SAMPLED) for e in [EXAMPLES[i // 4]]])
    assert unsolved_problems(*correct, n=4) == [2]
    assert unsolved_problems([True, False, False], [False] * 12, n=4) == [1, 2]
    later = score_eval(StubTask(), EXAMPLES, greedy, SAMPLED, n=4, k=2, unsolved_at_start=[1])
    assert later["eval/unsolved_at_start"] == pytest.approx(1 / 3)
    assert later["eval/pass@k/unsolved_at_start"] == pytest.approx(1 - math.comb(3, 2) / math.comb(4, 2))  # b's
    none_left = score_eval(StubTask(), EXAMPLES, greedy, SAMPLED, n=4, k=2, unsolved_at_start=[])
    assert none_left["eval/unsolved_at_start"] == 0 and "eval/pass@k/unsolved_at_start" not in none_left
    assert "eval/unsolved_at_start" not in score_eval(StubTask(), EXAMPLES, greedy, SAMPLED, n=4, k=2)


def test_a_run_reports_pass_at_k_over_the_problems_its_step_0_evaluation_left_unsolved():
    cfg = small_config(schedule={"steps": 4}, eval={"every": 2, "size": 32, "samples": 4, "k": 2})
    reporter = MemoryReporter()
    Trainer(cfg, reporter).run()
    shares = reporter.series("eval/unsolved_at_start")
    assert [step for step, _ in shares] == [0, 2, 4] and len({share for _, share in shares}) == 1  # one set
    assert 0 < shares[0][1] < 1, shares
    opened = reporter.series("eval/pass@k/unsolved_at_start")
    assert opened[0] == (0, 0.0)  # by definition: none of their samples was right at step 0
    assert [step for step, _ in opened] == [0, 2, 4] and all(0 <= v <= 1 for _, v in opened)


class ScriptedBackend:
    """Returns fixed completions instead of sampling: the evaluation's arithmetic is what is tested."""

    def __init__(self, policy, script):
        self.policy, self.script = policy, script

    def generate(self, prompts, n, params, generator, **request):
        texts = [t for p in prompts for t in self.script(self.policy.decode(p), n, params.temperature)]
        ids = [self.policy.tokenizer(t, add_special_tokens=False)["input_ids"] + [self.policy.eos_id] for t in texts]
        width = max(len(i) for i in ids)
        tokens = torch.full((len(ids), width), self.policy.pad_id)
        mask = torch.zeros(len(ids), width)
        for row, i in enumerate(ids):
            tokens[row, : len(i)], mask[row, : len(i)] = torch.tensor(i), 1
        return Generations(tokens, torch.zeros(len(ids), width), mask, torch.zeros(len(ids), dtype=torch.bool))

    def sync_weights(self):
        pass


def test_the_trainer_draws_eval_samples_per_prompt_and_greedy_once():
    cfg = small_config(eval={"every": 1, "size": 10, "k": 2, "samples": 6})
    trainer = Trainer(cfg, MemoryReporter())
    answers = {e.prompt: e.answer for e in trainer.task.eval_examples()}
    calls = []

    def script(prompt, n, temperature):
        calls.append((n, temperature))
        right = answers[prompt]
        return [right] if temperature == 0 else [right] + ["x"] * (n - 1)  # 1 of n samples is right

    trainer.backends.own = ScriptedBackend(trainer.policy, script)
    scores = trainer.evaluate(0)
    assert set(calls) == {(1, 0.0), (6, 1.0)}
    assert scores["eval/pass@1"] == 1.0
    assert scores["eval/pass@k"] == pytest.approx(pass_at_k(6, 1, 2))  # 1/3, not the 1 of "any of 6"
    # blocks (right, x), (x, x), (x, x): "x" commits to no answer, so only the first block votes right
    assert scores["eval/maj@k"] == pytest.approx(1 / 3)


def test_eval_samples_below_k_are_refused():
    with pytest.raises(ConfigError, match="eval.samples: 3 samples cannot estimate pass@4"):
        small_config(eval={"k": 4, "samples": 3})
