"""The JSON API: the same services as the pages, for scripts, the SDK and the pages' own JavaScript.

Errors are JSON with a message; config errors name every bad field:
    400 {"error": "invalid config", "fields": {"rollout.group_size": "Input should be ..."}}
"""

from __future__ import annotations

import json

from django.http import JsonResponse
from django.shortcuts import get_object_or_404
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from rolloutlab.accounts.auth import api_login_required
from rolloutlab.metrics.series import read_series, run_keys
from rolloutlab.runs import services
from rolloutlab.runs.models import LogLine, Project, Run, Sample
from rolloutlab.runs.views import filtered_runs
from workers.config import json_schema
from workers.errors import ConfigError

MAX_SERIES_POINTS = 5000


def run_json(run: Run) -> dict:
    return {
        "id": run.id,
        "name": run.name,
        "project": run.project.name,
        "method": run.method,
        "task": run.task,
        "seed": run.seed,
        "state": run.state,
        "detail": run.detail,
        "step": run.step,
        "total_steps": run.total_steps,
        "train_seconds": run.train_seconds,
        "config_hash": run.config_hash,
        "queue": run.queue,
        "worker_host": run.worker_host,
        "parent": run.parent_id,
        "tags": [t.name for t in run.tags.all()],
        "created_at": run.created_at.isoformat(),
        "started_at": run.started_at.isoformat() if run.started_at else None,
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
        "summary": run.summary,
    }


def bad_request(message: str, **extra) -> JsonResponse:
    return JsonResponse({"error": message, **extra}, status=400)


@require_GET
@api_login_required
def schema(request):
    return JsonResponse(json_schema())


@require_http_methods(["GET", "POST"])
@api_login_required
def runs(request):
    if request.method == "GET":
        found, _, _ = filtered_runs(request.GET)
        if request.GET.get("ids"):
            found = found.filter(id__in=[int(i) for i in request.GET["ids"].split(",") if i.isdigit()])
        return JsonResponse({"runs": [run_json(r) for r in found[:500]]})
    return launch(request)


def launch(request):
    try:
        body = json.loads(request.body or b"{}")
    except json.JSONDecodeError as exc:
        return bad_request(f"the body is not valid JSON ({exc.msg})")
    if not isinstance(body, dict) or not isinstance(body.get("config", {}), dict):
        return bad_request("the body must be an object with a 'config' object")
    project = None
    if body.get("project"):
        project, _ = Project.objects.get_or_create(name=str(body["project"])[:100], defaults={"owner": request.user})
    try:
        run = services.launch_run(
            request.user, body.get("config", {}), project=project, name=str(body.get("name", ""))[:200],
            tags=[str(t) for t in body.get("tags", []) if isinstance(t, str)],
        )  # fmt: skip
    except ConfigError as exc:
        return bad_request("invalid config", fields=exc.fields)
    return JsonResponse(run_json(run), status=201)


@require_GET
@api_login_required
def run_detail(request, run_id: int):
    return JsonResponse(run_json(get_object_or_404(Run, id=run_id)))


@require_POST
@api_login_required
def cancel(request, run_id: int):
    run = get_object_or_404(Run, id=run_id)
    if not services.request_cancel(run, request.user):
        return JsonResponse({"error": f"the run is {run.state}; there is nothing to cancel"}, status=409)
    return JsonResponse(run_json(Run.objects.get(id=run_id)))


@require_POST
@api_login_required
def rerun(request, run_id: int):
    new = services.rerun(get_object_or_404(Run, id=run_id), request.user)
    return JsonResponse(run_json(new), status=201)


@require_GET
@api_login_required
def keys(request, run_id: int):
    get_object_or_404(Run, id=run_id)
    return JsonResponse({"keys": run_keys(run_id)})


@require_GET
@api_login_required
def series(request, run_id: int):
    """?keys=a,b&points=1000: each series downsampled to at most `points` points."""
    get_object_or_404(Run, id=run_id)
    names = [k for k in request.GET.get("keys", "").split(",") if k]
    try:
        points = int(request.GET.get("points", 1000))
    except ValueError:
        return bad_request("points must be an integer")
    if not 10 <= points <= MAX_SERIES_POINTS:
        return bad_request(f"points must be between 10 and {MAX_SERIES_POINTS}")
    return JsonResponse({"series": read_series(run_id, names, points)})


@require_GET
@api_login_required
def samples(request, run_id: int):
    """?step=N: the samples recorded at step N (the latest step with samples if none is given)."""
    run = get_object_or_404(Run, id=run_id)
    steps = list(Sample.objects.filter(run=run).values_list("step", flat=True).distinct().order_by("step"))
    step = request.GET.get("step")
    if step is not None and not step.lstrip("-").isdigit():
        return bad_request("step must be an integer")
    chosen = int(step) if step is not None else (steps[-1] if steps else None)
    rows = [s.data for s in Sample.objects.filter(run=run, step=chosen)] if chosen is not None else []
    return JsonResponse({"step": chosen, "steps": steps, "samples": rows})


@require_GET
@api_login_required
def logs(request, run_id: int):
    """?after=<line id>: log lines after that one (the last 200 if none is given)."""
    run = get_object_or_404(Run, id=run_id)
    after = request.GET.get("after", "")
    lines = LogLine.objects.filter(run=run)
    if after.isdigit():
        lines = lines.filter(id__gt=int(after)).order_by("id")[:1000]
    else:
        lines = list(lines.order_by("-id")[:200])[::-1]
    return JsonResponse({"lines": [{"id": line.id, "text": line.text} for line in lines]})
