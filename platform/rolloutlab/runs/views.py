"""Pages: the runs list, the launch form, a run's detail; cancel, resume and rerun."""

from __future__ import annotations

import markdown
import yaml
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from rolloutlab.accounts.access import Action, home_team
from rolloutlab.accounts.sharing import create_link
from rolloutlab.audit import trust
from rolloutlab.execution import services as execution
from rolloutlab.execution.forms import (
    LaunchFields,
    LaunchQuery,
    ShareForm,
    check_config,
    duration_estimate,
    form_sections,
    form_values,
    launch_defaults,
    parse_form,
    parse_yaml,
    preset_values,
    prompt_preview,
    schedule_warnings,
)
from rolloutlab.inputs import UserInputError, bad_input_page, page_inputs
from rolloutlab.metrics.charts import chart_context
from rolloutlab.runs import services, table
from rolloutlab.runs.access import get_run_for_user, project_for_launch, visible_projects, visible_runs
from rolloutlab.runs.models import Run, State, Tag
from rolloutlab.runs.presenters import ROW_METRICS, live_share_links, run_page_context
from rolloutlab.runs.queries import RunFilters, filtered_runs
from workers import metrics as metric
from workers.config import METHODS
from workers.errors import ConfigError


@login_required
@require_GET
@page_inputs(RunFilters)
def run_list(request, query: RunFilters):
    shown = list(filtered_runs(request.user, query).annotate(signed_import=trust.signed_import())[:500])
    metrics = sorted({key for run in shown for key in run.summary})  # any final metric can be sorted on
    context = {
        "runs": shown,
        "filters": query.given(),
        "sort": query.sort or "",
        "projects": visible_projects(request.user).values_list("name", flat=True).distinct(),
        "methods": sorted(METHODS),
        "states": [s.value for s in State],
        "tags": Tag.objects.filter(runs__in=visible_runs(request.user)).values_list("name", flat=True).distinct(),
        "sort_metrics": metrics or [metric.PASS_AT_1, metric.REWARD_MEAN],
        **ROW_METRICS,
        **table.table_context(request.user, query, shown),  # search, columns, saved views, bulk actions
    }
    return render(request, "runs/list.html", context)


@login_required
@require_GET
def method_card(request, name: str):
    """A method preset's card (docs/methods/<name>.md), rendered; only the presets' names are looked up."""
    if name not in METHODS:
        raise Http404(f"no method '{name}'")
    text = (settings.BASE_DIR / "docs" / "methods" / f"{name}.md").read_text()
    card = markdown.markdown(text, extensions=["tables"])  # our own files, not user input
    return render(request, "runs/method_card.html", {"name": name, "card": card})


@login_required
@require_http_methods(["GET", "POST"])
@page_inputs(LaunchQuery)
def launch(request, query: LaunchQuery):
    errors: dict[str, str] = {}
    try:
        values = launch_defaults(request.user, query)  # ?from= a run the user cannot see is a 404 on any method
    except UserInputError as exc:  # ?from= a run reported by a script
        return bad_input_page(request, exc)
    if request.method == "POST":
        home_team(request.user)  # a viewer of every team they belong to may not launch: 403 before anything
        yaml_mode = request.POST.get("mode") == "yaml"
        raw, errors = parse_yaml(request.POST.get("config_yaml", "")) if yaml_mode else parse_form(request.POST)
        values = raw
        if not errors:
            try:
                about = LaunchFields.from_post(request.POST)
                project = project_for_launch(request.user, about.project)
                run = execution.launch_run(request.user, raw, project=project, name=about.name, tags=about.tags)
                return redirect("runs:detail", run_id=run.id)
            except (ConfigError, UserInputError) as exc:
                errors = exc.fields
    context = {
        "methods": [(name, preset.summary) for name, preset in sorted(METHODS.items())],
        "method": values.get("method") or "",
        "sections": form_sections(values, errors),
        "errors": errors,
        "warnings": schedule_warnings(values),  # beside the form, not errors: the run may still launch
        "estimate": duration_estimate(values),
        "projects": visible_projects(request.user).values_list("name", flat=True).distinct(),
        "post": request.POST if request.method == "POST" else {},
        "presets": preset_values(),
        "differing": set(preset_values()["presets"].get(values.get("method") or "", {})),
        "yaml_mode": request.method == "POST" and request.POST.get("mode") == "yaml",
    }
    return render(request, "runs/launch.html", context, status=400 if errors else 200)


@login_required
@require_POST
def launch_yaml(request):
    """The launch form as it stands, as the YAML editor's text (launch.js, on switching to YAML)."""
    raw, errors = parse_form(request.POST)
    if errors:
        return JsonResponse({"errors": errors}, status=400)
    return JsonResponse({"yaml": yaml.safe_dump(raw, sort_keys=False)})


@login_required
@require_POST
def launch_check(request):
    """The YAML editor's text checked as a launch would check it: its problems by field, the schedule's warnings,
    and (when it is valid) every form field's value, for launch.js to switch back to the form."""
    raw, errors = parse_yaml(request.POST.get("config_yaml", ""))
    config = None
    if not errors:
        config, errors = check_config(raw)
    if errors:
        return JsonResponse({"errors": errors, "warnings": []})
    values = form_values(config.model_dump(mode="json"))
    return JsonResponse(
        {"errors": {}, "warnings": schedule_warnings(raw), "values": values, "method": raw.get("method")}
    )


@login_required
@require_POST
def launch_warnings(request):
    """The warnings of the launch form as it stands, for launch.js to refresh them on every change."""
    raw, errors = parse_form(request.POST)
    if errors:
        return JsonResponse({"warnings": [], "estimate": "", "prompt": {}})
    return JsonResponse(
        {"warnings": schedule_warnings(raw), "estimate": duration_estimate(raw), "prompt": prompt_preview(raw)}
    )


@login_required
@require_GET
def run_detail(request, run_id: int):
    run = get_run_for_user(request.user, run_id, queryset=Run.objects.select_related("project", "owner", "parent"))
    context = {**run_page_context(run), **chart_context(run, request.user), "share_links": live_share_links(run)}
    return render(request, "runs/detail.html", context)


@login_required
@require_POST
def cancel(request, run_id: int):
    run = get_run_for_user(request.user, run_id, Action.CHANGE)
    if execution.request_cancel(run, request.user):
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
def resume(request, run_id: int):
    run = get_run_for_user(request.user, run_id, Action.CHANGE)
    try:
        execution.resume_run(run, request.user)
    except UserInputError as exc:
        messages.warning(request, exc.message)
    else:
        messages.info(request, "Resumed: a new attempt continues the run from its last checkpoint.")
    return redirect("runs:detail", run_id=run.id)


@login_required
@require_POST
def rerun(request, run_id: int):
    run = get_run_for_user(request.user, run_id, Action.CHANGE)
    try:
        new = execution.rerun(run, request.user)
    except UserInputError as exc:
        messages.warning(request, exc.message)
        return redirect("runs:detail", run_id=run.id)
    return redirect("runs:detail", run_id=new.id)


@login_required
@require_POST
def share(request, run_id: int):
    run = get_run_for_user(request.user, run_id)
    try:
        days = ShareForm.from_post(request.POST).days
    except UserInputError as exc:
        messages.warning(request, f"{exc.message}: {', '.join(exc.fields.values())}")
        return redirect("runs:detail", run_id=run.id)
    _, token = create_link(request.user, "run", [run], days=days)
    url = request.build_absolute_uri(reverse("share", args=[token]))
    messages.info(request, f"Anyone with this link can read the run for {days} days: {url}")
    return redirect("runs:detail", run_id=run.id)


@login_required
@require_POST
def delete(request, run_id: int):
    run = get_run_for_user(request.user, run_id, Action.CHANGE)
    try:
        services.delete_run(run, request.user)
    except UserInputError as exc:
        messages.warning(request, exc.message)
        return redirect("runs:detail", run_id=run.id)
    messages.info(request, f"Deleted run #{run_id}.")
    return redirect("runs:list")
