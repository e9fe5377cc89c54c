"""Rows of similar completion length forwarded together (schedule.length_buckets).

A training forward pads every row to the longest completion of its chunk. With long-tailed lengths
most of those positions are padding: the long-tail testbed's rows average 15 tokens against a
longest of 38, so 60% of the positions computed are thrown away. Splitting a chunk into a few
buckets of rows of similar length, each padded only to its own longest, computes the same
log-probabilities (up to the rounding of other batch shapes); the loss and its gradient are then
taken over the whole chunk, exactly as before, so no objective has to know.

    buckets = length_buckets(extents, 4)   # [(rows, width), ...] covering every row once
"""

from __future__ import annotations

import numpy as np
import torch


def length_buckets(extents: torch.Tensor, most: int) -> list[tuple[torch.Tensor, int]]:
    """At most `most` buckets of the rows with `extents` (B,) positions each: (the rows, in their order, and
    the width they are padded to), chosen to compute the fewest positions, rows x width summed over buckets.

    Buckets hold rows of consecutive lengths, which is where an optimal split lies; the split itself is an
    exact dynamic programme over the distinct lengths (at most `most` cuts among them).
    """
    lengths = extents.cpu().numpy()
    distinct, counts = np.unique(lengths, return_counts=True)  # ascending
    cuts = cheapest_cuts(distinct, counts, most)
    buckets, low = [], 0
    for high in cuts:  # bucket = distinct lengths low .. high-1
        width = int(distinct[high - 1])
        rows = np.nonzero((lengths >= distinct[low]) & (lengths <= width))[0]
        buckets.append((torch.from_numpy(rows).to(extents.device), width))
        low = high
    return buckets


def cheapest_cuts(distinct: np.ndarray, counts: np.ndarray, most: int) -> list[int]:
    """Ends (exclusive indices into `distinct`) of at most `most` consecutive groups of the distinct lengths
    that minimise sum(rows in group x longest of group)."""
    m = len(distinct)
    rows_before = np.concatenate([[0], np.cumsum(counts)])  # rows with a length below distinct[j]
    best = rows_before[1:] * distinct.astype(np.int64)  # (m,) one group ending at j: all rows up to j
    ends = [np.zeros(m, dtype=np.int64)]  # ends[k][j]: where the last group of the best k+1 groups ending at j starts
    for _ in range(1, min(most, m)):
        nxt, start = best.copy(), ends[-1].copy()  # no better with one group more: the split stays
        for j in range(1, m):  # last group = distinct[i .. j], after the best split of [0 .. i-1]
            options = best[:j] + (rows_before[j + 1] - rows_before[1 : j + 1]) * int(distinct[j])
            i = int(np.argmin(options))
            if options[i] < nxt[j]:
                nxt[j], start[j] = options[i], i + 1
        best = nxt
        ends.append(start)
    cuts, j = [], m
    for start in reversed(ends):  # walk back from the last group; a start of 0 means nothing is before it
        cuts.append(j)
        j = int(start[j - 1])
        if j == 0:
            break
    return cuts[::-1]
