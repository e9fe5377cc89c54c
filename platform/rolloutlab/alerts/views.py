"""A project's page: its runs at a glance, its activity, and its alert rules (listed, added, muted, deleted)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db.models import Count
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST
from pydantic import ValidationError

from rolloutlab.accounts.access import Action, may
from rolloutlab.alerts import services
from rolloutlab.alerts.models import AlertEvent, AlertRule
from rolloutlab.inputs import UserInputError, field_errors
from rolloutlab.runs.access import get_project_for_user, visible_runs
from rolloutlab.runs.models import FINAL_STATES


@login_required
@require_http_methods(["GET", "POST"])
def project_page(request, project_id: int):
    project = get_project_for_user(request.user, project_id)
    errors, posted = {}, {}
    if request.method == "POST":
        if not may(request.user, Action.LAUNCH, project.team_id):  # a viewer: 403 before the form is read
            raise PermissionDenied("only a member of the project's team may add an alert")
        posted = request.POST
        try:
            services.create_rule(request.user, project, rule_from_post(request.POST))
            messages.info(request, "Alert added.")
            return redirect("alerts:project", project_id=project.id)
        except UserInputError as exc:
            errors = exc.fields or {"kind": exc.message}
    context = {
        "project": project,
        "rules": AlertRule.objects.filter(project=project).annotate(fired=Count("events")),
        "events": AlertEvent.objects.filter(rule__project=project).select_related("rule", "run")[:50],
        "runs": visible_runs(request.user).filter(project=project).order_by("-id")[:20],
        "may_add": may(request.user, Action.LAUNCH, project.team_id),
        "states": FINAL_STATES,
        "errors": errors,
        "posted": posted,
    }
    return render(request, "alerts/project.html", context, status=400 if errors else 200)


def rule_from_post(post) -> services.RuleIn:
    """The form's fields as a rule: lists split on commas, empty fields left out; UserInputError naming each bad one."""
    values = {key: post.get(key) for key in ("kind", "metric", "threshold", "steps", "webhook") if post.get(key)}
    values["above"] = post.get("direction", "above") == "above"
    values["states"] = post.getlist("states")
    values["emails"] = [e.strip() for e in post.get("emails", "").split(",") if e.strip()]
    try:
        return services.RuleIn.model_validate(values)
    except ValidationError as exc:
        raise UserInputError("invalid alert", field_errors(exc)) from None


@login_required
@require_POST
def mute(request, project_id: int, rule_id: int):
    project = get_project_for_user(request.user, project_id)
    rule = services.rule_for_change(request.user, project, rule_id)
    rule.muted = request.POST.get("muted") == "true"
    rule.save(update_fields=["muted"])
    messages.info(request, f"Alert {'muted' if rule.muted else 'on again'}: {rule}.")
    return redirect("alerts:project", project_id=project.id)


@login_required
@require_POST
def delete(request, project_id: int, rule_id: int):
    project = get_project_for_user(request.user, project_id)
    rule = services.rule_for_change(request.user, project, rule_id)
    rule.delete()
    messages.info(request, "Alert deleted.")
    return redirect("alerts:project", project_id=project.id)
