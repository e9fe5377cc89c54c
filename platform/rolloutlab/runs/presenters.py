"""What a run's page shows of its record: one context for a member's page and a share link's read-only view.

Its charts are the metrics app's (rolloutlab.metrics.charts.chart_context): a page view adds them.
"""

from __future__ import annotations

import yaml
from django.urls import reverse
from django.utils import timezone

from rolloutlab.accounts.models import ShareLink
from rolloutlab.accounts.sharing import url_token
from rolloutlab.runs import services
from rolloutlab.runs.models import RESUMABLE_STATES, Kind, Run, State
from workers import metrics as metric
from workers.config import RunConfig

# the two metric columns of a runs table (runs list, experiment), for its template and runs_list.js (data-metric)
ROW_METRICS = {"pass1_metric": metric.PASS_AT_1, "reward_metric": metric.REWARD_MEAN}


def run_page_context(run: Run) -> dict:
    """What the run page shows of the run's record: its config, states, attempts, logs, artifacts, samples."""
    return {
        "run": run,
        "config_yaml": yaml.safe_dump(run.config, sort_keys=False),
        "failed": run.state in (State.FAILED, State.LOST),
        "transitions": run.transitions.all(),
        "attempts": list(run.attempts.all()),  # shown when there is more than one
        "resumable": run.kind == Kind.TRAINER and run.state in RESUMABLE_STATES and not services.imported(run),
        # whether a later state could offer Resume (the page shows the button when the run gets there, live)
        "may_resume": run.kind == Kind.TRAINER and not services.imported(run),
        # what Rollout Lab can launch again: a run its own trainer ran (an external run's script is elsewhere)
        "relaunchable": run.kind == Kind.TRAINER,
        "log_lines": list(run.log_lines.order_by("-id")[:200])[::-1],
        "artifacts": run.artifacts.all(),
        "sample_steps": list(run.samples.values_list("step", flat=True).distinct().order_by("step")),
        # an external run's config is its script's own JSON, not a RunConfig
        "eval_every": RunConfig.model_validate(run.config).eval.every if run.kind == Kind.TRAINER else 0,
        "eval_seconds": run.summary.get(metric.EVAL_S) or 0.0,  # the last evaluation's: the ETA counts those due
    }


def live_share_links(run: Run) -> list[tuple[ShareLink, str]]:
    """The run's links that still open, each with its URL.

    A run's link holds exactly [run.id]: matched by equality, which every database backend
    supports (SQLite, the embedded mode's, has no JSON containment).
    """
    links = ShareLink.objects.filter(kind="run", run_ids=[run.id], revoked_at__isnull=True,
                                     expires_at__gt=timezone.now()).select_related("created_by")  # fmt: skip
    return [(link, reverse("share", args=[url_token(link)])) for link in links]
