"""Shared fixtures: a per-session model cache, and small configs that train in seconds."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from django.core.signals import got_request_exception

from tests.configs import small_config  # noqa: F401  (re-exported: the tests import it from here)
from workers import progress, stopping

# the platform's fixtures (the live stack, Chromium, the embedded server) serve the database and live tiers;
# tier_times prints what each tier cost
pytest_plugins = ["tests.support.platform_fixtures", "tests.support.tier_times", "tests.support.scheduling"]

# One warm-start cache for the whole session, inside the checkout (ignored by git), so the
# tiny models are built once per machine and every test after the first starts at once.
os.environ.setdefault("ROLLOUTLAB_CACHE", str(Path(__file__).resolve().parent.parent / ".cache" / "rolloutlab"))

REPO = Path(__file__).resolve().parent.parent


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter):
    """Where each failure happened, printed last (after the slowest tests): CI shows only the log's tail, and a
    timeout's one-line summary does not say whether the test hung in its body or in a teardown, nor where."""
    failed = [*terminalreporter.stats.get("failed", []), *terminalreporter.stats.get("error", [])]
    if not failed:
        return
    terminalreporter.section("where each failure happened")
    for report in failed[:10]:
        lines = report.longreprtext.splitlines()
        located = [line for line in lines if re.match(r"^\S+:\d+: ", line) or line.startswith("E ")]
        terminalreporter.write_line(f"{report.nodeid} ({report.when})")
        for line in located[-12:]:
            terminalreporter.write_line(f"    {line[:200]}")


@pytest.fixture(autouse=True)
def nothing_installed_on_the_thread():
    """Each test starts with no stop check, deadline or progress reporter on its thread. A trainer installs its
    reporter's for the thread it runs on, and a run an earlier test cancelled leaves one that says stop: on the same
    xdist worker, a later test's generation would raise Cancelled."""
    stopping.uninstall()
    progress.uninstall()
    yield
    stopping.uninstall()
    progress.uninstall()


@pytest.fixture
def small_cfg():
    return small_config


@pytest.fixture(autouse=True)
def no_server_errors():
    """Every test fails if any request it made raised inside Django (which is a 500)."""
    errors = []

    def record(sender, request=None, **kwargs):
        errors.append(getattr(request, "path", "?"))

    got_request_exception.connect(record, weak=False)
    yield
    got_request_exception.disconnect(record)
    assert not errors, f"server errors on {errors}"


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice", password="alice-password")


@pytest.fixture
def bob(django_user_model):
    return django_user_model.objects.create_user("bob", password="bob-password")


@pytest.fixture
def alice_client(client, alice):
    client.force_login(alice)
    return client


def project_of(user, name: str = "p"):
    """A project in the user's own team (made if they have none), as a launch from the browser would make."""
    from rolloutlab.runs.access import project_for_launch

    return project_for_launch(user, name)
