"""Static files: hashed names, compressed bodies and far-future caching, Plotly.js included.

The test session runs collectstatic (tests/services.py) as every deployment does; the
live daphne server then serves what it collected, through WhiteNoise.
"""

import gzip
import re
import urllib.request

import brotli
import pytest
from django.template import Context, Template

from rolloutlab.runs.models import Run
from tests.conftest import project_of

HASHED = re.compile(r"\.[0-9a-f]{12}\.(js|css)$")
ONE_YEAR_S = 365 * 24 * 3600
SIZE_LIMIT = 1_500_000


def run_page(client, user) -> str:
    run = Run.objects.create(project=project_of(user), name="r", owner=user, config={}, config_hash="0" * 64)
    response = client.get(f"/runs/{run.id}/")
    assert response.status_code == 200
    return response.content.decode()


def script_urls(html: str) -> list[str]:
    return re.findall(r'<script src="([^"]+)"', html)


def fetch(url: str, encoding: str) -> tuple[dict, bytes]:
    request = urllib.request.Request(url, headers={"Accept-Encoding": encoding})
    with urllib.request.urlopen(request, timeout=30) as response:
        return dict(response.headers), response.read()


@pytest.mark.django_db
def test_the_run_page_names_plotly_and_its_own_scripts_by_their_content_hash(alice_client, alice):
    scripts = script_urls(run_page(alice_client, alice))
    plotly = [url for url in scripts if "/vendor/plotly-cartesian.min." in url]  # the lines-and-heatmaps bundle
    assert len(plotly) == 1 and HASHED.search(plotly[0]), scripts
    own = [url for url in scripts if "/rolloutlab/run_detail." in url]
    assert len(own) == 1 and HASHED.search(own[0]), scripts


@pytest.mark.django_db
def test_the_stylesheet_is_named_by_its_content_hash(alice_client, alice):
    stylesheets = re.findall(r'<link[^>]+href="([^"]+\.css)"', run_page(alice_client, alice))
    assert stylesheets and all(HASHED.search(url) for url in stylesheets), stylesheets


def test_a_file_missing_from_the_manifest_keeps_its_plain_url_instead_of_failing_the_page():
    url = Template("{% load static %}{% static 'rolloutlab/not-collected-yet.js' %}").render(Context())
    assert url == "/static/rolloutlab/not-collected-yet.js"


@pytest.mark.parametrize("encoding", ["br", "gzip"])
def test_plotly_comes_from_the_live_server_compressed_small_and_cached_for_a_year(stack, encoding):
    plotly = Template("{% load static %}{% static 'vendor/plotly.min.js' %}").render(Context())  # compare's
    assert HASHED.search(plotly), plotly
    headers, body = fetch(stack.url + plotly, encoding)
    assert headers["Content-Encoding"] == encoding
    assert len(body) < SIZE_LIMIT, f"{len(body)} bytes as {encoding}"
    max_age = int(re.search(r"max-age=(\d+)", headers["Cache-Control"]).group(1))
    assert max_age >= ONE_YEAR_S and "immutable" in headers["Cache-Control"]
    text = brotli.decompress(body) if encoding == "br" else gzip.decompress(body)
    assert b"plotly.js" in text[:2000] and len(text) > 3 * SIZE_LIMIT  # the whole bundle, compressed


def test_the_apps_own_scripts_come_from_the_live_server_compressed_and_cached_for_a_year(stack, alice, client):
    client.force_login(alice)
    own = next(url for url in script_urls(run_page(client, alice)) if "/rolloutlab/run_detail." in url)
    headers, body = fetch(stack.url + own, "br")
    assert headers["Content-Encoding"] == "br" and brotli.decompress(body).strip()
    assert "immutable" in headers["Cache-Control"]
