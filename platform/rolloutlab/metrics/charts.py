"""Which charts a run's page draws: the metrics the run recorded, the user's saved choice, the defaults.

    {**run_page_context(run), **chart_context(run, user)}   # the run page (rolloutlab.runs.presenters)

The run's record is the runs app's; which of its series to chart is this app's, beside the series.
"""

from __future__ import annotations

from rolloutlab.metrics.models import ChartChoice
from rolloutlab.metrics.series import run_keys
from rolloutlab.runs.models import FINAL_STATES, Run, State
from workers import metrics as metric

DEFAULT_CHARTS = [metric.REWARD_MEAN, metric.PASS_AT_1, metric.LOSS, metric.ROLLOUT_TOKENS_PER_S]
EPISODE_CHARTS = [metric.EPISODE_SUCCESS, metric.EPISODE_TURNS]  # beside them for a run of multi-turn episodes


def default_charts(run: Run) -> list[str]:
    """The charts a run opens with before its user chose any: an environment's runs add success and turns."""
    return DEFAULT_CHARTS + (EPISODE_CHARTS if run.environment != "none" else [])


def chart_context(run: Run, user=None) -> dict:
    """The run page's charts; `user` (none on a shared link) opens it with the charts they last chose in the run's
    project. A run that failed before recording a metric shows no empty charts."""
    keys = run_keys(run.id)
    return {
        "keys": keys,
        "charts": chosen_charts(run, user, keys),
        "system_charts": [key for key in metric.SYSTEM_CHARTS if key in keys],  # those the worker sampled
        "default_charts": default_charts(run),
        "environment": run.environment,
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
    defaults = default_charts(run)
    if run.state not in FINAL_STATES:
        return defaults
    return [k for k in defaults if k in keys] or defaults


def save_chart_choice(run: Run, user, keys: list[str]) -> list[str]:
    ChartChoice.objects.update_or_create(user=user, project_id=run.project_id, defaults={"keys": keys})
    return keys
