"""The runs table's part of the JSON API: rename and notes, bulk actions, saved views of the columns.

PATCH  /api/runs/{id}        {"name": "...", "notes": "..."}  (in rolloutlab.runs.api, beside the run's GET)
POST   /api/runs/bulk        {"action": "archive", "runs": [1, 2], "confirm": true}
GET    /api/runs/views?project=p
PUT    /api/runs/views       {"name": "knobs", "project": "p", "columns": ["config:rollout.group_size"]}
DELETE /api/runs/views?project=p&name=knobs
"""

from __future__ import annotations

from typing import Any

from ninja import Query, Router
from pydantic import Field

from rolloutlab.inputs import ProjectName, Strict, answers, text
from rolloutlab.runs import table
from rolloutlab.runs.columns import ViewIn

router = Router(tags=["runs table"])


class ViewsQuery(Strict):
    project: ProjectName | None = Field(None, description="the project's views (none: those of all projects)")


class ViewName(ViewsQuery):
    name: text(50, min_length=1)


def view_json(view) -> dict:
    return {"name": view.name, "project": view.project.name if view.project else None, "columns": view.columns}


@router.post(
    "/runs/bulk",
    response=answers({200: dict[str, str]}),
    summary="Compare, tag, archive or delete selected runs: all of them, or none",
)
def bulk(request, payload: table.BulkIn):
    return table.bulk_action(request.auth, payload)


@router.get("/runs/views", response=answers({200: dict[str, list[dict[str, Any]]]}), summary="Your saved views")
def views(request, query: Query[ViewsQuery]):
    return {"views": [view_json(v) for v in table.views_of(request.auth, query.project)]}


@router.put("/runs/views", response=answers({200: dict[str, Any]}), summary="Save a view of the runs table")
def save_view(request, payload: ViewIn):
    return view_json(table.save_view(request.auth, payload))


@router.delete("/runs/views", response=answers({200: dict[str, str]}), summary="Delete one of your saved views")
def delete_view(request, query: Query[ViewName]):
    table.delete_view(request.auth, query.project, query.name)
    return {"message": f"Deleted the view '{query.name}'."}
