"""The JSON API, declared with schemas (Django Ninja on pydantic): /api/openapi.json, docs at /api/docs.

Who calls: a logged-in session (CSRF checked on every state change) or
`Authorization: Bearer <token>` (no cookie, so no CSRF). Every error is JSON:

    400 {"error": "invalid config", "fields": {"rollout.group_size": "Input should be ..."}}
    401 / 403 / 404 / 405 / 409 / 413 / 503 {"error": "...", "fields": {}}
"""

from __future__ import annotations

import json
import math

from django.core.exceptions import PermissionDenied
from django.db import InterfaceError, OperationalError
from django.http import Http404, JsonResponse
from kombu.exceptions import OperationalError as BrokerError
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.parser import Parser
from ninja.renderers import JSONRenderer
from redis.exceptions import ConnectionError as RedisConnectionError

from rolloutlab import outages
from rolloutlab.accounts.auth import MEMBERS
from rolloutlab.audit.api import router as audit_router
from rolloutlab.compare.api import router as compare_router
from rolloutlab.inputs import UserInputError, depth_exceeds
from rolloutlab.outages import ServiceUnavailable
from rolloutlab.runs.api import router as runs_router
from rolloutlab.runs.table_api import router as runs_table_router
from workers.bundle import BundleError
from workers.errors import ConfigError

MAX_JSON_DEPTH = 64


class BoundedJsonParser(Parser):
    """JSON bodies as UTF-8 objects of bounded depth; anything else is the caller's error, not a 500."""

    def parse_body(self, request):
        try:
            text = request.body.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UserInputError(f"the body is not UTF-8 (byte {exc.start})") from None
        if depth_exceeds(text, MAX_JSON_DEPTH):
            raise UserInputError(f"the body nests deeper than {MAX_JSON_DEPTH} levels")
        try:
            return json.loads(text or "{}", parse_constant=refuse_constant, parse_float=finite_float)
        except json.JSONDecodeError as exc:
            raise UserInputError(f"the body is not valid JSON ({exc.msg})") from None
        except UserInputError:
            raise
        except ValueError:  # an integer of thousands of digits
            raise UserInputError("the body holds a number out of range") from None


def finite_float(literal: str) -> float:
    value = float(literal)
    if math.isinf(value):
        raise UserInputError(f"the body holds a number too large for a float ({literal[:40]})")
    return value


def refuse_constant(name: str):
    raise UserInputError(f"the body is not valid JSON ({name} is not a JSON number)")


class FiniteJsonRenderer(JSONRenderer):
    """JSON as the standard writes it. A float that is not finite (a mean of values near the largest float, a sum
    that overflowed) is sent as null: Python would write Infinity or NaN, which no browser's JSON.parse reads."""

    def render(self, request, data, *, response_status):
        return json.dumps(finite_only(data), cls=self.encoder_class, allow_nan=False, **self.json_dumps_params)


def finite_only(data):
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, dict):
        return {key: finite_only(value) for key, value in data.items()}
    if isinstance(data, list | tuple):
        return [finite_only(value) for value in data]
    return data


api = NinjaAPI(
    title="Rollout Lab API", version="1", urls_namespace="api", auth=MEMBERS,
    parser=BoundedJsonParser(), renderer=FiniteJsonRenderer(), openapi_url="/openapi.json", docs_url="/docs",
)  # fmt: skip
api.add_router("", runs_router)
api.add_router("", runs_table_router)
api.add_router("", audit_router)
api.add_router("", compare_router)


def error(status: int, message: str, fields: dict[str, str] | None = None) -> JsonResponse:
    return JsonResponse({"error": message, "fields": fields or {}}, status=status)


@api.exception_handler(ValidationError)
def invalid_input(request, exc: ValidationError):
    fields = {}
    for problem in exc.errors:
        loc = [str(p) for p in problem.get("loc", ())]
        # ("body", "payload", "tags", 0) -> "tags.0"; ("query", "points") -> "points"
        where = ".".join(loc[2:] if loc[:1] == ["body"] else loc[1:]) or (loc[0] if loc else "body")
        fields.setdefault(where, str(problem.get("msg", "invalid")).removeprefix("Value error, "))
    return error(400, "invalid input: " + ", ".join(fields), fields)


@api.exception_handler(UserInputError)
def user_input(request, exc: UserInputError):
    return error(exc.status, exc.message, exc.fields)


@api.exception_handler(ConfigError)
def invalid_config(request, exc: ConfigError):
    return error(400, "invalid config", exc.fields)


@api.exception_handler(BundleError)
def invalid_bundle(request, exc: BundleError):
    return error(400, str(exc), {"bundle": str(exc)})


@api.exception_handler(AuthenticationError)
def unauthenticated(request, exc):
    return error(401, "authentication required: log in or send 'Authorization: Bearer <token>'")


@api.exception_handler(Http404)
def not_found(request, exc):
    return error(404, str(exc) or "not found")


@api.exception_handler(PermissionDenied)
def forbidden(request, exc):
    return error(403, str(exc) or "not allowed")


@api.exception_handler(HttpError)
def http_error(request, exc: HttpError):
    if isinstance(exc.__cause__, UserInputError):  # raised by the body parser, wrapped by Ninja
        return user_input(request, exc.__cause__)
    return error(exc.status_code, str(exc))


@api.exception_handler(OperationalError)
@api.exception_handler(InterfaceError)
@api.exception_handler(ServiceUnavailable)
@api.exception_handler(RedisConnectionError)
@api.exception_handler(BrokerError)
def service_unavailable(request, exc):
    return outages.unavailable(request, outages.service_down(exc))
