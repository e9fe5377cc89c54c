"""outcome-explore: GRPO on r + c_hist / sqrt(N) - c_batch (m - 1) / (n - 1), N and m counted over answers."""

import json
import math

import pytest
import torch

from tests.conftest import small_config
from tests.offline.engine.test_ragged import scored
from workers import metrics
from workers.config import resolve
from workers.pipeline.advantage import ADVANTAGES
from workers.pipeline.history import PromptHistory
from workers.reporting import MemoryReporter
from workers.tasks import Example
from workers.training.trainer import Trainer


def explorer(**knobs):
    return ADVANTAGES.get("outcome-explore")(resolve({"advantage": {"name": "outcome-explore", **knobs}}))


def grpo(batch):
    return ADVANTAGES.get("group-mean")(resolve({}))(batch).advantages


def answered(sizes, answers, counts, rewards=None):
    """A scored batch whose samples gave `answers` and whose answers the history has seen `counts` times."""
    batch = scored(sizes)
    batch.answers = list(answers)
    batch.answer_counts = torch.tensor(counts, dtype=torch.float)
    if rewards is not None:
        batch.rewards = torch.tensor(rewards, dtype=torch.float)
        batch.correct = batch.rewards > 0
    return batch


def test_a_never_seen_answer_gets_the_largest_historical_bonus_and_it_shrinks_as_one_over_sqrt_count():
    counts = [1, 4, 9, 100, 2, 0]  # 0: an answer the history never counted (clamped to 1)
    batch = answered([6], ["7", "8", "9", "10", "11", None], counts, rewards=[0, 0, 0, 0, 0, 0])
    component = explorer(history_bonus=0.3, batch_penalty=0.0)
    shaped, _ = component.shaped_rewards(batch)
    expected = [0.3 / math.sqrt(n) for n in (1, 4, 9, 100, 2)] + [0.0]  # no answer: no bonus
    torch.testing.assert_close(shaped, torch.tensor(expected))
    assert float(shaped[0]) == max(shaped.tolist())  # given once, never before: N = 1, the largest bonus
    # the advantage is GRPO's over the shaped rewards
    batch.rewards = shaped
    torch.testing.assert_close(component(answered([6], batch.answers, counts, [0] * 6)).advantages, grpo(batch))


def test_answers_repeated_within_a_group_are_penalised_in_proportion_to_their_repeats():
    # group 0 (n = 6): "3" three times, "4" once, no answer twice; group 1 (n = 3): "5" twice, "6" once
    answers = ["3", "3", "4", "3", None, None, "5", "6", "5"]
    batch = answered([6, 3], answers, [5] * 9, rewards=[1, 1, 0, 1, 0, 0, 1, 0, 1])
    out = explorer(history_bonus=0.0, batch_penalty=0.5)
    shaped, _ = out.shaped_rewards(batch)
    repeats = [3, 3, 1, 3, 2, 2, 2, 1, 2]
    sizes = [6] * 6 + [3] * 3
    penalty = [0.5 * (m - 1) / (n - 1) for m, n in zip(repeats, sizes)]
    torch.testing.assert_close(shaped, batch.rewards - torch.tensor(penalty))
    assert penalty[2] == 0 and penalty[0] == 2 * penalty[4]  # a unique answer is free; 2 repeats cost twice 1
    stats = out(batch).stats
    assert stats[metrics.DISTINCT_ANSWERS] == pytest.approx((2 + 2) / 2)  # no answer is not a distinct answer
    assert stats[metrics.OUTCOME_BATCH_PENALTY_MEAN] == pytest.approx(sum(penalty) / 9)
    assert stats[metrics.OUTCOME_BONUS_MEAN] == pytest.approx(-sum(penalty) / 9)


def test_an_all_wrong_group_gets_a_signal_that_favours_its_rarest_answers():
    batch = answered([4], ["5", "5", "5", "8"], [30, 30, 30, 1], rewards=[0, 0, 0, 0])
    assert torch.all(grpo(batch) == 0)  # GRPO learns nothing from it
    advantages = explorer().__call__(batch).advantages
    assert advantages[3] > 0 and torch.all(advantages[:3] < 0)


def test_with_both_coefficients_zero_it_is_grpo_on_a_ragged_batch():
    batch = answered([3, 5, 2], ["1", "2", "1", "9", "9", None, "9", "4", "0", "0"], [1, 2, 2, 7, 7, 0, 7, 1, 3, 3])
    out = explorer(history_bonus=0.0, batch_penalty=0.0)(batch)
    torch.testing.assert_close(out.advantages, grpo(batch), rtol=0, atol=0)
    assert out.stats[metrics.OUTCOME_BONUS_MEAN] == 0.0


def test_apply_to_incorrect_leaves_right_answers_unshaped_and_a_batch_without_counts_is_refused():
    batch = answered([4], ["2", "2", "3", "4"], [10, 10, 1, 1], rewards=[1, 1, 0, 0])
    shaped, _ = explorer(history_bonus=0.2, batch_penalty=0.2, apply_to="incorrect").shaped_rewards(batch)
    torch.testing.assert_close(shaped, torch.tensor([1.0, 1.0, 0.2, 0.2]))
    everyone, _ = explorer(history_bonus=0.2, batch_penalty=0.2).shaped_rewards(batch)
    right = 1 + 0.2 / math.sqrt(10) - 0.2 / 3
    torch.testing.assert_close(everyone, torch.tensor([right, right, 0.2, 0.2]))
    batch.answer_counts = None
    with pytest.raises(ValueError, match="answer_counts"):
        explorer()(batch)


def test_answer_counts_persist_across_steps_and_through_a_state_dict():
    history = PromptHistory()
    batch = answered([3, 2], ["1", "1", None, "6", "7"], [0] * 5)
    history.update(batch, step=1)
    torch.testing.assert_close(history.answer_counts(batch), torch.tensor([2.0, 2.0, 0.0, 1.0, 1.0]))
    again = batch.select_groups([0])
    again.answers = ["1", "5", "5"]
    history.update(again, step=2)
    assert history.get(batch.examples[0]).answers == {"1": 3, "5": 2}
    assert history.get(batch.examples[1]).answers == {"6": 1, "7": 1}  # a prompt not revisited keeps its counts
    restored = PromptHistory()
    restored.load_state_dict(json.loads(json.dumps(history.state_dict())))
    assert restored.state_dict() == history.state_dict()
    torch.testing.assert_close(restored.answer_counts(again), torch.tensor([3.0, 2.0, 2.0]))
    bonuses, _ = explorer(history_bonus=1.0, batch_penalty=0.0).shaped_rewards(
        answered([3], again.answers, restored.answer_counts(again).tolist(), [0, 0, 0])
    )
    torch.testing.assert_close(bonuses, torch.tensor([1 / math.sqrt(3), 1 / math.sqrt(2), 1 / math.sqrt(2)]))
    old = {key: {"outcomes": stats["outcomes"]} for key, stats in history.state_dict().items()}
    restored.load_state_dict(old)  # a checkpoint written before answers were counted
    assert restored.get(batch.examples[0]).answers == {} and restored.get(batch.examples[0]).seen == 2


def test_a_tiny_run_writes_the_bonus_metrics_and_checkpoints_the_answer_counts(tmp_path):
    reporter = MemoryReporter()
    cfg = small_config(method="outcome-explore", schedule={"steps": 3, "save_final": True})
    trainer = Trainer(cfg, reporter, artifacts_dir=tmp_path)
    assert trainer.run() == "succeeded"
    for name in (metrics.OUTCOME_BONUS_MEAN, metrics.DISTINCT_ANSWERS, metrics.OUTCOME_HISTORY_BONUS_MEAN):
        assert len(reporter.series(name)) == 3
    assert all(0 < v <= 0.25 for _, v in reporter.series(metrics.OUTCOME_HISTORY_BONUS_MEAN))
    state = trainer.state.history.state_dict()
    counted = sum(sum(stats["answers"].values()) for stats in state.values())
    samples = sum(size for stats in state.values() for _, _, size in stats["outcomes"])
    assert 0 < counted <= samples  # every answer given was counted; answerless completions are not
    saved = json.loads((tmp_path / "checkpoints" / "step-3" / "prompt_history.json").read_text())
    restored = PromptHistory()
    restored.load_state_dict(saved)
    assert restored.state_dict() == state


def test_a_completion_cut_off_by_the_length_limit_commits_to_no_answer():
    """A truncated digit string parses as a number; it must not count as a new answer (it would earn bonuses)."""
    trainer = Trainer(small_config(method="outcome-explore", schedule={"steps": 1}), MemoryReporter())
    batch = scored([2])
    batch.examples = [Example("1+2=", "3")]
    batch.texts = ["3", "33333333"]
    batch.truncated = torch.tensor([False, True])
    trainer.collector.score(batch)
    assert batch.answers == ["3", None] and batch.correct.tolist() == [True, False]
