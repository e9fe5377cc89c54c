"""The runs a user may see, filtered and sorted as the runs list and the API ask."""

from __future__ import annotations

from django.db.models import F, FloatField, Q, QuerySet
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast
from pydantic import Field, field_validator, model_validator

from rolloutlab.inputs import Id, MetricName, Name, ProjectName, Strict, TagName, text
from rolloutlab.runs.access import visible_runs
from rolloutlab.runs.models import Run, State

FILTERS = {"project": "project__name", "method": "method", "state": "state", "tag": "tags__name"}


class RunFilters(Strict):
    """The runs list's query: ?project=&method=&state=&tag=&sort=-metric:eval/pass@1&ids=1,2&q=&archived=&view="""

    project: ProjectName | None = None
    method: Name | None = None
    state: State | None = None
    tag: TagName | None = None
    sort: text(220) | None = Field(None, description="'metric:<name>' ascending or '-metric:<name>' descending")
    ids: text(4000) | None = Field(None, description="comma-separated run ids")
    # ---- the runs table: search, archived runs, the saved view whose columns are shown
    q: text(200) | None = Field(None, description="words that each appear in a run's name, tags or notes")
    archived: bool = Field(False, description="list the archived runs instead of the others")
    view: TagName | None = Field(None, description="the name of one of your saved views of the runs table")

    @model_validator(mode="before")
    @classmethod
    def _empty_means_any(cls, raw):
        """A filter the list's form leaves at "any" is sent empty (?state=&q=mc): no filter, not an error."""
        if isinstance(raw, dict):
            return {key: value for key, value in raw.items() if value not in ("", None)}
        return raw

    @field_validator("sort")
    @classmethod
    def _a_metric(cls, value):
        if value and not value.lstrip("-").startswith("metric:"):
            raise ValueError("sort by 'metric:<name>' or '-metric:<name>'")
        if value:
            MetricSort.model_validate({"name": value.lstrip("-").removeprefix("metric:")})
        return value

    @field_validator("ids")
    @classmethod
    def _run_ids(cls, value):
        if value:
            IdList.model_validate({"ids": [p for p in value.split(",") if p]})
        return value

    def id_list(self) -> list[int]:
        return [int(p) for p in (self.ids or "").split(",") if p]

    def given(self) -> dict[str, str]:
        return {name: getattr(self, name) for name in FILTERS if getattr(self, name)}


class MetricSort(Strict):
    name: MetricName


class IdList(Strict):
    ids: list[Id] = Field(max_length=500)


def filtered_runs(user, filters: RunFilters) -> QuerySet[Run]:
    runs = visible_runs(user).select_related("project", "project__team", "owner")
    runs = runs.prefetch_related("tags", "verifications")  # verifications: the runs list's Verify verdict
    for name, value in filters.given().items():
        runs = runs.filter(**{FILTERS[name]: value})
    if filters.ids:
        runs = runs.filter(id__in=filters.id_list())
    else:  # runs asked for by id are found archived or not
        runs = runs.filter(archived=filters.archived)
    runs = search(runs, filters.q or "")
    if filters.sort:
        key = filters.sort.lstrip("-").removeprefix("metric:")
        runs = runs.annotate(sort_value=Cast(KeyTextTransform(key, "summary"), FloatField()))
        value = F("sort_value")
        descending = filters.sort.startswith("-")
        runs = runs.order_by(value.desc(nulls_last=True) if descending else value.asc(nulls_last=True), "-id")
    return runs.distinct()


MAX_SEARCH_WORDS = 10


def search(runs: QuerySet[Run], words: str) -> QuerySet[Run]:
    """Runs where every word appears (any case) in the name, the notes or one of the tags."""
    for word in words.split()[:MAX_SEARCH_WORDS]:
        runs = runs.filter(Q(name__icontains=word) | Q(notes__icontains=word) | Q(tags__name__icontains=word))
    return runs
