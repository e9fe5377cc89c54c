"""RoRecomp: priority rows are the short-correct and long-incorrect; the rest are replayed as compensation."""

import torch

from tests.conftest import small_config
from tests.offline.engine.test_ragged import scored
from workers.config import resolve
from workers.pipeline.replay import REPLAYS
from workers.pipeline.replay.rorecomp.component import priority_rows
from workers.reporting import MemoryReporter
from workers.training.trainer import Trainer


def group_batch(lengths, correct):
    batch = scored([len(lengths)])
    batch.mask = torch.zeros(len(lengths), max(lengths))
    batch.tokens = torch.zeros(len(lengths), max(lengths), dtype=torch.long)
    batch.logprobs = torch.zeros(len(lengths), max(lengths))
    for row, n in enumerate(lengths):
        batch.mask[row, :n] = 1
    batch.correct = torch.tensor(correct)
    batch.rewards = batch.correct.float()
    return batch


def test_priority_rows_are_the_short_correct_and_the_long_incorrect():
    batch = group_batch([2, 5, 3, 9, 4, 8], [True, True, True, False, False, False])
    # correct lengths 2, 5, 3 (median 3): 2 and 3 are short; wrong lengths 9, 4, 8 (median 8): 9 and 8 are long
    assert priority_rows(batch).tolist() == [True, False, True, True, False, True]


def test_of_an_even_count_exactly_the_longer_half_of_the_incorrect_is_kept_as_of_the_correct_the_shorter():
    # 4 wrong of lengths 9, 4, 8, 6: the longer half is 9 and 8 (the lower median, 6, kept 6 as well: 3 of 4)
    batch = group_batch([9, 4, 8, 6, 2, 5, 3, 7], [False] * 4 + [True] * 4)
    assert priority_rows(batch).tolist() == [True, False, True, False, True, False, True, False]
    # of two incorrect, one; of two correct, one (the former form kept both incorrect ones)
    assert priority_rows(group_batch([3, 7, 2, 5], [False, False, True, True])).tolist() == [False, True, True, False]
    # one alone is kept on either side; ties with the median are kept together
    assert priority_rows(group_batch([4, 6], [False, True])).tolist() == [True, True]
    assert priority_rows(group_batch([5, 5, 2], [False, False, False])).tolist() == [True, True, False]


def test_the_rest_is_buffered_and_replayed_with_its_stored_tokens_every_kth_step():
    cfg = resolve({"method": "rorecomp", "replay": {"compensation_every": 2}})
    replay = REPLAYS.get("rorecomp")(cfg)
    first = group_batch([2, 5, 3, 9, 4, 8], [True, True, True, False, False, False])
    first.logprobs = torch.full_like(first.mask, -0.7) * first.mask
    mixed = replay.mix(first, step=1)  # an odd step: no compensation yet
    assert mixed.num_groups == 1 and mixed.in_loss.tolist() == [True, False, True, True, False, True]
    replay.store(mixed, 1)
    assert replay.metrics()["pipeline/replay/buffer"] == 1
    second = group_batch([3, 3], [True, False])
    mixed = replay.mix(second, step=2)
    assert mixed.num_groups == 2 and mixed.group_sizes == [2, 6]
    # the replayed group comes back whole, only its remaining rows in the loss, with its own tokens
    assert mixed.in_loss.tolist() == [True, True] + [False, True, False, False, True, False]
    assert torch.equal(mixed.logprobs[2:, :9], first.logprobs)
    assert replay.metrics()["pipeline/replay/compensation_samples"] == 2
    replay.store(mixed, 2)
    assert replay.metrics()["pipeline/replay/buffer"] == 0  # the second group had nothing left


def test_the_buffer_is_bounded():
    cfg = resolve({"method": "rorecomp", "replay": {"compensation_every": 1000, "capacity": 3}})
    replay = REPLAYS.get("rorecomp")(cfg)
    for step in range(1, 8):
        mixed = replay.mix(group_batch([2, 5, 3, 9], [True, True, False, False]), step)
        replay.store(mixed, step)
    assert len(replay.buffer) == 3


def test_a_rorecomp_run_trains_priority_rows_then_compensation():
    cfg = small_config(method="rorecomp", rollout={"max_new_tokens": 8}, schedule={"steps": 6})
    reporter = MemoryReporter()
    Trainer(cfg, reporter).run()
    rows = reporter.metric_rows
    assert all(r["pipeline/replay/priority_samples"] > 0 for r in rows)
    compensated = [r["pipeline/replay/compensation_samples"] > 0 for r in rows]
    assert not any(compensated[0::2]) and any(compensated[1::2])  # only on every second step
    # the replayed groups join the fresh ones in the trained batch
    assert any(r["pipeline/advantage/left_out"] > 0 for r in rows)
