"""The run page's rollout views, read from the groups a run sampled (GroupOutcome): per-prompt pass rates over
training and the distribution of completion lengths per step.

Steps are binned into at most `columns` columns of equal width so a long run draws as fast as a short one; a
cell holds the pooled rate of its bin (correct samples over samples), not a mean of means.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from django.db.models import Count, F, Max, Min, Sum

from rolloutlab.metrics.models import GroupOutcome

MAX_PROMPTS = 200  # rows of the pass-rate view: the prompts seen most often


def rollout_views(run_id: int, columns: int) -> dict[str, Any]:
    """Both views, over the same step bins."""
    first, width = step_bins(run_id, columns)
    return {"pass_rates": pass_rates(run_id, first, width), "lengths": length_distribution(run_id, first, width)}


def step_bins(run_id: int, columns: int) -> tuple[int, int]:
    """(first step, bin width) of at most `columns` bins over the run's group outcomes."""
    span = GroupOutcome.objects.filter(run_id=run_id).aggregate(first=Min("step"), last=Max("step"))
    first, last = span["first"] or 0, span["last"] or 0
    return first, max(1, -(-(last - first + 1) // columns))


def pass_rates(run_id: int, first: int, width: int) -> dict[str, Any]:
    """Prompts seen at two or more steps (the most often seen first, at most MAX_PROMPTS) by step bins: the share
    of their samples that were correct in each bin, None where the prompt was not sampled."""
    outcomes = GroupOutcome.objects.filter(run_id=run_id)
    repeated = (
        outcomes.values("prompt", "answer")
        .annotate(seen=Count("step", distinct=True))
        .filter(seen__gte=2)
        .order_by("-seen", "prompt")[:MAX_PROMPTS]
    )
    rows = {(r["prompt"], r["answer"]): i for i, r in enumerate(repeated)}
    cells = (
        outcomes.filter(prompt__in={p for p, _ in rows})
        .annotate(column=(F("step") - first) / width)
        .values("prompt", "answer", "column")
        .annotate(correct=Sum("correct"), samples=Sum("size"))
    )
    used = sorted({c["column"] for c in cells})
    position = {column: j for j, column in enumerate(used)}
    z: list[list[float | None]] = [[None] * len(used) for _ in rows]
    for cell in cells:
        row = rows.get((cell["prompt"], cell["answer"]))
        if row is not None and cell["samples"]:
            z[row][position[cell["column"]]] = cell["correct"] / cell["samples"]
    return {
        "prompts": [f"{p} → {a}" for p, a in rows],
        "steps": [first + column * width for column in used],
        "width": width,
        "z": z,
    }


def length_distribution(run_id: int, first: int, width: int) -> dict[str, Any]:
    """Completion lengths (tokens) by step bin: each column's share of samples at each length."""
    counts: dict[int, Counter] = defaultdict(Counter)
    for step, lengths in GroupOutcome.objects.filter(run_id=run_id).values_list("step", "lengths").iterator():
        counts[(step - first) // width].update(lengths)
    used = sorted(counts)
    longest = max((max(c) for c in counts.values() if c), default=0)
    z = []
    for length in range(longest + 1):
        z.append([counts[col][length] / max(1, sum(counts[col].values())) for col in used])
    return {"steps": [first + col * width for col in used], "lengths": list(range(longest + 1)), "width": width, "z": z}
