"""Alerts: a project's rules fire once per run, by e-mail (Django's mail backend) and webhook, after the commit that
set them off; listed, added, muted and deleted on the project's page, by who may."""

from __future__ import annotations

import http.server
import json
import threading
import time

import pytest
from django.core import mail

from rolloutlab.accounts.models import Membership, Role
from rolloutlab.alerts.models import AlertEvent, AlertRule
from rolloutlab.alerts.services import RuleIn, check_webhook_host, create_rule
from rolloutlab.runs.models import Run
from tests.conftest import project_of

pytestmark = pytest.mark.django_db(transaction=True)  # alerts go out after the commit that fired them


def post(client, path, body):
    return client.post(path, data=json.dumps(body), content_type="application/json")


def external_run(client, project="alerts", total_steps=0) -> int:
    return post(client, "/api/runs/external", {"project": project, "total_steps": total_steps}).json()["id"]


def report(client, run_id, name, values, first_step=0):
    points = [{"name": name, "step": first_step + i, "value": v} for i, v in enumerate(values)]
    assert post(client, f"/api/runs/{run_id}/points", {"points": points}).status_code == 200


def delivered(rule: AlertRule, timeout: float = 10) -> AlertEvent:
    deadline = time.time() + timeout
    while time.time() < deadline:
        event = AlertEvent.objects.filter(rule=rule).first()
        if event is not None and (event.delivered_at or event.error):
            return event
        time.sleep(0.05)
    raise AssertionError(f"no delivered alert of rule {rule.id}")


class Hook(http.server.BaseHTTPRequestHandler):
    received: list = []

    def do_POST(self):  # noqa: N802 - the standard library's name
        Hook.received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def webhook(settings):
    settings.ALERT_WEBHOOKS_TO_PRIVATE = True  # the test's receiver is on 127.0.0.1
    Hook.received = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/hook"
    server.shutdown()


def test_a_run_state_alert_mails_once_when_a_run_ends_failed_and_not_when_it_succeeds(alice_client, alice):
    run_id = external_run(alice_client)
    project = Run.objects.get(id=run_id).project
    rule = create_rule(alice, project, RuleIn(kind="run_state", states=["failed", "lost"], emails=["a@example.org"]))
    ok = external_run(alice_client)
    post(alice_client, f"/api/runs/{ok}/finish", {"status": "finished"})
    post(alice_client, f"/api/runs/{run_id}/finish", {"status": "failed", "detail": "diverged"})
    event = delivered(rule)
    assert event.run_id == run_id and event.delivered_at and not event.error
    assert len(mail.outbox) == 1 and mail.outbox[0].to == ["a@example.org"]
    assert "ended failed: diverged" in mail.outbox[0].body and "alerts" in mail.outbox[0].subject
    assert AlertEvent.objects.count() == 1  # the succeeded run fired nothing


def test_a_metric_alert_posts_to_its_webhook_once_per_run_when_the_metric_crosses(alice_client, alice, webhook):
    run_id = external_run(alice_client)
    project = Run.objects.get(id=run_id).project
    rule = create_rule(alice, project, RuleIn(kind="metric", metric="policy/loss", above=True, threshold=10.0,
                                              webhook=webhook))  # fmt: skip
    report(alice_client, run_id, "policy/loss", [1.0, "nan", 9.9])  # NaN crosses nothing
    time.sleep(0.3)
    assert AlertEvent.objects.count() == 0
    report(alice_client, run_id, "policy/loss", [12.5, 50.0], first_step=3)
    event = delivered(rule)
    assert "policy/loss = 12.5 at step 3, above 10" in event.message
    report(alice_client, run_id, "policy/loss", [99.0], first_step=5)
    time.sleep(0.3)
    assert len(Hook.received) == 1 and AlertEvent.objects.count() == 1  # once per run
    sent = Hook.received[0]
    assert sent["run"] == run_id and sent["project"] == project.name and sent["url"] == f"/runs/{run_id}/"


def test_a_no_signal_alert_fires_after_n_steps_of_zero_variance_groups(alice_client, alice):
    run_id = external_run(alice_client)
    project = Run.objects.get(id=run_id).project
    rule = create_rule(alice, project, RuleIn(kind="no_signal", steps=3, emails=["a@example.org"]))
    report(alice_client, run_id, "groups/frac_zero_std", [1.0, 0.5, 1.0, 1.0])  # a signal at step 1
    time.sleep(0.3)
    assert AlertEvent.objects.count() == 0
    report(alice_client, run_id, "groups/frac_zero_std", [1.0], first_step=4)  # steps 2, 3, 4: none
    assert "no learning signal for 3 steps" in delivered(rule).message


def test_a_muted_alert_fires_nothing_and_a_webhook_inside_the_network_is_refused(alice_client, alice, settings):
    run_id = external_run(alice_client)
    project = Run.objects.get(id=run_id).project
    rule = create_rule(alice, project, RuleIn(kind="run_state", states=["failed"], webhook="http://127.0.0.1:9/x"))
    AlertRule.objects.filter(id=rule.id).update(muted=True)
    post(alice_client, f"/api/runs/{run_id}/finish", {"status": "failed"})
    time.sleep(0.3)
    assert AlertEvent.objects.count() == 0
    settings.ALERT_WEBHOOKS_TO_PRIVATE = False
    with pytest.raises(ValueError, match="inside a private network"):
        check_webhook_host("http://127.0.0.1:9/x")
    AlertRule.objects.filter(id=rule.id).update(muted=False)
    other = external_run(alice_client)
    post(alice_client, f"/api/runs/{other}/finish", {"status": "failed"})
    assert "private network" in delivered(rule).error  # recorded on the alert, not sent


def test_the_project_page_lists_adds_mutes_and_deletes_alerts_and_names_bad_fields(alice_client, alice, bob):
    from django.test import Client

    project = project_of(alice, "alerts")
    page = alice_client.get(f"/projects/{project.id}/")
    assert page.status_code == 200 and "No alerts yet." in page.content.decode()
    bad = alice_client.post(f"/projects/{project.id}/", {"kind": "metric", "metric": "policy/loss", "emails": "x"})
    assert bad.status_code == 400 and AlertRule.objects.count() == 0
    assert "threshold" in bad.content.decode() or "emails" in bad.content.decode()
    form = {"kind": "metric", "metric": "policy/loss", "direction": "below", "threshold": "-1",
            "emails": "a@example.org"}  # fmt: skip
    assert alice_client.post(f"/projects/{project.id}/", form).status_code == 302
    rule = AlertRule.objects.get()
    assert (rule.metric, rule.above, rule.threshold, rule.emails) == ("policy/loss", False, -1.0, ["a@example.org"])
    assert "policy/loss goes below -1" in alice_client.get(f"/projects/{project.id}/").content.decode()
    alice_client.post(f"/projects/{project.id}/alerts/{rule.id}/mute/", {"muted": "true"})
    assert AlertRule.objects.get().muted

    Membership.objects.create(team=project.team, user=bob, role=Role.VIEWER)
    client = Client()  # bob's own session beside alice's
    client.force_login(bob)
    assert client.get(f"/projects/{project.id}/").status_code == 200  # a viewer reads the list
    assert client.post(f"/projects/{project.id}/", form).status_code == 403  # and adds nothing
    assert client.post(f"/projects/{project.id}/alerts/{rule.id}/delete/").status_code == 403
    alice_client.post(f"/projects/{project.id}/alerts/{rule.id}/delete/")
    assert AlertRule.objects.count() == 0
    Membership.objects.filter(user=bob).delete()
    assert client.get(f"/projects/{project.id}/").status_code == 404  # another team's project does not exist
