"""The API against its own OpenAPI document: schemathesis with a fixed seed and a bounded number of
examples per operation finds no 500 and no response that breaks the schema; hostile values sent to
every page's query and forms give no 500 either; the CSRF and error rules hold."""

from __future__ import annotations

import itertools
import json

import pytest
import schemathesis
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from rolloutlab.accounts.models import ApiToken
from rolloutlab.runs.models import Run
from tests.conftest import project_of, small_config

EXAMPLES = 20  # per operation and mode (valid and invalid inputs)
CHECKS = [schemathesis.checks.not_a_server_error, status_code_conformance, content_type_conformance,
          response_schema_conformance]  # fmt: skip


@pytest.fixture
def api_schema(db):
    """The served document, called in-process; like Django's test client, requests keep the test's connection
    (Django closes it at the end of every request otherwise, which would end the test's transaction)."""
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield schemathesis.openapi.from_wsgi("/api/openapi.json", get_wsgi_application())
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


@pytest.fixture
def token(db, django_user_model, monkeypatch):
    """A user with a finished run (id reachable by the fuzzer's small integers too) and a token."""
    monkeypatch.setattr("rolloutlab.execution.services.submit", lambda run_id: None)
    user = django_user_model.objects.create_user("fuzz")
    project = project_of(user)
    Run.objects.create(project=project, name="r", owner=user, config=small_config().model_dump(mode="json"),
                       config_hash="0" * 64, state="succeeded", method="grpo")  # fmt: skip
    return ApiToken.issue(user, "fuzz")[1]


def test_no_operation_answers_500_or_breaks_its_schema(api_schema, token):
    """Every operation of the document, each with EXAMPLES generated cases from a fixed seed."""
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) >= 16
    statuses = []
    for operation, mode in itertools.product(operations, (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)):

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
                  phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))  # fmt: skip
        def check(case):
            response = case.call_and_validate(headers={"Authorization": f"Bearer {token}"}, checks=CHECKS)
            statuses.append(response.status_code)

        check()
    # the fuzzer reached the operations, not only their input checks
    assert len(statuses) >= 4 * len(operations) and statuses.count(200) >= len(operations) // 2, statuses


HOSTILE = [
    "\x00", "a\x00b", "١٢", "１２", "9" * 5000, "-1", "1e400", "inf", "NaN", "x" * 10_000, "[1,2]", '{"a": 1}',
    "null", "metric:5", "-metric:\x00", "%", "'; drop table runs; --",
]  # fmt: skip
PAGES = {
    "/runs/": ["project", "method", "state", "tag", "sort", "ids"],
    "/runs/launch/": ["from", "method"],
    "/compare/": "runs experiment group metrics x smooth band seeds baseline target table".split(),
    "/compare/experiments/": ["project", "page"],
    "/compare/sweep/": ["from", "method"],
    "/audit/differences/": ["a", "b"],
}


@pytest.mark.django_db
def test_hostile_query_values_on_every_page_are_never_a_500(alice_client):
    for path, params in PAGES.items():
        for param in params:
            for value in HOSTILE:
                response = alice_client.get(path, {param: value})
                assert response.status_code < 500, (path, param, value[:20], response.status_code)


@pytest.mark.django_db
def test_hostile_form_fields_are_never_a_500_and_launch_nothing(alice_client, monkeypatch):
    monkeypatch.setattr("rolloutlab.execution.services.submit", lambda run_id: None)
    fields = ["name", "tags", "project", "seed", "rollout.group_size", "optimizer.lr", "task.path", "reward.weights"]
    for field in fields:
        for value in HOSTILE:
            for path in ("/runs/launch/", "/compare/sweep/"):
                response = alice_client.post(path, {"method": "grpo", "methods": "grpo", field: value})
                assert response.status_code < 500, (path, field, value[:20], response.status_code)
    names = list(Run.objects.values_list("name", flat=True))
    assert not any("\x00" in n for n in names)


ACCOUNT_FORMS = {  # the pages' forms beside the launch and sweep ones, each field by name
    "/account/tokens/": ["name", "days"],
    "/compare/share/": ["days", "runs", "experiment"],
}


@pytest.mark.django_db
def test_hostile_values_in_the_account_and_share_forms_are_never_a_500(alice_client, alice):
    from rolloutlab.accounts.access import home_team

    team = home_team(alice)  # alice's own team, of which she is the admin
    project = project_of(alice, "alerted")
    alert_fields = ["kind", "metric", "direction", "threshold", "steps", "emails", "webhook", "states"]
    forms = {**ACCOUNT_FORMS, f"/account/teams/{team.id}/members/": ["username", "role"],
             f"/projects/{project.id}/": alert_fields}  # fmt: skip
    longer = ["x" * n for n in (51, 101, 151, 201, 256)]  # just past the columns text fields are saved into
    for path, fields in forms.items():
        for field in fields:
            for value in [*HOSTILE, *longer]:
                response = alice_client.post(path, {field: value})
                assert response.status_code < 500, (path, field, value[:20], response.status_code)


@pytest.mark.django_db
@pytest.mark.parametrize(
    "body, where",
    [
        (b"\xff\xfe{", "not UTF-8"),
        (b"[" * 5000 + b"]" * 5000, "nests deeper"),
        (b'{"config": {"optimizer": {"lr": 1e400}}}', "too large for a float"),
        (b'{"config": {"seed": NaN}}', "not a JSON number"),
        (b'{"config": [], "tags": null}', "config"),
        (b'{"config": {}, "name": "a\\u0000b"}', "name"),
        (b'{"config": {}, "colour": "red"}', "colour"),
        (b'{"config": {"seed": 99999999999}}', "seed"),
        (b'{"config": {"task": {"path": "/etc/\\u0000passwd"}}}', "task.path"),
    ],
)
def test_bad_bodies_are_400s_naming_what_is_wrong_and_launch_nothing(alice_client, body, where):
    response = alice_client.post("/api/runs", data=body, content_type="application/json")
    assert response.status_code == 400, response.content
    answer = response.json()
    assert set(answer) == {"error", "fields"}
    assert where in answer["error"] or any(where in f for f in answer["fields"]), answer
    assert Run.objects.count() == 0


@pytest.mark.django_db
def test_unknown_endpoints_and_methods_answer_in_json(alice_client):
    missing = alice_client.get("/api/nope")
    assert missing.status_code == 404 and "no such endpoint" in missing.json()["error"]
    wrong = alice_client.put("/api/runs")
    assert wrong.status_code == 405 and wrong.json()["fields"] == {}


@pytest.mark.django_db
def test_a_session_request_must_pass_csrf_whatever_authorization_header_it_sends(alice, monkeypatch):
    from django.test import Client

    monkeypatch.setattr("rolloutlab.execution.services.submit", lambda run_id: None)
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    body = json.dumps({"config": {}})
    for header in ({}, {"HTTP_AUTHORIZATION": "Basic Zm9vOmJhcg=="}, {"HTTP_AUTHORIZATION": "Token abc"}):
        response = client.post("/api/runs", data=body, content_type="application/json", **header)
        assert response.status_code in (401, 403), (header, response.status_code)
    assert Run.objects.count() == 0
    _, raw = ApiToken.issue(alice, "cli")  # a valid token needs no cookie, so no CSRF
    token = Client(enforce_csrf_checks=True)
    assert token.post("/api/runs", data=body, content_type="application/json",
                      HTTP_AUTHORIZATION=f"Bearer {raw}").status_code == 201  # fmt: skip


@pytest.mark.django_db
def test_a_revoked_or_expired_token_is_refused(client, alice):
    from datetime import timedelta

    from django.utils import timezone

    _, revoked = ApiToken.issue(alice, "old")
    ApiToken.objects.filter(name="old").update(revoked_at=timezone.now())
    _, expired = ApiToken.issue(alice, "short", expires_at=timezone.now() - timedelta(seconds=1))
    _, live = ApiToken.issue(alice, "live", expires_at=timezone.now() + timedelta(days=1))
    assert client.get("/api/runs", HTTP_AUTHORIZATION=f"Bearer {revoked}").status_code == 401
    assert client.get("/api/runs", HTTP_AUTHORIZATION=f"Bearer {expired}").status_code == 401
    assert client.get("/api/runs", HTTP_AUTHORIZATION=f"Bearer {live}").status_code == 200
    assert ApiToken.objects.get(name="live").last_used_at is not None
