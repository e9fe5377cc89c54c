"""The web server under ASGI closes each request's database connection (CONN_MAX_AGE 0), against live daphne.

Under ASGI each request runs its database work in a thread of its own, and a persistent connection belongs to
its thread: with CONN_MAX_AGE=60, 120 unauthenticated requests raised PostgreSQL's connections from 5 to 45,
most still open ten minutes later, until PostgreSQL refused clients and every page answered 503.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection

from tests.support.live import wait_until

pytestmark = [pytest.mark.timeout(120), pytest.mark.django_db(transaction=True)]


def open_connections() -> int:
    """Connections to the test database other than this test's own: the web server's, the worker's."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                       "AND pid <> pg_backend_pid()")  # fmt: skip
        return cursor.fetchone()[0]


def token_lookup(url: str) -> int:
    """A request that reads the database before it is refused: an API call with a token nobody holds."""
    request = urllib.request.Request(url + "/api/runs", headers={"Authorization": "Bearer rl_not-a-token"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status
    except urllib.error.HTTPError as err:
        return err.code


def test_a_burst_of_requests_leaves_no_database_connection_open(live_stack):
    before = open_connections()
    for _ in range(2):  # a second burst: nothing has piled up from the first
        with ThreadPoolExecutor(max_workers=24) as pool:
            statuses = list(pool.map(token_lookup, [live_stack.url] * 120))
        assert statuses == [401] * 120
        time.sleep(0.5)
        wait_until(lambda: open_connections() <= before + 1, 10, what="the requests' connections to close")
    assert open_connections() <= before + 1  # + the monitor's round, if it is between its queries
