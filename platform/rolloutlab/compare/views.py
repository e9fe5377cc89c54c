"""The compare page, its JSON, and its exports; the sweep launcher and an experiment's progress."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse, JsonResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET

from rolloutlab.accounts.auth import api_login_required
from rolloutlab.compare import export
from rolloutlab.compare.service import build_comparison
from rolloutlab.compare.sweeps import SweepError, launch_sweep, parse_sweep
from rolloutlab.compare.view import X_AXES, BadView, parse_view
from rolloutlab.metrics.series import run_keys
from rolloutlab.runs.forms import form_sections
from rolloutlab.runs.models import Experiment, Run, State
from rolloutlab.runs.views import launch_defaults
from workers.config import METHODS


@login_required
@require_GET
def compare_page(request):
    try:
        view = parse_view(request.GET)
    except BadView as exc:
        return render(request, "compare/error.html", {"message": str(exc)}, status=400)
    runs = Run.objects.filter(id__in=view.runs) if view.runs else Run.objects.filter(experiment_id=view.experiment)
    keys = sorted({k for run in runs[:50] for k in run_keys(run.id)}) or view.metrics
    context = {"view": view, "permalink": view.query(), "keys": keys, "axes": list(X_AXES)}
    return render(request, "compare/compare.html", context)


@require_GET
@api_login_required
def compare_data(request):
    try:
        return JsonResponse(build_comparison(parse_view(request.GET)))
    except BadView as exc:
        return JsonResponse({"error": str(exc)}, status=400)


@require_GET
@api_login_required
def compare_export(request):
    try:
        view = parse_view(request.GET)
    except BadView as exc:
        return JsonResponse({"error": str(exc)}, status=400)
    if request.GET.get("format") == "parquet":
        response = HttpResponse(export.parquet_bytes(view), content_type="application/vnd.apache.parquet")
        response["Content-Disposition"] = 'attachment; filename="rolloutlab-series.parquet"'
        return response
    response = StreamingHttpResponse(export.csv_lines(view), content_type="text/csv")
    response["Content-Disposition"] = 'attachment; filename="rolloutlab-series.csv"'
    return response


@login_required
def sweep(request):
    """Methods x seeds (x a grid over up to two knobs) on one base config, launched as one experiment."""
    errors, values = {}, launch_defaults(request)
    if request.method == "POST":
        try:
            plan = parse_sweep(request.POST)
            experiment = launch_sweep(request.user, plan)
            return redirect("compare:experiment", experiment_id=experiment.id)
        except SweepError as exc:
            errors = exc.fields
            values = exc.values or values
    context = {
        "methods": [(name, desc) for name, (desc, _) in sorted(METHODS.items())],
        "sections": form_sections(values, errors),
        "errors": errors,
        "post": request.POST if request.method == "POST" else {},
        "method": values.get("method") or "grpo",
        "chosen": request.POST.getlist("methods") if request.method == "POST" else [values.get("method") or "grpo"],
    }
    return render(request, "compare/sweep.html", context, status=400 if errors else 200)


@login_required
def experiment(request, experiment_id: int):
    exp = get_object_or_404(Experiment.objects.select_related("project"), id=experiment_id)
    runs = list(exp.runs.order_by("id"))
    counts = {state: sum(r.state == state for r in runs) for state in State}
    context = {"experiment": exp, "runs": runs, "counts": counts, "compare": f"experiment={exp.id}"}
    return render(request, "compare/experiment.html", context)
