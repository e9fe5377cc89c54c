"""What a run's page shows: one context for a member's page and a share link's read-only view."""

from __future__ import annotations

import yaml
from django.urls import reverse
from django.utils import timezone

from rolloutlab.accounts.models import ShareLink
from rolloutlab.accounts.sharing import url_token
from rolloutlab.metrics.series import run_keys
from rolloutlab.runs.models import Kind, Run
from workers import metrics as metric
from workers.config import RunConfig

DEFAULT_CHARTS = [metric.REWARD_MEAN, metric.PASS_AT_1, metric.LOSS, metric.ROLLOUT_TOKENS_PER_S]
# the two metric columns of a runs table (runs list, experiment), for its template and runs_list.js (data-metric)
ROW_METRICS = {"pass1_metric": metric.PASS_AT_1, "reward_metric": metric.REWARD_MEAN}


def run_page_context(run: Run) -> dict:
    keys = run_keys(run.id)
    return {
        "run": run,
        "config_yaml": yaml.safe_dump(run.config, sort_keys=False),
        "keys": keys,
        "charts": [k for k in DEFAULT_CHARTS if k in keys] or DEFAULT_CHARTS,
        "default_charts": DEFAULT_CHARTS,
        "transitions": run.transitions.all(),
        "log_lines": list(run.log_lines.order_by("-id")[:200])[::-1],
        "artifacts": run.artifacts.all(),
        "sample_steps": list(run.samples.values_list("step", flat=True).distinct().order_by("step")),
        # an external run's config is its script's own JSON, not a RunConfig
        "eval_every": RunConfig.model_validate(run.config).eval.every if run.kind == Kind.TRAINER else 0,
    }


def live_share_links(run: Run) -> list[tuple[ShareLink, str]]:
    """The run's links that still open, each with its URL.

    A run's link holds exactly [run.id]: matched by equality, which every database backend
    supports (SQLite, the embedded mode's, has no JSON containment).
    """
    links = ShareLink.objects.filter(kind="run", run_ids=[run.id], revoked_at__isnull=True,
                                     expires_at__gt=timezone.now()).select_related("created_by")  # fmt: skip
    return [(link, reverse("share", args=[url_token(link)])) for link in links]
