"""What the runs table changes: a run's name and notes in place, selected runs in bulk, the saved views.

The page's JavaScript calls these through the API (rolloutlab.runs.table_api); scripts may too.
A bulk action is all or nothing: one run the caller may not change refuses the whole action,
naming that run, and changes nothing.
"""

from __future__ import annotations

from typing import Literal

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import Http404
from django.urls import reverse
from pydantic import Field, model_validator

from rolloutlab.accounts import activity
from rolloutlab.accounts.access import Action, may
from rolloutlab.inputs import Id, Strict, TagName, UserInputError, text
from rolloutlab.runs import services
from rolloutlab.runs.access import get_runs_for_user, visible_projects
from rolloutlab.runs.columns import DEFAULT_COLUMNS, ViewIn, available_columns, column, table_rows
from rolloutlab.runs.models import Run, SavedView, Tag

MAX_NOTES = 5000
MAX_SELECTED = 500
# the most runs one comparison shows: the table refuses more before opening it, and the compare page
# (rolloutlab.compare.permalink) refuses a view of more
MAX_COMPARED = 200
CONFIRMED_ACTIONS = ("tag", "archive", "unarchive", "delete")  # those that change runs


# ---------------------------------------------------------------- rename and notes


class RunEdit(Strict):
    """A run's new name or notes (or both); whitespace around either is dropped."""

    name: text(200, min_length=1) | None = Field(None, description="the run's new name (1-200 characters)")
    notes: text(MAX_NOTES) | None = Field(None, description=f"free text, at most {MAX_NOTES} characters")

    @model_validator(mode="after")
    def _something(self):
        if self.name is None and self.notes is None:
            raise ValueError("give a name or notes to change")
        return self


def edit_run(run: Run, user, edit: RunEdit) -> Run:
    changed = {field: value for field, value in edit.model_dump().items() if value is not None}
    Run.objects.filter(id=run.id).update(**changed)
    if "name" in changed and changed["name"] != run.name:
        activity.note(user, "renamed", run.project, f"run #{run.id} {run.name} -> {changed['name']}")
    for field, value in changed.items():
        setattr(run, field, value)
    return run


# ---------------------------------------------------------------- bulk actions


class BulkIn(Strict):
    """An action on the runs selected in the table; those that change runs must be confirmed."""

    action: Literal["compare", "tag", "archive", "unarchive", "delete"]
    runs: list[Id] = Field(min_length=1, max_length=MAX_SELECTED, description="the selected runs' ids")
    tag: TagName | None = Field(None, description="the tag to add (action 'tag')")
    confirm: bool = Field(False, description="true once the user has confirmed an action that changes runs")


def bulk_action(user, order: BulkIn) -> dict:
    """Do the action on every selected run, or on none; returns what the page shows or opens next."""
    ids = list(dict.fromkeys(order.runs))  # a run selected twice is one run
    incomplete = missing_parts(order, ids)
    if incomplete:
        raise UserInputError(f"{order.action}: {', '.join(incomplete.values())}", incomplete)
    if order.action == "compare":
        runs_seen_by(user, ids)
        return {"url": reverse("compare:page") + "?runs=" + ",".join(map(str, ids))}
    if order.action in CONFIRMED_ACTIONS and not order.confirm:
        raise UserInputError(
            f"{order.action} {len(ids)} run(s)? Confirm it: nothing was changed", {"confirm": "must be true"}
        )
    runs = runs_changed_by(user, ids)
    if order.action == "delete":
        services.delete_runs(runs, user)
        return {"message": f"Deleted {len(runs)} run(s)."}
    if order.action == "tag":
        tag_runs(runs, user, order.tag)
        return {"message": f"Tagged {len(runs)} run(s) '{order.tag}'."}
    archive_runs(runs, user, archived=order.action == "archive")
    return {"message": f"{order.action.capitalize()}d {len(runs)} run(s)."}


def missing_parts(order: BulkIn, ids: list[int]) -> dict[str, str]:
    if order.action == "tag" and not order.tag:
        return {"tag": "give the tag to add"}
    if order.action == "compare" and len(ids) > MAX_COMPARED:
        return {"runs": f"compare at most {MAX_COMPARED} runs at once"}
    return {}


def runs_seen_by(user, ids: list[int]) -> list[Run]:
    """The runs, in the order given, through the one door to a user's runs (runs/access.py); its 404 says that
    the bulk action changed nothing."""
    try:
        return get_runs_for_user(user, ids)
    except Http404 as missing:
        raise Http404(f"{missing} among the runs you may see: nothing was changed") from None


def runs_changed_by(user, ids: list[int]) -> list[Run]:
    """As runs_seen_by, and a 403 naming every run the user may see but not change (not its owner or admin)."""
    runs = runs_seen_by(user, ids)
    refused = [run for run in runs if not may(user, Action.CHANGE, run.project.team_id, run.owner_id)]
    if refused:
        names = ", ".join(f"#{run.id}" for run in refused)
        raise PermissionDenied(f"only its owner or a team admin may change run {names}: nothing was changed")
    return runs


def tag_runs(runs: list[Run], user, name: str) -> None:
    with transaction.atomic():
        tag, _ = Tag.objects.get_or_create(name=name)
        tag.runs.add(*runs)
        for run in runs:
            activity.note(user, "tagged", run.project, f"{activity.run_subject(run)}: {name}")


def archive_runs(runs: list[Run], user, *, archived: bool) -> None:
    with transaction.atomic():
        Run.objects.filter(id__in=[run.id for run in runs]).update(archived=archived)
        for run in runs:
            activity.note(user, "archived" if archived else "unarchived", run.project, activity.run_subject(run))


# ---------------------------------------------------------------- saved views


def view_project(user, name: str | None):
    """The project a view belongs to, by name among those the user sees (None: the list of all projects)."""
    if not name:
        return None
    project = visible_projects(user).filter(name=name).order_by("id").first()
    if project is None:
        raise Http404(f"no project '{name}'")
    return project


def save_view(user, view: ViewIn) -> SavedView:
    """Create or replace the user's view of that name; it becomes the one the list opens with."""
    project = view_project(user, view.project)
    saved, _ = SavedView.objects.update_or_create(
        user=user, project=project, name=view.name, defaults={"columns": list(dict.fromkeys(view.columns))}
    )
    return saved


def views_in(user, project_name: str | None):
    """The user's views of that project's list; none where the project is not one the user sees."""
    if not project_name:
        return SavedView.objects.filter(user=user, project=None)
    return SavedView.objects.filter(user=user, project__in=visible_projects(user).filter(name=project_name))


def views_of(user, project_name: str | None) -> list[SavedView]:
    return list(views_in(user, project_name).select_related("project"))


def current_view(user, project_name: str | None, name: str | None) -> tuple[SavedView | None, list[str]]:
    """The view the list shows, and its columns: the one named (and now the latest used), else the latest used,
    else none and the default columns. A name the user has no view of is a 404."""
    views = views_in(user, project_name)
    if name:
        chosen = views.filter(name=name).first()
        if chosen is None:
            raise Http404(f"you have no saved view '{name}' of this list")
        chosen.save(update_fields=["used_at"])  # switching to it makes it the one the list opens with
    else:
        chosen = views.first()
    return chosen, (chosen.columns if chosen else list(DEFAULT_COLUMNS))


def table_context(user, query, runs: list[Run]) -> dict:
    """The runs list's table: its columns (those of the saved view shown), rows, and what the chooser offers."""
    view, keys = current_view(user, query.project, query.view)
    available = available_columns(runs)
    offered = {*available["fixed"], *available["config"], *available["metric"]}
    available["chosen elsewhere"] = [key for key in keys if key not in offered]  # a knob none of these runs has
    return {
        "rows": table_rows(runs, keys),
        "columns": [column(key) for key in keys],
        "chosen_columns": keys,
        "available_columns": available,
        "saved_views": views_of(user, query.project),
        "saved_view": view,
        "search": query.q or "",
        "archived": query.archived,
    }


def delete_view(user, project_name: str | None, name: str) -> None:
    project = view_project(user, project_name)
    deleted, _ = SavedView.objects.filter(user=user, project=project, name=name).delete()
    if not deleted:
        raise Http404(f"you have no saved view '{name}' here")
