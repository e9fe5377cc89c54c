"""DOTS: attention-estimated adaptive difficulty from a measured reference set; rollout replay."""

import pytest
import torch

from tests.conftest import small_config
from tests.offline.engine.test_ragged import scored
from workers.config import resolve
from workers.pipeline.control.dots.component import attention_estimate
from workers.pipeline.replay import REPLAYS
from workers.reporting import MemoryReporter
from workers.training.trainer import Trainer


def test_a_candidate_like_a_reference_gets_its_difficulty_and_others_interpolate():
    references = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    difficulty = torch.tensor([0.9, 0.1])
    candidates = torch.tensor([[2.0, 0.0], [0.0, 3.0], [1.0, 1.0], [1.0, 0.2]])
    got = attention_estimate(candidates, references, difficulty, temperature=0.01)
    assert got[0] == pytest.approx(0.9, abs=1e-4) and got[1] == pytest.approx(0.1, abs=1e-4)
    assert got[2] == pytest.approx(0.5, abs=1e-4)  # equally like both: the mean
    assert 0.5 < float(got[3]) < 0.9  # nearer the first
    warm = attention_estimate(candidates, references, difficulty, temperature=100.0)
    assert torch.allclose(warm, torch.full((4,), 0.5), atol=0.01)  # a hot softmax averages everything


def test_selection_prefers_an_estimated_difficulty_near_the_target():
    cfg = small_config(method="dots", schedule={"steps": 3})
    trainer = Trainer(cfg, MemoryReporter())
    trainer.run()
    dots = trainer.stages.control
    assert dots.references is not None and len(dots.references) == cfg.rollout.prompts_per_step
    candidates = trainer.task.train_batch(40, trainer.state.data_rng)
    embeddings = dots.embed(_ctx(trainer), candidates)
    estimate = attention_estimate(embeddings, dots.references, dots.reference_difficulty, dots.temperature)
    chosen = dots.select(_ctx(trainer), candidates, 5)
    picked = torch.tensor([estimate[candidates.index(e)] for e in chosen])
    others = torch.tensor([estimate[i] for i, e in enumerate(candidates) if e not in chosen])
    assert (picked - 0.5).abs().max() <= (others - 0.5).abs().min() + 1e-6


def _ctx(trainer):
    class Ctx:
        policy = trainer.policy

    return Ctx()


def informative(rewards, step):
    batch = scored([2] * (len(rewards) // 2))
    batch.rewards = torch.tensor(rewards)
    batch.logprobs = torch.full_like(batch.mask, -0.1 * step)
    batch.born_step = step
    batch.in_loss = torch.ones(len(rewards), dtype=torch.bool)
    return batch


def test_the_replay_buffer_is_fifo_bounded_and_keeps_only_informative_groups():
    cfg = resolve({"method": "dots", "replay": {"groups": 2, "capacity": 3}})
    replay = REPLAYS.get("rollout-replay")(cfg)
    for step in range(1, 5):
        batch = replay.mix(informative([1.0, 0.0, 1.0, 1.0], step), step)  # group 2 is all equal
        replay.store(batch, step)
    assert len(replay.buffer) == 3
    assert [g.born_step for g in replay.buffer] == [2, 3, 4]  # the oldest dropped first
    assert all(float(g.rewards.max()) > float(g.rewards.min()) for g in replay.buffer)
    mixed = replay.mix(informative([0.0, 1.0, 0.0, 0.0], 5), 5)
    assert mixed.num_groups == 4 and replay.metrics()["pipeline/replay/replayed_groups"] == 2
    # replayed rows keep the log-probabilities of the policy that sampled them
    for g in (2, 3):
        rows = slice(mixed.offsets[g], mixed.offsets[g + 1])
        step = int(round(-float(mixed.logprobs[rows][0, 0]) / 0.1))
        assert step in (2, 3, 4) and mixed.notes[mixed.offsets[g]]["replay"].startswith("replayed (sampled at step")
    assert replay.metrics()["pipeline/replay/mean_age"] > 0


def test_a_dots_run_trains_on_fresh_plus_replayed_groups():
    cfg = small_config(
        method="dots", replay={"groups": 2}, schedule={"steps": 4}, objective={"old_logprobs": "sampler"}
    )
    reporter = MemoryReporter()
    trainer = Trainer(cfg, reporter)
    seen = []
    original = trainer.learner.update

    def update(batch, step=1, entropies=None):
        seen.append((batch.num_groups, step))
        return original(batch, step, entropies)

    trainer.learner.update = update
    trainer.run()
    rows = reporter.metric_rows
    assert any(r["pipeline/replay/replayed_groups"] > 0 for r in rows[1:])
    assert any(groups == cfg.rollout.prompts_per_step + 2 for groups, _ in seen)
    assert all("pipeline/control/estimated_difficulty" in r for r in rows[1:])
