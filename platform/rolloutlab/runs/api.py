"""The runs part of the JSON API: the same services as the pages, for scripts, the SDK and the pages' JavaScript.

Each endpoint declares its inputs as bounded types (rolloutlab.inputs) and loads
objects only through rolloutlab.runs.access; errors are rolloutlab.api's.
"""

from __future__ import annotations

from typing import Annotated, Any

from django.urls import reverse
from ninja import Query, Router, Status
from pydantic import Field, WithJsonSchema

from rolloutlab.accounts.access import Action
from rolloutlab.accounts.auth import READERS
from rolloutlab.execution import external
from rolloutlab.execution import services as execution
from rolloutlab.inputs import (
    MAX_ID,
    MetricName,
    MetricNames,
    Name,
    ProjectName,
    RunId,
    Step,
    Strict,
    Tags,
    UserInputError,
    answers,
)
from rolloutlab.metrics.charts import save_chart_choice
from rolloutlab.metrics.rollouts import rollout_views
from rolloutlab.metrics.series import read_series, run_keys
from rolloutlab.runs import services, table
from rolloutlab.runs.access import get_run_for_user, project_for_launch
from rolloutlab.runs.inspector import Show, inspect_step
from rolloutlab.runs.models import LogLine, Sample
from rolloutlab.runs.queries import RunFilters, filtered_runs
from rolloutlab.runs.serializers import run_detail_json, run_json
from rolloutlab_client.wire import ExternalRunIn, ExternalRunOut, FinishIn, PointsIn, SamplesIn, StoredOut
from workers.config import input_schema, json_schema

router = Router(tags=["runs"])
MAX_SERIES_POINTS = 5000
LIST_LIMIT = 500


# The config's documented type is the run config's own JSON Schema (so the API's fuzzing reaches inside it);
# what checks it is execution.validate_config, the one entry point every way of launching passes through.
RunConfigIn = Annotated[dict[str, Any], WithJsonSchema(input_schema())]


class LaunchIn(Strict):
    config: RunConfigIn = Field(default_factory=dict, description="A RunConfig: a method and any knobs over it")
    name: Name = ""
    tags: Tags = []
    project: ProjectName | None = Field(None, description="A project of yours (made in your team if new)")


class SeriesQuery(Strict):
    keys: MetricNames = Field(default_factory=list, description="metric names, comma-separated")
    points: int = Field(1000, ge=10, le=MAX_SERIES_POINTS)


class SamplesQuery(Strict):
    step: Step | None = Field(None, description="The step (the latest with samples if none)")
    show: Show = Field("all", description="Only the groups holding samples of this kind, and only those samples")
    page: int = Field(1, ge=1, le=100_000, description="The page of groups (past the last: the last)")
    per_page: int = Field(10, ge=1, le=100, description="Groups per page")


class ChartsIn(Strict):
    keys: list[MetricName] = Field(max_length=50, description="The metrics to chart, in order")


class RolloutsQuery(Strict):
    columns: int = Field(100, ge=2, le=1000, description="Step bins of the views (at most)")


class LogsQuery(Strict):
    after: int | None = Field(None, ge=0, le=MAX_ID, description="Lines after this line id (else the last 200)")


@router.get(
    "/schema", response=answers({200: dict[str, Any]}), summary="The RunConfig JSON Schema that drives the launch form"
)
def schema(request):
    return json_schema()


@router.get(
    "/runs",
    url_name="runs",
    response=answers({200: dict[str, list[dict[str, Any]]]}),
    summary="The runs you may see, filtered",
)
def runs(request, filters: Query[RunFilters]):
    return {"runs": [run_json(r) for r in filtered_runs(request.auth, filters)[:LIST_LIMIT]]}


@router.post(
    "/runs",
    url_name="runs",
    response=answers({201: dict[str, Any]}),
    summary="Launch a run (validated before anything is queued)",
)
def launch(request, payload: LaunchIn):
    user = request.auth
    project = project_for_launch(user, payload.project) if payload.project else None
    run = execution.launch_run(user, payload.config, project=project, name=payload.name, tags=payload.tags)
    return Status(201, run_json(run))


@router.get("/runs/{int:run_id}", auth=READERS, url_name="run", response=answers({200: dict[str, Any]}))
def run_detail(request, run_id: RunId):
    return run_detail_json(get_run_for_user(request.auth, run_id))


@router.delete(
    "/runs/{int:run_id}",
    url_name="run",
    response=answers({204: None}),
    summary="Delete a finished run (its owner or a team admin)",
)
def delete(request, run_id: RunId):
    services.delete_run(get_run_for_user(request.auth, run_id, Action.CHANGE), request.auth)
    return Status(204, None)


@router.post("/runs/{int:run_id}/cancel", response=answers({200: dict[str, Any]}))
def cancel(request, run_id: RunId):
    run = get_run_for_user(request.auth, run_id, Action.CHANGE)
    if not execution.request_cancel(run, request.auth):
        raise UserInputError(f"the run is {run.state}; there is nothing to cancel", status=409)
    return run_json(get_run_for_user(request.auth, run_id))


@router.post(
    "/runs/{int:run_id}/resume",
    response=answers({200: dict[str, Any]}),
    summary="Queue a failed, cancelled or lost run again: it continues from its last checkpoint",
)
def resume(request, run_id: RunId):
    run = execution.resume_run(get_run_for_user(request.auth, run_id, Action.CHANGE), request.auth)
    return run_detail_json(run)


@router.post("/runs/{int:run_id}/rerun", response=answers({201: dict[str, Any]}))
def rerun(request, run_id: RunId):
    return Status(201, run_json(execution.rerun(get_run_for_user(request.auth, run_id, Action.CHANGE), request.auth)))


@router.get("/runs/{int:run_id}/keys", auth=READERS, response=answers({200: dict[str, list[str]]}))
def keys(request, run_id: RunId):
    return {"keys": run_keys(get_run_for_user(request.auth, run_id).id)}


@router.get(
    "/runs/{int:run_id}/series",
    auth=READERS,
    response=answers({200: dict[str, Any]}),
    summary="Each series downsampled to <= points",
)
def series(request, run_id: RunId, query: Query[SeriesQuery]):
    run = get_run_for_user(request.auth, run_id)
    return {"series": read_series(run.id, query.keys, query.points)}


@router.get("/runs/{int:run_id}/samples", auth=READERS, response=answers({200: dict[str, Any]}))
def samples(request, run_id: RunId, query: Query[SamplesQuery]):
    run = get_run_for_user(request.auth, run_id)
    steps = list(Sample.objects.filter(run=run).values_list("step", flat=True).distinct().order_by("step"))
    chosen = query.step if query.step is not None else (steps[-1] if steps else None)
    rows = [s.data for s in Sample.objects.filter(run=run, step=chosen)] if chosen is not None else []
    return {
        "step": chosen,
        "steps": steps,
        "samples": rows,
        **inspect_step(rows, query.show, query.page, query.per_page),
    }


@router.get("/runs/{int:run_id}/rollouts", auth=READERS, response=answers({200: dict[str, Any]}))
def rollouts(request, run_id: RunId, query: Query[RolloutsQuery]):
    """Per-prompt pass rates over training and the completion-length distribution per step."""
    run = get_run_for_user(request.auth, run_id)
    return rollout_views(run.id, query.columns)


@router.put("/runs/{int:run_id}/charts", response=answers({200: dict[str, list[str]]}))
def choose_charts(request, run_id: RunId, payload: ChartsIn):
    """The metrics this user charts on the run pages of the run's project, remembered for every run of it."""
    run = get_run_for_user(request.auth, run_id)
    return {"keys": save_chart_choice(run, request.auth, list(dict.fromkeys(payload.keys)))}


@router.get("/runs/{int:run_id}/logs", auth=READERS, response=answers({200: dict[str, list[dict[str, Any]]]}))
def logs(request, run_id: RunId, query: Query[LogsQuery]):
    lines = LogLine.objects.filter(run=get_run_for_user(request.auth, run_id))
    if query.after is not None:
        lines = lines.filter(id__gt=query.after).order_by("id")[:1000]
    else:
        lines = list(lines.order_by("-id")[:200])[::-1]
    return {"lines": [{"id": line.id, "text": line.text} for line in lines]}


# ---------------------------------------------------------------- the runs table: rename and notes
# (here, not in rolloutlab.runs.table_api: one router must hold every method of /runs/{id})


@router.patch(
    "/runs/{int:run_id}",
    url_name="run",
    response=answers({200: dict[str, Any]}),
    summary="Rename a run or edit its notes",
)
def edit(request, run_id: RunId, payload: table.RunEdit):
    run = table.edit_run(get_run_for_user(request.auth, run_id, Action.CHANGE), request.auth, payload)
    return run_json(run)


# ---------------------------------------------------------------- external runs (rolloutlab_client.client)


@router.post(
    "/runs/external",
    url_name="external_runs",
    response=answers({200: ExternalRunOut, 201: ExternalRunOut}),
    summary="Start a run that a script trains and reports itself (200: its key already started one)",
)
def start_external(request, payload: ExternalRunIn):
    run, new = external.start_external_run(request.auth, payload)
    return Status(201 if new else 200, {"id": run.id, "url": reverse("runs:detail", args=[run.id])})


@router.post(
    "/runs/{int:run_id}/points",
    response=answers({200: StoredOut}),
    summary="Metric points of an external run; a (name, step) already stored is skipped",
)
def points(request, run_id: RunId, payload: PointsIn):
    run = get_run_for_user(request.auth, run_id, Action.CHANGE)
    return {"received": len(payload.points), "stored": external.record_points(run, payload.points)}


@router.post(
    "/runs/{int:run_id}/samples",
    response=answers({200: StoredOut}),
    summary="Rollout samples of an external run; a key already stored is skipped",
)
def post_samples(request, run_id: RunId, payload: SamplesIn):
    run = get_run_for_user(request.auth, run_id, Action.CHANGE)
    return {"received": len(payload.samples), "stored": external.record_samples(run, payload.samples)}


@router.post("/runs/{int:run_id}/finish", response=answers({200: dict[str, Any]}), summary="End an external run")
def finish(request, run_id: RunId, payload: FinishIn):
    run = external.finish_external_run(get_run_for_user(request.auth, run_id, Action.CHANGE), payload)
    return run_json(get_run_for_user(request.auth, run.id))
