"""The login form after repeated failures: 429 and a page that says why, until the lockout ends (django-axes)."""

from __future__ import annotations

import pytest
from axes.models import AccessAttempt

pytestmark = pytest.mark.django_db


def attempt(client, username: str, password: str, address: str = "203.0.113.7"):
    return client.post("/login/", {"username": username, "password": password}, REMOTE_ADDR=address)


def fail(client, username: str, times: int, address: str = "203.0.113.7"):
    return [attempt(client, username, "wrong", address).status_code for _ in range(times)]


def test_it_locks_out_a_username_after_the_failure_limit(client, alice, settings):
    assert fail(client, "alice", settings.AXES_FAILURE_LIMIT - 1) == [200] * (settings.AXES_FAILURE_LIMIT - 1)
    response = attempt(client, "alice", "wrong")
    assert response.status_code == 429
    assert "registration/locked_out.html" in [t.name for t in response.templates]
    assert b"Too many failed logins" in response.content and b"alice" in response.content


def test_a_locked_out_user_is_refused_even_with_the_right_password(client, alice, settings):
    fail(client, "alice", settings.AXES_FAILURE_LIMIT)
    response = attempt(client, "alice", "alice-password")
    assert response.status_code == 429
    assert "_auth_user_id" not in client.session


def test_the_lockout_is_recorded_in_the_database(client, alice, settings):
    fail(client, "alice", settings.AXES_FAILURE_LIMIT)
    row = AccessAttempt.objects.get(username="alice", ip_address="203.0.113.7")
    assert row.failures_since_start == settings.AXES_FAILURE_LIMIT


def test_one_address_does_not_lock_the_user_out_elsewhere(client, alice, settings):
    fail(client, "alice", settings.AXES_FAILURE_LIMIT)
    response = attempt(client, "alice", "alice-password", address="198.51.100.9")
    assert response.status_code == 302


def test_a_success_before_the_limit_resets_the_count(client, alice, settings):
    fail(client, "alice", settings.AXES_FAILURE_LIMIT - 1)
    assert attempt(client, "alice", "alice-password").status_code == 302
    client.logout()
    assert fail(client, "alice", settings.AXES_FAILURE_LIMIT - 1) == [200] * (settings.AXES_FAILURE_LIMIT - 1)


def test_the_admin_login_is_throttled_too(client, alice, settings):
    for _ in range(settings.AXES_FAILURE_LIMIT):
        client.post("/admin/login/", {"username": "alice", "password": "wrong"}, REMOTE_ADDR="203.0.113.7")
    response = client.post("/admin/login/", {"username": "alice", "password": "wrong"}, REMOTE_ADDR="203.0.113.7")
    assert response.status_code == 429


def test_the_api_still_answers_a_locked_out_users_token(client, alice, settings):
    """Tokens are not passwords: a lockout of the login form does not stop a valid token."""
    from rolloutlab.accounts.models import ApiToken

    fail(client, "alice", settings.AXES_FAILURE_LIMIT)
    _, secret = ApiToken.issue(alice, "t")
    response = client.get("/api/runs", HTTP_AUTHORIZATION=f"Bearer {secret}", REMOTE_ADDR="203.0.113.7")
    assert response.status_code == 200


def test_behind_the_proxy_each_client_is_keyed_on_its_own_address_and_cannot_forge_another(client, alice, settings):
    """The documented TLS proxy is every request's peer; it appends the address it saw to X-Forwarded-For."""
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

    def through_proxy(password: str, seen: str, sent: str = ""):
        forwarded = f"{sent}, {seen}" if sent else seen  # what the client wrote, then what the proxy saw
        return client.post("/login/", {"username": "alice", "password": password}, REMOTE_ADDR="10.0.0.2",
                           HTTP_X_FORWARDED_FOR=forwarded, HTTP_X_FORWARDED_PROTO="https", secure=True)  # fmt: skip

    # an attacker fails for alice, even writing alice's own address into the header
    assert [through_proxy("wrong", "203.0.113.7", sent="198.51.100.9").status_code for _ in range(6)][-1] == 429
    assert AccessAttempt.objects.get(username="alice").ip_address == "203.0.113.7"
    assert through_proxy("alice-password", "198.51.100.9").status_code == 302  # alice, from her own address
