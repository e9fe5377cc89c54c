"""Helpers shared by control components that divide a step's rollouts among its prompts."""

from __future__ import annotations

import numpy as np


def fixed_mean_sizes(scores: np.ndarray, mean: int, low: int, high: int) -> tuple[list[int], float]:
    """Integer group sizes proportional to `scores` (P,), each in [low, high], summing to exactly len(scores) x mean.

    The proportionality constant is the shadow price of the budget, found by bisection; the
    rounding remainder goes to the largest fractional parts. Returns the sizes and the price."""
    total = len(scores) * mean
    scores = np.maximum(scores, 1e-12)

    def sizes_at(price: float) -> np.ndarray:
        return np.clip(scores / price, low, high)

    lo, hi = 1e-12, float(scores.max()) / low * 1e6
    for _ in range(200):  # the sum falls as the price rises
        mid = (lo * hi) ** 0.5
        lo, hi = (mid, hi) if sizes_at(mid).sum() > total else (lo, mid)
    real = sizes_at(hi)
    sizes = np.floor(real).astype(int)
    for i in np.argsort(-(real - sizes), kind="stable"):  # hand out what rounding down left
        if sizes.sum() >= total:
            break
        if sizes[i] < high:
            sizes[i] += 1
    return sizes.tolist(), hi
