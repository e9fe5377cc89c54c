"""What an auditor asks of two runs: are their metric streams the same, and how do their records differ.

    compare_streams(original_rows, rerun_rows)  # "identical", or the first step and metric that diverge
    diff_records(record_a, record_b)            # config, code, packages, hardware, data, weights: only what differs

Rows are metrics.jsonl objects ({"step": 3, "reward/mean": 0.41, ...}). Only the
metrics that measure the computation are compared: timing, throughput, wall time and
system load differ between two otherwise identical runs (reporting.is_deterministic_metric).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from workers.reporting import is_deterministic_metric


def stream(rows: Iterable[dict]) -> dict[tuple[int, str], float]:
    points = {}
    for row in rows:
        step = int(row["step"])
        for key, value in row.items():
            if key != "step" and is_deterministic_metric(key):
                points[(step, key)] = float(value)
    return points


def same(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return a == b or (math.isnan(a) and math.isnan(b))


def compare_streams(original: Iterable[dict], rerun: Iterable[dict]) -> dict:
    """{"identical": True, "compared": n} or the first divergence: the earliest step, then the metric
    first in name order, with both values and their difference (a point one run lacks diverges too)."""
    a, b = stream(original), stream(rerun)
    keys = sorted(a.keys() | b.keys())
    for step, metric in keys:
        x, y = a.get((step, metric)), b.get((step, metric))
        if not same(x, y):
            delta = None if x is None or y is None else y - x
            return {"identical": False, "compared": len(keys), "step": step, "metric": metric,
                    "original": x, "rerun": y, "delta": delta}  # fmt: skip
    return {"identical": True, "compared": len(keys)}


def flatten(node, prefix: str = "") -> dict[str, object]:
    if not isinstance(node, dict):
        return {prefix.rstrip("."): node}
    flat: dict[str, object] = {}
    for key, value in node.items():
        flat.update(flatten(value, f"{prefix}{key}."))
    return flat


# Which fields of the record (repro.capture_environment) belong to which heading.
CATEGORIES = {
    "config": ["config", "config_hash", "seeds"],
    "code": ["code.revision", "code.dirty", "code.diff_sha256", "code.diff_redactions"],
    "packages": ["packages"],
    "hardware": ["python", "torch", "gpu", "cpu", "host", "platform", "env", "determinism"],
    "data": ["dataset_fingerprint", "data_stream"],
    "weights": ["initial_weights_sha256", "model_source"],
}


def diff_records(a: dict, b: dict) -> dict[str, list[dict]]:
    """Per heading, the items whose values differ: [{"item": "packages.tqdm", "a": "4.66.0", "b": "4.67.1"}]."""
    flat_a, flat_b = flatten(a), flatten(b)
    out: dict[str, list[dict]] = {}
    for category, prefixes in CATEGORIES.items():
        items = []
        for key in sorted(flat_a.keys() | flat_b.keys()):
            if not any(key == p or key.startswith(p + ".") for p in prefixes):
                continue
            x, y = flat_a.get(key), flat_b.get(key)
            if x != y:
                items.append({"item": key, "a": x, "b": y})
        out[category] = items
    return out
