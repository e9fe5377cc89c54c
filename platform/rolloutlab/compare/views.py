"""The compare page, its index of experiments, the sweep launcher and an experiment's progress
(their JSON is rolloutlab.compare.api)."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from pydantic import BeforeValidator, Field, ValidationError

from rolloutlab.accounts.access import home_team
from rolloutlab.accounts.sharing import create_link
from rolloutlab.compare.permalink import BadView, parse_view
from rolloutlab.compare.presenters import compare_page_context
from rolloutlab.compare.service import INDEX_PAGE_SIZE, experiments_for_index, select_runs
from rolloutlab.compare.sweeps import SweepError, launch_sweep, parse_sweep
from rolloutlab.execution.forms import LaunchQuery, form_sections, launch_defaults
from rolloutlab.inputs import Id, Strict, UserInputError, ascii_digits, bad_input_page, page_inputs, text
from rolloutlab.runs.access import get_experiment_for_user, get_project_for_user
from rolloutlab.runs.models import State
from rolloutlab.runs.presenters import ROW_METRICS
from workers.config import METHODS


@login_required
@require_GET
def compare_page(request):
    if not request.GET:  # the navigation's "Compare": pick what to compare first
        return redirect("compare:index")
    try:
        view = parse_view(request.GET)
        runs = select_runs(view, request.user)
    except BadView as exc:
        return render(request, "compare/error.html", {"message": str(exc)}, status=400)
    return render(request, "compare/compare.html", compare_page_context(view, runs))


class IndexQuery(Strict):
    project: Id | None = None
    page: Annotated[int, BeforeValidator(ascii_digits), Field(ge=1, le=100_000)] = 1


@login_required
@require_GET
@page_inputs(IndexQuery)
def index(request, query: IndexQuery):
    """The experiments (sweeps included) of every project the user's teams hold, or of one of them, newest first,
    each a comparison."""
    project = get_project_for_user(request.user, query.project) if query.project else None
    pages = Paginator(experiments_for_index(request.user, project), INDEX_PAGE_SIZE)
    return render(request, "compare/index.html", {"page": pages.get_page(query.page), "project": project})


class ShareCompareForm(Strict):
    model_config = Strict.model_config | {"extra": "ignore"}  # the CSRF token comes along
    query: text(8000, min_length=1)
    days: int = Field(7, ge=1, le=90)


@login_required
@require_POST
def share(request):
    """A read-only link to the comparison as shown (its runs fixed by id, even if it came from an experiment)."""
    try:
        form = ShareCompareForm.model_validate(
            {"query": request.POST.get("query", ""), "days": request.POST.get("days") or 7}
        )
        view = parse_view(QueryDict(form.query))
        runs = select_runs(view, request.user)
    except (ValidationError, BadView) as exc:
        return render(request, "compare/error.html", {"message": str(exc)}, status=400)
    fixed = replace(view, runs=[run.id for run in runs], experiment=None)
    _, token = create_link(request.user, "compare", runs, query=fixed.query(), days=form.days)
    url = request.build_absolute_uri(reverse("share", args=[token]))
    messages.info(request, f"Anyone with this link can read this comparison for {form.days} days: {url}")
    return redirect(f"{reverse('compare:page')}?{fixed.query()}")


@login_required
@require_http_methods(["GET", "POST"])
@page_inputs(LaunchQuery)
def sweep(request, query: LaunchQuery):
    """Methods x seeds (x a grid over up to two knobs) on one base config, launched as one experiment."""
    try:
        errors, values = {}, launch_defaults(request.user, query)
    except UserInputError as exc:  # ?from= a run reported by a script
        return bad_input_page(request, exc)
    if request.method == "POST":
        home_team(request.user)  # viewers may not launch: 403 before anything
        try:
            plan = parse_sweep(request.POST)
            experiment = launch_sweep(request.user, plan)
            return redirect("compare:experiment", experiment_id=experiment.id)
        except SweepError as exc:
            errors = exc.fields
            values = exc.values or values
        except UserInputError as exc:
            errors = exc.fields or {"project": exc.message}
    context = {
        "methods": [(name, preset.summary) for name, preset in sorted(METHODS.items())],
        "sections": form_sections(values, errors),
        "errors": errors,
        "post": request.POST if request.method == "POST" else {},
        "method": values.get("method") or "grpo",
        "chosen": request.POST.getlist("methods") if request.method == "POST" else [values.get("method") or "grpo"],
    }
    return render(request, "compare/sweep.html", context, status=400 if errors else 200)


@login_required
@require_GET
def experiment(request, experiment_id: int):
    exp = get_experiment_for_user(request.user, experiment_id)
    runs = list(exp.runs.order_by("id"))
    counts = {state: sum(r.state == state for r in runs) for state in State}
    context = {"experiment": exp, "runs": runs, "counts": counts, "compare": f"experiment={exp.id}", **ROW_METRICS}
    return render(request, "compare/experiment.html", context)
