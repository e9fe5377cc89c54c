"""It learns: a run at the form's defaults clearly raises held-out pass@1.

The shipped example (examples/grpo-arith.yaml) learns too: tests/live/engine/test_distributed.py runs it on two
rollout actors to the same bar, and its full acceptance (>= 25 points within 5 minutes of training) is
measured by bench/learning.py and recorded in docs/benchmarks.md.
"""

import pytest

from workers.config import load_config
from workers.reporting import MemoryReporter
from workers.training.trainer import Trainer

# two to five minutes of training under make test's load (141 s alone on a 2-core AMD EPYC): make test hands it out
# first, never beside a Ray cluster. The timeout only catches a hang: CI once ran on a host 2-3 times slower than that,
# where the default 300 s cut a run that was learning.
pytestmark = [pytest.mark.slow, pytest.mark.both_cores, pytest.mark.timeout(1200)]


def test_a_run_at_the_grpo_presets_defaults_learns_at_its_default_step_count():
    """What a first run launched with the form's defaults does: `method: grpo` and nothing else (issue: a first
    chart that falls teaches nothing). The evaluation is the default's too, greedy on 200 held-out problems."""
    cfg = load_config(None, ["method=grpo", "schedule.save_final=false", "eval.every=200"])
    assert (cfg.schedule.steps, cfg.rollout.prompts_per_step, cfg.schedule.minibatches) == (200, 64, 2)
    reporter = MemoryReporter()
    assert Trainer(cfg, reporter).run() == "succeeded"
    (_, before), (_, after) = reporter.series("eval/pass@1")  # before the first step and after the last
    assert after >= before + 0.10, (before, after)
