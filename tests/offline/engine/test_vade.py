"""VADE: a Beta posterior per prompt decayed on two scales, Thompson sampling of the reward variance."""

import numpy as np
import pytest

from tests.conftest import small_config
from tests.offline.engine.test_mopps import Ctx, visit
from workers.config import resolve
from workers.pipeline.control import CONTROLLERS
from workers.pipeline.control.vade.component import two_scale_posterior
from workers.pipeline.history import PromptHistory
from workers.reporting import MemoryReporter
from workers.tasks import Example
from workers.training.trainer import Trainer


def test_the_posterior_decays_per_visit_and_per_step():
    history, prompt = PromptHistory(), Example("7-3+1=", "5")
    visit(history, prompt, 3, 4, step=1)
    visit(history, prompt, 0, 4, step=3)
    # no decay: plain counts over a uniform prior
    assert two_scale_posterior(history, prompt, 3, 1.0, 1.0, 1.0) == (4.0, 6.0)
    # per visit only: the first visit's evidence (3 right, 1 wrong) is halved when the second arrives
    assert two_scale_posterior(history, prompt, 3, 1.0, 0.5, 1.0) == (2.5, 5.5)
    # per step too: two steps between the visits (x0.81), then one step of ageing to step 4 (x0.9)
    alpha, beta = two_scale_posterior(history, prompt, 4, 0.9, 0.5, 1.0)
    assert alpha == pytest.approx(1 + 0.9 * (0.5 * 0.81 * 3))
    assert beta == pytest.approx(1 + 0.9 * (0.5 * 0.81 * 1 + 4))
    # a prompt left alone returns towards the prior, its mean unchanged
    far = two_scale_posterior(history, prompt, 400, 0.9, 1.0, 1.0)
    assert far == pytest.approx((1.0, 1.0), abs=1e-6)
    assert two_scale_posterior(history, Example("new", "1"), 4, 0.9, 0.5, 2.0) == (2.0, 2.0)


def pick_rate(selector, history, prompt, others, step, rounds=400):
    ctx = Ctx(history)
    ctx.step = step
    return np.mean([prompt in selector.select(ctx, [prompt, *others], 2) for _ in range(rounds)])


def test_a_prompt_that_keeps_failing_moves_down_and_is_picked_less():
    cfg = resolve({"method": "vade"})
    selector = CONTROLLERS.get("vade")(cfg)
    history, failing = PromptHistory(), Example("9-8-7=", "-6")
    others = [Example(f"{i}+1=", str(i + 1)) for i in range(7)]
    rates, means = [], []
    for step in range(1, 6):
        rates.append(pick_rate(selector, history, failing, others, step))
        alpha, beta = two_scale_posterior(history, failing, step, 0.99, 0.5, 1.0)
        means.append(alpha / (alpha + beta))
        visit(history, failing, 0, 8, step=step)
    assert means == sorted(means, reverse=True) and means[-1] < 0.15
    assert rates[0] == pytest.approx(2 / 8, abs=0.07)  # unseen: as likely as any candidate
    assert rates[-1] < 0.1 and rates[-1] < rates[0] / 3


def test_a_stale_failure_is_explored_again():
    """The slow scale: a prompt that failed long ago drifts back to the prior and is picked again."""
    cfg = resolve({"method": "vade", "control": {"step_decay": 0.95}})
    selector = CONTROLLERS.get("vade")(cfg)
    history, failing = PromptHistory(), Example("9-8-7=", "-6")
    others = [Example(f"{i}+1=", str(i + 1)) for i in range(7)]
    for step in range(1, 4):
        visit(history, failing, 0, 8, step=step)
    soon = pick_rate(selector, history, failing, others, step=4)
    later = pick_rate(selector, history, failing, others, step=150)
    assert soon < 0.1 and later == pytest.approx(2 / 8, abs=0.07)


def test_the_variance_target_prefers_a_split_prompt_to_a_solved_one():
    cfg = resolve({"method": "vade"})
    selector = CONTROLLERS.get("vade")(cfg)
    history, even, solved = PromptHistory(), Example("1+1=", "2"), Example("2+2=", "4")
    for step in range(1, 4):
        visit(history, even, 4, 8, step)
        visit(history, solved, 8, 8, step)
    ctx = Ctx(history)
    ctx.step = 4
    chosen = [selector.select(ctx, [even, solved], 1)[0] for _ in range(200)]
    assert chosen.count(even) > 180


def test_vade_trains_on_b_prompts_and_reports_what_it_chose():
    cfg = small_config(method="vade", schedule={"steps": 3})
    reporter = MemoryReporter()
    Trainer(cfg, reporter).run()
    rows = [r for r in reporter.metric_rows if "pipeline/control/sampled_variance" in r]
    assert len(rows) == 3
    assert all(0 < r["pipeline/control/sampled_variance"] <= 0.25 for r in rows)
    assert all(r["pipeline/filter/kept_groups"] == cfg.rollout.prompts_per_step for r in rows)
    assert rows[0]["pipeline/control/unseen_share"] == 1.0
