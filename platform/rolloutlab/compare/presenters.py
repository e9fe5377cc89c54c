"""What the compare page shows: one context for a member's page and a share link's read-only view."""

from __future__ import annotations

from rolloutlab.compare.permalink import X_AXES, View
from rolloutlab.metrics.series import run_keys
from rolloutlab.runs.models import Run


def compare_page_context(view: View, runs: list[Run]) -> dict:
    keys = sorted({k for run in runs[:50] for k in run_keys(run.id)}) or view.metrics
    unverified = [run for run in runs if run.unverified]
    return {"view": view, "permalink": view.query(), "keys": keys, "axes": list(X_AXES), "unverified": unverified}
