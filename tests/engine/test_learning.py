"""It learns: the shipped example, cut to 100 steps, clearly raises held-out pass@1.

The full acceptance (>= 25 points within 5 minutes of training) is the whole
example, measured by bench/learning.py and recorded in docs/benchmarks.md.
"""

from tests.conftest import REPO
from workers.config import load_config
from workers.reporting import MemoryReporter
from workers.trainer import Trainer


def test_grpo_on_arith_raises_held_out_pass_at_1():
    cfg = load_config(
        REPO / "examples" / "grpo-arith.yaml",
        ["schedule.steps=100", "schedule.time_limit_s=null", "schedule.save_final=false", "eval.every=100"],
    )
    reporter = MemoryReporter()
    assert Trainer(cfg, reporter).run() == "succeeded"
    (_, before), (_, after) = reporter.series("eval/pass@1")
    assert 0.10 <= before <= 0.50  # the warm-started model: something to learn, and a signal
    assert after >= before + 0.10, (before, after)
    rewards = [v for _, v in reporter.series("reward/mean")]
    assert sum(rewards[-20:]) / 20 > sum(rewards[:20]) / 20 + 0.05  # the training reward rose too


def test_a_run_at_the_grpo_presets_defaults_learns_at_its_default_step_count():
    """What a first run launched with the form's defaults does: `method: grpo` and nothing else (issue: a first
    chart that falls teaches nothing). The evaluation is the default's too, greedy on 200 held-out problems."""
    cfg = load_config(None, ["method=grpo", "schedule.save_final=false", "eval.every=200"])
    assert (cfg.schedule.steps, cfg.rollout.prompts_per_step, cfg.schedule.minibatches) == (200, 64, 2)
    reporter = MemoryReporter()
    assert Trainer(cfg, reporter).run() == "succeeded"
    (_, before), (_, after) = reporter.series("eval/pass@1")  # before the first step and after the last
    assert after >= before + 0.10, (before, after)
