"""The input layer: every value a user sends is one of these bounded types, checked at the edge.

Pages and the JSON API declare their inputs as pydantic models built from these
types; `UserInputError` (and pydantic's ValidationError) become a 400 naming the
field on both (rolloutlab.api for the API, `page_inputs` for pages), so a bound
declared here holds everywhere at once.
"""

from __future__ import annotations

from functools import wraps
from typing import Annotated

from django.shortcuts import render
from ninja import Path
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints, ValidationError

from rolloutlab_client.wire import MAX_INT32, MetricName, printable  # shared with the client, which imports no Django

MAX_ID = 2**63 - 1  # the primary keys are bigint


def ascii_digits(value):
    """Integers arrive as plain ASCII digits: '١٢' or '１２' is not an id (Python's int() would take it)."""
    if isinstance(value, str) and not (value.isascii() and value.lstrip("-").isdigit() and len(value) <= 20):
        raise ValueError("must be a whole number written with the digits 0-9")
    return value


def text(max_length: int, min_length: int = 0):
    return Annotated[
        str, StringConstraints(strip_whitespace=True, min_length=min_length, max_length=max_length),
        AfterValidator(printable),
    ]  # fmt: skip


Name = text(200)
ProjectName = text(100)
TagName = text(50)
Id = Annotated[int, BeforeValidator(ascii_digits), Field(ge=1, le=MAX_ID)]
Step = Annotated[int, BeforeValidator(ascii_digits), Field(ge=0, le=MAX_INT32)]
Tags = Annotated[list[TagName], Field(max_length=20)]


# the API's run id in a path; the route's int converter already admits only ASCII digits
RunId = Annotated[int, Path(ge=1, le=MAX_ID, description="a run id")]


def comma_separated(value):
    """'a,b' (or ?k=a,b&k=c) as a list: the pages' links write lists comma-separated."""
    given = [value] if isinstance(value, str) else value
    if isinstance(given, list) and all(isinstance(v, str) for v in given):
        return [part.strip() for v in given for part in v.split(",") if part.strip()]
    return value


MetricNames = Annotated[list[MetricName], BeforeValidator(comma_separated), Field(max_length=50)]


def depth_exceeds(text: str, limit: int) -> bool:
    """Whether brackets nest deeper than `limit`, counted outside strings (json.loads would recurse)."""
    depth, in_string, escaped = 0, False, False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > limit:
                return True
        elif char in "]}":
            depth -= 1
    return False


def control_characters(value, path: str = "") -> dict[str, str]:
    """{"task.path": "..."} for every string in a JSON-like value holding a control character."""
    found = {}
    if isinstance(value, dict):
        for key, item in value.items():
            found.update(control_characters(item, f"{path}.{key}" if path else str(key)))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found.update(control_characters(item, f"{path}.{i}"))
    elif isinstance(value, str):
        try:
            printable(value)
        except ValueError as exc:
            found[path or "value"] = str(exc)
    return found


class Strict(BaseModel):
    """An input model: unknown keys are refused by name, floats must be finite."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class RunPair(Strict):
    """?a=<run id>&b=<run id>"""

    a: Id
    b: Id


class ErrorOut(BaseModel):
    """Every error of the JSON API."""

    error: str
    fields: dict[str, str] = {}


ERROR_CODES = frozenset({400, 401, 403, 404, 405, 409, 413, 429, 503})


def answers(ok: dict) -> dict:
    """An endpoint's documented responses: its successes, and an ErrorOut for each error it may give."""
    return {**ok, ERROR_CODES: ErrorOut}


def file_response(media_type: str) -> dict:
    """openapi_extra for an endpoint answering with a file rather than JSON."""
    content = {media_type: {"schema": {"type": "string", "format": "binary"}}}
    return {"responses": {200: {"description": "the file", "content": content}}}


class UserInputError(ValueError):
    """Something the user sent that cannot be used; `fields` names each bad field."""

    def __init__(self, message: str, fields: dict[str, str] | None = None, status: int = 400):
        super().__init__(message)
        self.message, self.fields, self.status = message, fields or {}, status


def field_errors(exc: ValidationError, prefix_parts: int = 0) -> dict[str, str]:
    """pydantic's errors as {"dotted.field": "message"}."""
    fields = {}
    for error in exc.errors():
        where = ".".join(str(part) for part in error["loc"][prefix_parts:]) or "body"
        fields.setdefault(where, error["msg"].removeprefix("Value error, "))
    return fields


def parse_query(model: type[BaseModel], params) -> BaseModel:
    """A query string as a model; a key given twice or not declared is an error, not silently dropped."""
    values = {}
    for key in params:
        given = params.getlist(key)
        if len(given) > 1:
            raise UserInputError(f"{key} is given {len(given)} times", {key: "give it once"})
        values[key] = given[0]
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        raise UserInputError("invalid query", field_errors(exc)) from None


def page_inputs(model: type[BaseModel]):
    """For a page view: parse its query into `model` (passed as `query=`); a bad one renders a 400 page."""

    def decorate(view):
        @wraps(view)
        def wrapper(request, *args, **kwargs):
            try:
                query = parse_query(model, request.GET)
            except UserInputError as exc:
                return bad_input_page(request, exc)
            return view(request, *args, query=query, **kwargs)

        return wrapper

    return decorate


def bad_input_page(request, exc: UserInputError):
    return render(request, "error.html", {"message": exc.message, "fields": exc.fields}, status=exc.status)
