"""What a run's page shows: one context for a member's page and a share link's read-only view."""

from __future__ import annotations

import yaml
from django.urls import reverse
from django.utils import timezone

from rolloutlab.accounts.models import ShareLink
from rolloutlab.accounts.sharing import url_token
from rolloutlab.metrics.models import ChartChoice
from rolloutlab.metrics.series import run_keys
from rolloutlab.runs import services
from rolloutlab.runs.models import FINAL_STATES, RESUMABLE_STATES, Kind, Run, State
from workers import metrics as metric
from workers.config import RunConfig

DEFAULT_CHARTS = [metric.REWARD_MEAN, metric.PASS_AT_1, metric.LOSS, metric.ROLLOUT_TOKENS_PER_S]
# the two metric columns of a runs table (runs list, experiment), for its template and runs_list.js (data-metric)
ROW_METRICS = {"pass1_metric": metric.PASS_AT_1, "reward_metric": metric.REWARD_MEAN}


def run_page_context(run: Run, user=None) -> dict:
    """What the run page shows; `user` (none on a shared link) opens it with the charts they last chose in the
    run's project. A run that failed before recording a metric shows no empty charts."""
    keys = run_keys(run.id)
    return {
        "run": run,
        "config_yaml": yaml.safe_dump(run.config, sort_keys=False),
        "keys": keys,
        "charts": chosen_charts(run, user, keys),
        "system_charts": [key for key in metric.SYSTEM_CHARTS if key in keys],  # those the worker sampled
        "failed": run.state in (State.FAILED, State.LOST),
        "default_charts": DEFAULT_CHARTS,
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


def chosen_charts(run: Run, user, keys: list[str]) -> list[str]:
    """The user's saved choice for the run's project, else the default charts: all of them while the run may still
    report (a page opened after its first evaluation still gets its reward and loss charts, which fill in live),
    those it has once it ended; none for a failed run without metrics."""
    saved = None
    if user is not None and user.is_authenticated:
        saved = ChartChoice.objects.filter(user=user, project_id=run.project_id).values_list("keys", flat=True).first()
    if saved is not None:
        return list(saved)
    if run.state in (State.FAILED, State.LOST) and not keys:
        return []
    if run.state not in FINAL_STATES:
        return list(DEFAULT_CHARTS)
    return [k for k in DEFAULT_CHARTS if k in keys] or DEFAULT_CHARTS


def save_chart_choice(run: Run, user, keys: list[str]) -> list[str]:
    ChartChoice.objects.update_or_create(user=user, project_id=run.project_id, defaults={"keys": keys})
    return keys


def live_share_links(run: Run) -> list[tuple[ShareLink, str]]:
    """The run's links that still open, each with its URL.

    A run's link holds exactly [run.id]: matched by equality, which every database backend
    supports (SQLite, the embedded mode's, has no JSON containment).
    """
    links = ShareLink.objects.filter(kind="run", run_ids=[run.id], revoked_at__isnull=True,
                                     expires_at__gt=timezone.now()).select_related("created_by")  # fmt: skip
    return [(link, reverse("share", args=[url_token(link)])) for link in links]
