"""The compare part of the JSON API: a comparison's data and its exports, for the runs the caller may see."""

from __future__ import annotations

from typing import Any, Literal

from django.http import HttpResponse, StreamingHttpResponse
from ninja import Query, Router
from pydantic import Field

from rolloutlab.accounts.auth import READERS
from rolloutlab.compare import export
from rolloutlab.compare.permalink import BadView, View, parse_view
from rolloutlab.compare.service import build_comparison, select_runs
from rolloutlab.inputs import Id, Strict, UserInputError, answers, text

router = Router(tags=["compare"])


class CompareQuery(Strict):
    """The compare page's permalink parameters (rolloutlab.compare.permalink)."""

    runs: text(4000) = Field("", description="comma-separated run ids")
    experiment: Id | None = None
    group: text(130) = ""
    metrics: text(2600) = Field("", description="comma-separated metric names")
    x: text(20) = ""
    smooth: text(40) = ""
    band: text(20) = Field("", description="minmax (the default), ci, se or none")
    seeds: text(10) = ""
    baseline: text(200) = ""
    target: text(40) = ""
    table: text(200) = ""


class ExportQuery(CompareQuery):
    format: Literal["csv", "parquet"] = "csv"


def view_of(query: CompareQuery) -> View:
    try:
        return parse_view({k: str(v) for k, v in query.model_dump().items() if v not in ("", None)})
    except BadView as exc:
        field = str(exc).split(":")[0]
        raise UserInputError(str(exc), {field: str(exc)}) from None


@router.get(
    "/compare",
    auth=READERS,
    response=answers({200: dict[str, Any]}),
    summary="Groups, curves, the final table and config differences",
)
def compare(request, query: Query[CompareQuery]):
    try:
        return build_comparison(view_of(query), request.auth)
    except BadView as exc:
        raise UserInputError(str(exc)) from None


@router.get(
    "/compare/export",
    auth=READERS,
    response=answers({200: bytes}),
    summary="Every point of the view's series: CSV or parquet",
)
def compare_export(request, query: Query[ExportQuery]):
    view = view_of(query)
    try:
        runs = select_runs(view, request.auth)
    except BadView as exc:
        raise UserInputError(str(exc)) from None
    if query.format == "parquet":
        response = HttpResponse(export.parquet_bytes(view, runs), content_type="application/vnd.apache.parquet")
        response["Content-Disposition"] = 'attachment; filename="rolloutlab-series.parquet"'
        return response
    response = StreamingHttpResponse(export.csv_lines(view, runs), content_type="text/csv")
    response["Content-Disposition"] = 'attachment; filename="rolloutlab-series.csv"'
    return response
