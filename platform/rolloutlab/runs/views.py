"""Pages: the runs list, the launch form, a run's detail; cancel and rerun."""

from __future__ import annotations

import markdown
import yaml
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import F, FloatField
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from rolloutlab.metrics.series import run_keys
from rolloutlab.runs import services
from rolloutlab.runs.forms import form_sections, parse_form
from rolloutlab.runs.models import Project, Run, State, Tag
from workers.config import METHODS, RunConfig, resolve
from workers.errors import ConfigError

DEFAULT_CHARTS = ["reward/mean", "eval/pass@1", "policy/loss", "throughput/rollout_tokens_per_s"]


def filtered_runs(params) -> tuple:
    runs = Run.objects.select_related("project", "owner").prefetch_related("tags")
    filters = {}
    for name, lookup in (("project", "project__name"), ("method", "method"), ("state", "state"), ("tag", "tags__name")):
        if params.get(name):
            filters[name] = params[name]
            runs = runs.filter(**{lookup: params[name]})
    sort = params.get("sort", "")
    key = sort.lstrip("-").removeprefix("metric:")
    if sort.lstrip("-").startswith("metric:") and key:
        runs = runs.annotate(sort_value=Cast(KeyTextTransform(key, "summary"), FloatField()))
        value = F("sort_value")
        runs = runs.order_by(value.desc(nulls_last=True) if sort.startswith("-") else value.asc(nulls_last=True), "-id")
    return runs.distinct(), filters, sort


@login_required
def run_list(request):
    runs, filters, sort = filtered_runs(request.GET)
    shown = list(runs[:500])
    metrics = sorted({key for run in shown for key in run.summary})  # any final metric can be sorted on
    context = {
        "runs": shown,
        "filters": filters,
        "sort": sort,
        "projects": Project.objects.values_list("name", flat=True),
        "methods": sorted(METHODS),
        "states": [s.value for s in State],
        "tags": Tag.objects.values_list("name", flat=True),
        "sort_metrics": metrics or ["eval/pass@1", "reward/mean"],
    }
    return render(request, "runs/list.html", context)


@login_required
def method_card(request, name: str):
    """A method preset's card (docs/methods/<name>.md), rendered; only the presets' names are looked up."""
    if name not in METHODS:
        raise Http404(f"no method '{name}'")
    text = (settings.BASE_DIR / "docs" / "methods" / f"{name}.md").read_text()
    card = markdown.markdown(text, extensions=["tables"])  # our own files, not user input
    return render(request, "runs/method_card.html", {"name": name, "card": card})


def launch_defaults(request) -> dict:
    """Form values: a run's config (?from=<id>), else the chosen method's preset over the defaults."""
    if request.GET.get("from", "").isdigit():
        run = Run.objects.filter(id=int(request.GET["from"])).first()
        if run:
            return run.config
    method = request.GET.get("method", "grpo")
    return resolve({"method": method if method in METHODS else "grpo"}).model_dump(mode="json")


@login_required
def launch(request):
    errors: dict[str, str] = {}
    if request.method == "POST":
        raw, errors = parse_form(request.POST)
        values = raw
        if not errors:
            try:
                run = services.launch_run(
                    request.user, raw, project=pick_project(request), name=request.POST.get("name", "").strip(),
                    tags=[t.strip() for t in request.POST.get("tags", "").split(",")],
                )  # fmt: skip
                return redirect("runs:detail", run_id=run.id)
            except ConfigError as exc:
                errors = exc.fields
    else:
        values = launch_defaults(request)
    context = {
        "methods": [(name, desc) for name, (desc, _) in sorted(METHODS.items())],
        "method": values.get("method") or "",
        "sections": form_sections(values, errors),
        "errors": errors,
        "projects": Project.objects.values_list("name", flat=True),
        "post": request.POST if request.method == "POST" else {},
    }
    return render(request, "runs/launch.html", context, status=400 if errors else 200)


def pick_project(request) -> Project:
    name = (request.POST.get("project") or "default").strip()[:100]
    project, _ = Project.objects.get_or_create(name=name, defaults={"owner": request.user})
    return project


@login_required
def run_detail(request, run_id: int):
    run = get_object_or_404(Run.objects.select_related("project", "owner", "parent"), id=run_id)
    keys = run_keys(run.id)
    context = {
        "run": run,
        "config_yaml": yaml.safe_dump(run.config, sort_keys=False),
        "keys": keys,
        "charts": [k for k in DEFAULT_CHARTS if k in keys] or DEFAULT_CHARTS,
        "default_charts": DEFAULT_CHARTS,
        "transitions": run.transitions.all(),
        "log_lines": list(run.log_lines.order_by("-id")[:200])[::-1],
        "artifacts": run.artifacts.all(),
        "sample_steps": list(run.samples.values_list("step", flat=True).distinct().order_by("step")),
        "eval_every": RunConfig.model_validate(run.config).eval.every,
    }
    return render(request, "runs/detail.html", context)


@login_required
@require_POST
def cancel(request, run_id: int):
    run = get_object_or_404(Run, id=run_id)
    if services.request_cancel(run, request.user):
        run.refresh_from_db()
        messages.info(
            request,
            "Cancelled." if run.state == State.CANCELLED else "Cancel requested: the run stops at its next phase.",
        )
    else:
        messages.warning(request, f"The run is {run.state}; there is nothing to cancel.")
    return redirect("runs:detail", run_id=run.id)


@login_required
@require_POST
def rerun(request, run_id: int):
    run = get_object_or_404(Run, id=run_id)
    new = services.rerun(run, request.user)
    return redirect("runs:detail", run_id=new.id)
