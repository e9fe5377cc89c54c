"""MoPPS: a Beta posterior per prompt with forgetting, Thompson sampling towards a target pass rate."""

import numpy as np
import pytest
import torch

from tests.conftest import small_config
from tests.offline.engine.test_ragged import scored
from workers.config import resolve
from workers.pipeline.control import CONTROLLERS
from workers.pipeline.control.mopps.component import forgetting_posterior
from workers.pipeline.history import PromptHistory
from workers.reporting import MemoryReporter
from workers.tasks import Example
from workers.training.trainer import Trainer


def visit(history, example, right, size, step):
    batch = scored([size])
    batch.examples = [example]
    batch.correct = torch.tensor([True] * right + [False] * (size - right))
    history.update(batch, step)


def test_the_posterior_folds_each_visit_with_forgetting():
    history, prompt = PromptHistory(), Example("7-3+1=", "5")
    visit(history, prompt, 3, 4, step=1)
    visit(history, prompt, 0, 4, step=2)
    # alpha: 1 -> 0.5*1 + 0.5*1 + 3 = 4 -> 0.5*4 + 0.5 + 0 = 2.5; beta: 1 -> 2 -> 0.5*2 + 0.5 + 4 = 5.5
    assert forgetting_posterior(history, prompt, decay=0.5, prior=1.0) == (2.5, 5.5)
    assert forgetting_posterior(history, prompt, decay=1.0, prior=1.0) == (4.0, 6.0)  # plain counts
    assert forgetting_posterior(history, Example("new", "1"), 0.5, 1.0) == (1.0, 1.0)


class Ctx:
    def __init__(self, history):
        self.history = history


def pick_rate(selector, history, prompt, others, rounds=400):
    """How often `prompt` is among the 2 chosen from it and 7 unseen candidates."""
    hits = 0
    for _ in range(rounds):
        chosen = selector.select(Ctx(history), [prompt, *others], 2)
        hits += prompt in chosen
    return hits / rounds


def test_a_prompt_that_keeps_failing_moves_down_and_is_picked_less():
    cfg = resolve({"method": "mopps", "control": {"decay": 1.0}})
    selector = CONTROLLERS.get("mopps")(cfg)
    history, failing = PromptHistory(), Example("9-8-7=", "-6")
    others = [Example(f"{i}+1=", str(i + 1)) for i in range(7)]
    rates, means = [], []
    for step in range(4):
        rates.append(pick_rate(selector, history, failing, others))
        alpha, beta = forgetting_posterior(history, failing, 1.0, 1.0)
        means.append(alpha / (alpha + beta))
        visit(history, failing, 0, 8, step=step + 1)
    assert means == sorted(means, reverse=True) and means[-1] < 0.1
    assert rates[0] == pytest.approx(2 / 8, abs=0.07)  # unseen: as likely as any candidate
    assert rates[-1] < 0.05 and rates == sorted(rates, reverse=True)


def test_a_prompt_near_the_target_is_preferred_to_a_solved_one():
    cfg = resolve({"method": "mopps"})
    selector = CONTROLLERS.get("mopps")(cfg)
    history, even, solved = PromptHistory(), Example("1+1=", "2"), Example("2+2=", "4")
    for step in range(3):
        visit(history, even, 4, 8, step)
        visit(history, solved, 8, 8, step)
    chosen = [selector.select(Ctx(history), [even, solved], 1)[0] for _ in range(200)]
    assert chosen.count(even) > 180


def test_mopps_trains_on_b_prompts_drawn_from_eight_times_as_many_candidates():
    cfg = small_config(method="mopps", schedule={"steps": 3})
    trainer = Trainer(cfg, MemoryReporter())
    drawn = []
    original = trainer.task.train_batch
    trainer.task.train_batch = lambda n, rng: drawn.append(n) or original(n, rng)
    assert trainer.run() == "succeeded"
    assert drawn == [32, 32, 32]  # 4 prompts x 8 candidates, every step
    rows = trainer.reporter.metric_rows
    assert all(r["counters/samples"] == 16 * (i + 1) for i, r in enumerate(rows))  # rollouts: only the chosen 4
    assert 0 < rows[-1]["pipeline/control/predicted_pass_rate"] < 1
    assert np.isfinite(rows[-1]["pipeline/control/unseen_share"])
