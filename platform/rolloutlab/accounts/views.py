"""Pages of one's account and teams: API tokens, team members and roles, a project's activity log."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from pydantic import Field, ValidationError

from rolloutlab.accounts import services, sharing
from rolloutlab.accounts.access import role_of, visible_teams
from rolloutlab.accounts.models import Activity, ApiToken, Role
from rolloutlab.compare.permalink import parse_view
from rolloutlab.compare.presenters import compare_page_context
from rolloutlab.inputs import Strict, UserInputError, field_errors, text
from rolloutlab.metrics.charts import chart_context
from rolloutlab.runs.access import get_project_for_user, get_run_for_user, get_runs_for_user
from rolloutlab.runs.presenters import run_page_context


class TokenForm(Strict):
    name: text(ApiToken._meta.get_field("name").max_length, min_length=1)  # what its column holds
    days: int | None = Field(None, ge=1, le=3650, description="expires after this many days; empty: never")


class MemberForm(Strict):
    username: text(150, min_length=1)
    role: Role = Role.MEMBER


def form_of(model, post, keys):
    """The posted fields as `model`, or UserInputError naming each bad one."""
    values = {key: post.get(key) for key in keys if post.get(key) not in (None, "")}
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        raise UserInputError("invalid form", field_errors(exc)) from None


@login_required
@require_http_methods(["GET", "POST"])
def tokens(request):
    raw, errors = None, {}
    if request.method == "POST":
        try:
            form = form_of(TokenForm, request.POST, ("name", "days"))
            _, raw = services.issue_token(request.user, form.name, form.days)
        except UserInputError as exc:
            errors = exc.fields
    context = {"tokens": ApiToken.objects.filter(user=request.user).order_by("-created_at"), "raw": raw,
               "errors": errors}  # fmt: skip
    return render(request, "accounts/tokens.html", context, status=400 if errors else 200)


@login_required
@require_POST
def revoke_token(request, token_id: int):
    services.revoke_token(services.get_token_for_user(request.user, token_id))
    messages.info(request, "Token revoked: it no longer opens the API.")
    return redirect("accounts:tokens")


@login_required
@require_GET
def teams(request):
    shown = [(team, role_of(request.user, team.id), team.memberships.select_related("user").order_by("user__username"))
             for team in visible_teams(request.user).order_by("name")]  # fmt: skip
    return render(request, "accounts/teams.html", {"teams": shown, "roles": [r.value for r in Role]})


@login_required
@require_POST
def set_member(request, team_id: int):
    team = services.get_team_for_user(request.user, team_id)
    services.require_team_admin(request.user, team)  # 403 before the form is even read
    try:
        form = form_of(MemberForm, request.POST, ("username", "role"))
        services.set_member(request.user, team, form.username, form.role)
        messages.info(request, f"{form.username} is now {form.role} of {team}.")
    except UserInputError as exc:
        messages.warning(request, f"{exc.message}: {'; '.join(exc.fields.values())}" if exc.fields else exc.message)
    return redirect("accounts:teams")


@login_required
@require_POST
def remove_member(request, team_id: int, membership_id: int):
    team = services.get_team_for_user(request.user, team_id)
    try:
        services.remove_member(request.user, team, membership_id)
    except UserInputError as exc:
        messages.warning(request, exc.message)
    return redirect("accounts:teams")


@login_required
@require_GET
def activity(request, project_id: int):
    project = get_project_for_user(request.user, project_id)
    entries = Activity.objects.filter(project=project).select_related("actor")[:500]
    return render(request, "accounts/activity.html", {"project": project, "entries": entries})


@require_GET
def shared(request, token: str):
    """A share link's read-only page: its run, or its comparison; no login, nothing else reachable."""
    grant = sharing.open_grant(token)
    if grant.link.kind == "run":
        run = get_run_for_user(grant, grant.run_ids[0])
        return render(
            request, "runs/detail.html", {**run_page_context(run), **chart_context(run), "share_token": token}
        )
    view = parse_view(QueryDict(grant.link.query))
    context = compare_page_context(view, get_runs_for_user(grant, view.runs))
    return render(request, "compare/compare.html", {**context, "share_token": token})


@login_required
@require_POST
def revoke_share(request, link_id: int):
    link = sharing.revoke(request.user, link_id)
    messages.info(request, "Share link revoked: it no longer opens.")
    if link.kind == "run":
        return redirect("runs:detail", run_id=link.run_ids[0])
    return redirect(f"{reverse('compare:page')}?{link.query}")
