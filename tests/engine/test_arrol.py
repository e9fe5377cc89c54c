"""arrol: over-sampled groups pruned to G correctness-balanced rollouts by a success head trained online."""

import torch

from tests.conftest import small_config
from workers.config import resolve
from workers.pipeline.generate import GENERATORS
from workers.pipeline.generate.arrol import balanced_survivors
from workers.reporting import MemoryReporter
from workers.trainer import Trainer


def test_the_survivors_are_balanced_between_likely_right_and_likely_wrong():
    predicted = torch.tensor([0.9, 0.8, 0.85, 0.7, 0.95, 0.75, 0.1, 0.2])  # 6 likely right, 2 likely wrong
    chosen = balanced_survivors(predicted, 4)
    assert sorted(chosen) == [0, 4, 6, 7]  # the two surest right and the two likely wrong
    assert balanced_survivors(torch.tensor([0.5, 0.6, 0.4]), 3) == [0, 1, 2]
    assert len(balanced_survivors(torch.rand(9), 5)) == 5


class Batch:
    def __init__(self, correct):
        self.correct = torch.tensor(correct)
        self.num_samples = len(correct)


def test_the_head_learns_a_separable_signal_from_the_scored_survivors():
    cfg = resolve({"method": "arrol", "generate": {"warmup_steps": 2, "head_steps": 50}})
    arrol = GENERATORS.get("arrol")(cfg)
    g = torch.Generator().manual_seed(0)
    direction = torch.randn(16, generator=g)
    accuracies = []
    for _ in range(10):
        x = torch.randn(64, 16, generator=g)
        correct = (x @ direction > 0).tolist()
        arrol.features = [x]
        assert arrol.predict(x) is None or arrol.trained >= 2  # no predictions during the warm-up
        arrol.observe(Batch(correct))
        accuracies.append(arrol.metrics()["pipeline/generate/head_accuracy"])
    assert accuracies[-1] > 0.9 and accuracies[-1] > accuracies[0]
    x = torch.randn(200, 16, generator=g)
    assert ((arrol.predict(x) > 0.5) == (x @ direction > 0)).float().mean() > 0.9


def test_an_arrol_run_keeps_g_rows_per_prompt_and_decodes_fewer_tokens_than_all_started():
    cfg = small_config(
        method="arrol",
        model={"warmup_steps": 0},  # an untrained policy: long rollouts, so pruning saves tokens
        rollout={"max_new_tokens": 12},
        generate={"warmup_steps": 1},
        schedule={"steps": 4},
    )
    reporter = MemoryReporter()
    trainer = Trainer(cfg, reporter)
    trainer.run()
    rows = reporter.metric_rows
    assert all(r["pipeline/generate/samples_per_prompt"] == cfg.rollout.group_size for r in rows)
    assert all(r["pipeline/generate/pruned"] == cfg.rollout.prompts_per_step * cfg.rollout.group_size for r in rows)
    assert all(0 <= r["pipeline/generate/head_accuracy"] <= 1 for r in rows[1:])
    assert trainer.stages.generate.trained == 4
    # the pruned half stopped at the check: far fewer tokens than 8 full rollouts per prompt
    started = 2 * cfg.rollout.prompts_per_step * cfg.rollout.group_size
    per_step = rows[-1]["counters/rollout_tokens"] / len(rows)
    assert per_step < started * 12 * 0.75
