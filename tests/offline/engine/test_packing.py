"""Length buckets (training/packing.py): every row once, no bucket narrower than its rows, the fewest positions."""

import itertools

import numpy as np
import torch

from workers.training.packing import length_buckets


def fewest_positions(lengths: list[int], most: int) -> int:
    """By trying every split of the sorted distinct lengths into at most `most` consecutive groups."""
    distinct, best = sorted(set(lengths)), None
    for groups in range(1, min(most, len(distinct)) + 1):
        for cuts in itertools.combinations(range(1, len(distinct)), groups - 1):
            bounds, cost = [0, *cuts, len(distinct)], 0
            for low, high in itertools.pairwise(bounds):
                width = distinct[high - 1]
                cost += sum(distinct[low] <= x <= width for x in lengths) * width
            best = cost if best is None else min(best, cost)
    return best


def test_buckets_cover_every_row_once_within_their_width_at_the_fewest_positions():
    rng = np.random.default_rng(0)
    for _ in range(200):
        lengths, most = rng.integers(0, 12, int(rng.integers(1, 14))).tolist(), int(rng.integers(1, 5))
        buckets = length_buckets(torch.tensor(lengths), most)
        assert 1 <= len(buckets) <= most
        assert sorted(r for rows, _ in buckets for r in rows.tolist()) == list(range(len(lengths)))
        assert all(max(lengths[r] for r in rows.tolist()) == width for rows, width in buckets)
        assert sum(len(rows) * width for rows, width in buckets) == fewest_positions(lengths, most)


def test_a_long_tail_is_split_off_and_one_bucket_is_one_forward():
    lengths = torch.tensor([3] * 30 + [4] * 20 + [12] * 10 + [39] * 4)
    assert [(len(rows), width) for rows, width in length_buckets(lengths, 3)] == [(50, 4), (10, 12), (4, 39)]
    ((rows, width),) = length_buckets(lengths, 1)
    assert rows.tolist() == list(range(64)) and width == 39
