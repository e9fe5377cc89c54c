"""What the compare page shows: one context for a member's page and a share link's read-only view."""

from __future__ import annotations

from rolloutlab.compare.permalink import X_AXES, View
from rolloutlab.compare.service import group_options, offered_metrics, varying_knobs
from rolloutlab.compare.stats import BANDS, DEFAULT_BAND
from rolloutlab.runs.models import Run

AXIS_LABELS = {"step": "step", "tokens": "rollout tokens", "seconds": "training seconds"}


def compare_page_context(view: View, runs: list[Run]) -> dict:
    keys = offered_metrics(view, runs)
    unverified = [run for run in runs if run.unverified]
    return {
        "view": view,
        "permalink": view.query(),
        "keys": keys,
        "axes": [(axis, AXIS_LABELS[axis]) for axis in X_AXES],
        "unverified": unverified,
        "group_options": group_options(varying_knobs(runs)),
        "bands": [(name, label) for name, (label, _) in BANDS.items()],
        "default_band": BANDS[DEFAULT_BAND][0],
    }
