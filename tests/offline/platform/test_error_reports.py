"""Django's debug page (the technical 500) masks every password that travels in a URL."""

from __future__ import annotations

import secrets
import sys

from django.test import RequestFactory
from django.views import debug

# made at run time: the page also shows the source lines around each frame, which must not hold them
PW = {name: secrets.token_hex(8) for name in ("db", "redis", "broker", "layer", "local", "header")}


def debug_page(settings) -> str:
    settings.DEBUG = True
    settings.DATABASE_URL = f"postgres://rolloutlab:{PW['db']}@db.internal:5432/rolloutlab"
    settings.REDIS_URL = f"redis://:{PW['redis']}@cache.internal:6379/0"
    settings.CELERY_BROKER_URL = f"redis://default:{PW['broker']}@cache.internal:6379/0"
    settings.CHANNEL_LAYERS = {"default": {"CONFIG": {"hosts": [f"rediss://u:{PW['layer']}@cache.internal:6380/1"]}}}
    request = RequestFactory().get("/runs/", HTTP_X_NOTE=f"see amqp://guest:{PW['header']}@mq.internal/")
    connection_url = f"postgres://rolloutlab:{PW['local']}@db.internal:5432/rolloutlab"  # a frame variable
    try:
        raise RuntimeError(f"could not reach {connection_url.split('@')[1]}")
    except RuntimeError:
        response = debug.technical_500_response(request, *sys.exc_info())
    return response.content.decode()


def test_the_debug_page_shows_no_password_of_any_url(settings):
    page = debug_page(settings)
    for password in PW.values():
        assert password not in page


def test_the_debug_page_still_names_the_url_settings_and_hosts(settings):
    page = debug_page(settings)
    assert "DATABASE_URL" in page and "REDIS_URL" in page and "CELERY_BROKER_URL" in page
    assert "rediss://u:********************@cache.internal:6380/1" in page  # inside CHANNEL_LAYERS
    assert "postgres://rolloutlab:********************@db.internal:5432/rolloutlab" in page  # the frame variable


def test_without_the_filter_the_page_would_leak(settings):
    """The tests above could fail: Django's own filter shows these URLs whole."""
    settings.DEFAULT_EXCEPTION_REPORTER_FILTER = "django.views.debug.SafeExceptionReporterFilter"
    debug.get_default_exception_reporter_filter.cache_clear()
    try:
        page = debug_page(settings)
    finally:
        debug.get_default_exception_reporter_filter.cache_clear()
    assert PW["redis"] in page and PW["local"] in page
