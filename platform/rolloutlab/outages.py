"""A service away (PostgreSQL or Redis) is a 503 with a clear message, never a bare 500.

Pages get templates/unavailable.html, the API {"error": ..., "fields": {}}, both
with Retry-After. `Outages` answers for the exceptions a view raises; `server_error`
(handler500) for those raised elsewhere (a middleware saving the session).
Launching needs the broker: `require_broker()` refuses up front, so no run is
recorded that no worker would ever hear of.
"""

from __future__ import annotations

import sys

import redis
from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.http import HttpResponse, JsonResponse
from django.template.loader import render_to_string
from django.views import defaults
from kombu.exceptions import OperationalError as BrokerError

from rolloutlab.middleware import API_PREFIX

RETRY_AFTER_S = 5


class ServiceUnavailable(Exception):
    """Raised where a service the request needs is known to be down."""

    def __init__(self, service: str, message: str = ""):
        super().__init__(message or f"the {service} is unavailable")
        self.service = service


DATABASE = "database (PostgreSQL)"
BROKER = "message broker (Redis)"


def service_down(exc: BaseException | None) -> str | None:
    """Which service an exception says is away, or None if it is some other error."""
    if isinstance(exc, ServiceUnavailable):
        return exc.service
    if isinstance(exc, (OperationalError, InterfaceError)):
        return DATABASE
    if isinstance(exc, (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, BrokerError)):
        return BROKER
    return None


def unavailable(request, service: str) -> HttpResponse:
    message = f"The {service} is unavailable right now; try again in a moment. Nothing you saved is lost."
    if request.path.startswith(API_PREFIX):
        response = JsonResponse({"error": message, "fields": {}}, status=503)
    else:  # rendered without the request's context: that would read the session from the database
        response = HttpResponse(render_to_string("unavailable.html", {"message": message}), status=503)
    response["Retry-After"] = str(RETRY_AFTER_S)
    return response


class Outages:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exc):
        service = service_down(exc)
        return unavailable(request, service) if service else None


def server_error(request):
    """handler500: an outage raised outside a view still answers 503; anything else is Django's 500."""
    service = service_down(sys.exc_info()[1])
    return unavailable(request, service) if service else defaults.server_error(request)


class SocketOutages:
    """ASGI middleware around the websocket stack: an outage met before the consumer (the session
    lookup of Channels' AuthMiddlewareStack) still ends the handshake with close code 4503, which
    the page answers by reconnecting every second, and not with a bare 1006."""

    CLOSE_CODE = 4503

    def __init__(self, inner):
        self.inner = inner

    async def __call__(self, scope, receive, send):
        try:
            return await self.inner(scope, receive, send)
        except Exception as exc:
            if not service_down(exc):
                raise
            try:  # accepted only to say why it closes
                await send({"type": "websocket.accept"})
            except Exception:  # noqa: BLE001 - already accepted (the consumer met the outage itself)
                pass
            await send({"type": "websocket.close", "code": self.CLOSE_CODE})


def require_broker() -> None:
    """Raise ServiceUnavailable unless the broker answers (a second at most); a no-op without Celery."""
    if settings.RUN_EXECUTOR != "celery":
        return
    try:
        redis.Redis.from_url(settings.CELERY_BROKER_URL, socket_connect_timeout=1, socket_timeout=1).ping()
    except redis.exceptions.RedisError as exc:
        raise ServiceUnavailable(BROKER, f"the {BROKER} is unavailable: runs cannot be launched now") from exc
