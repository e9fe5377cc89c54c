"""Non-finite metric values (NaN, +inf, -inf): how they are stored, sent and read back.

PostgreSQL's float8 could hold them, but JSON (the websocket, the API, a run's
summary in jsonb) cannot, and one such value used to stop a run's metrics for
good. So a point keeps value NULL and a small `kind` code saying which one it
was; every reader turns it into null plus that kind's name, never a number.

    kinds(np.array([1.0, nan, -inf]))  -> array([0, 1, 3], dtype=int16)
    point(7, float("inf"))             -> [7, None, "+inf"]
"""

from __future__ import annotations

import math

import numpy as np

FINITE, NAN, POS_INF, NEG_INF = 0, 1, 2, 3
NAMES = {NAN: "nan", POS_INF: "+inf", NEG_INF: "-inf"}


def kinds(values) -> np.ndarray:
    """The kind code of each value (FINITE for an ordinary number)."""
    values = np.asarray(values, dtype=np.float64)
    codes = np.zeros(values.shape, dtype=np.int16)
    codes[np.isnan(values)] = NAN
    codes[np.isposinf(values)] = POS_INF
    codes[np.isneginf(values)] = NEG_INF
    return codes


def kind_of(value: float) -> int:
    if math.isnan(value):
        return NAN
    if math.isinf(value):
        return POS_INF if value > 0 else NEG_INF
    return FINITE


def value_of(code: int) -> float:
    """The non-finite value a kind code stands for (NaN for an unknown one)."""
    return {POS_INF: math.inf, NEG_INF: -math.inf}.get(code, math.nan)


def to_json(value: float) -> float | None:
    """A value JSON can carry: non-finite becomes null (its kind travels beside it where it matters)."""
    return value if math.isfinite(value) else None


def point(step: int, value: float) -> list:
    """A point as the websocket sends it: [step, value], or [step, null, kind name] when not finite."""
    value = float(value)
    return [step, value] if math.isfinite(value) else [step, None, NAMES[kind_of(value)]]


def name_of(code: int | None) -> str | None:
    """The stored code's name, None for a finite point."""
    return NAMES.get(code or FINITE)
