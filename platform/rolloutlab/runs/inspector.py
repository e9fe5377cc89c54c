"""The sample inspector's view of one step: its stored samples grouped by the prompt group they came from,
filtered to the kind asked for, a page of groups at a time.

A group is shown with what describes the whole group (its size, how many were correct, its mean reward,
whether the filter dropped it) even when the filter shows only some of its samples, so a wrong sample is
always read beside its group's other answers.
"""

from __future__ import annotations

import math
from typing import Any, Literal

Show = Literal["all", "correct", "wrong", "truncated", "dropped", "pivot"]


def note(sample: dict, stage: str) -> str:
    return str((sample.get("stages") or {}).get(stage, ""))


MATCHES = {
    "all": lambda s: True,
    "correct": lambda s: bool(s.get("correct")),
    "wrong": lambda s: not s.get("correct"),
    "truncated": lambda s: bool(s.get("truncated")),
    "dropped": lambda s: note(s, "filter").startswith("dropped"),
    "pivot": lambda s: note(s, "advantage").startswith("pivot"),  # the median sample MC-GRPO leaves out
}


def group_key(sample: dict) -> str:
    """The engine numbers a step's groups; samples stored without a number (older runs, external clients)
    are grouped by their prompt and answer."""
    if isinstance(sample.get("group"), int):
        return f"#{sample['group']}"
    return f"{sample.get('prompt')}\0{sample.get('answer')}"


def summary(members: list[dict], shown: list[dict]) -> dict[str, Any]:
    rewards = [float(s.get("reward") or 0.0) for s in members]
    first = members[0]
    return {
        "prompt": first.get("prompt"),
        "rendered_prompt": first.get("rendered_prompt"),
        "answer": first.get("answer"),
        "size": len(members),
        "correct": sum(bool(s.get("correct")) for s in members),
        "mean_reward": sum(reward / len(rewards) for reward in rewards),  # no sum past the largest float
        "dropped": MATCHES["dropped"](first),
        "samples": shown,
    }


def inspect_step(samples: list[dict], show: Show, page: int, per_page: int) -> dict[str, Any]:
    """The groups of a step's samples that hold a sample of the kind `show`, page `page` (1-based; past the
    last page, the last) of `per_page` groups."""
    groups: dict[str, list[dict]] = {}
    for sample in samples:
        groups.setdefault(group_key(sample), []).append(sample)
    matching = []
    for members in groups.values():
        shown = [s for s in members if MATCHES[show](s)]
        if shown:
            matching.append(summary(members, shown))
    pages = max(1, math.ceil(len(matching) / per_page))
    page = min(page, pages)
    return {
        "groups": matching[(page - 1) * per_page : page * per_page],
        "page": page,
        "pages": pages,
        "matching_groups": len(matching),
        "matching_samples": sum(len(g["samples"]) for g in matching),
    }
