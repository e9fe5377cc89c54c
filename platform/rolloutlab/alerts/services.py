"""Alert rules: made, muted and deleted by a project's members; checked as runs end and report; delivered once.

    rule = create_rule(user, project, RuleIn(kind="metric", metric="policy/loss", above=True, threshold=10,
                                             emails=["me@example.org"]))
    run_ended_alerts(run_id)                      # rolloutlab.alerts.receivers, on execution.lifecycle.run_ended
    points_alerts(run_id, names, steps, values)   # ... on execution.lifecycle.points_written

A rule fires at most once per run (AlertEvent's unique rule and run), after the commit that made it fire, and its
delivery (Django's mail backend, a webhook POST) runs in a thread of its own: a slow mail server or webhook never
holds up a run's reporting. A muted rule fires nothing.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import math
import socket
import threading
import urllib.error
import urllib.request
from typing import Annotated, Literal
from urllib.parse import urlparse

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.http import Http404
from django.utils import timezone
from pydantic import Field, StringConstraints, model_validator

from rolloutlab.accounts.access import Action, may
from rolloutlab.alerts.models import AlertEvent, AlertRule, Kind
from rolloutlab.inputs import MetricName, Strict, UserInputError
from rolloutlab.runs.models import FINAL_STATES, Project, Run
from workers import metrics as metric

log = logging.getLogger(__name__)

MAX_RULES_PER_PROJECT = 50
WEBHOOK_TIMEOUT_S = 5.0
Email = Annotated[str, StringConstraints(max_length=254, pattern=r"^[^@\s]{1,64}@[^@\s]+\.[^@\s]+$")]
Webhook = Annotated[str, StringConstraints(max_length=500, pattern=r"^https?://[^\s]+$")]
# no learning signal: every group of the step zero-variance, or every advantage 0
NO_SIGNAL_METRICS = {metric.FRAC_ZERO_STD: 1.0, metric.ADVANTAGE_ABS_MEAN: 0.0}


class RuleIn(Strict):
    """A rule as the project page's form (or a script) sends it."""

    kind: Literal["run_state", "metric", "no_signal"]
    states: list[Literal[tuple(FINAL_STATES)]] = Field(default_factory=list, max_length=4)  # type: ignore[valid-type]
    metric: MetricName | None = None
    above: bool = True
    threshold: float | None = Field(None, allow_inf_nan=False)
    steps: int = Field(20, ge=1, le=100_000)
    emails: list[Email] = Field(default_factory=list, max_length=5)
    webhook: Webhook | None = None

    @model_validator(mode="after")
    def _complete(self) -> RuleIn:
        if self.kind == "run_state" and not self.states:
            raise ValueError("states: pick the final states that fire the alert")
        if self.kind == "metric" and (self.metric is None or self.threshold is None):
            raise ValueError("metric: a metric alert needs the metric and its threshold")
        if not self.emails and not self.webhook:
            raise ValueError("emails: give an address or a webhook to deliver the alert to")
        return self


# ------------------------------------------------------------------ a project's rules
def create_rule(user, project: Project, given: RuleIn) -> AlertRule:
    if not may(user, Action.LAUNCH, project.team_id):
        raise PermissionDenied("only a member of the project's team may add an alert")
    if AlertRule.objects.filter(project=project).count() >= MAX_RULES_PER_PROJECT:
        raise UserInputError(f"a project has at most {MAX_RULES_PER_PROJECT} alert rules", {"kind": "too many"})
    return AlertRule.objects.create(
        project=project, created_by=user, kind=given.kind, states=given.states, metric=given.metric or "",
        above=given.above, threshold=given.threshold, steps=given.steps, emails=given.emails,
        webhook=given.webhook or "",
    )  # fmt: skip


def rule_for_change(user, project: Project, rule_id: int) -> AlertRule:
    """A rule of this project its creator or a team admin may mute or delete; 404 to anyone else."""
    rule = AlertRule.objects.filter(id=rule_id, project=project).first()
    if rule is None:
        raise Http404(f"no alert rule #{rule_id}")
    if rule.created_by_id != user.id and not may(user, Action.CHANGE, project.team_id):
        raise PermissionDenied("only its creator or a team admin may change an alert rule")
    return rule


# ------------------------------------------------------------------ firing
def run_ended_alerts(run_id: int) -> None:
    """The run-state rules of the run's project that its final state matches."""
    run = Run.objects.filter(id=run_id).select_related("project").first()
    if run is None or run.state not in FINAL_STATES:
        return
    for rule in live_rules(run, Kind.RUN_STATE):
        if run.state in rule.states:
            fire(rule, run, f"run #{run.id} {run.name!r} ended {run.state}: {run.detail}".rstrip(": "))


def points_alerts(run_id: int, names: list[str], steps: list[int], values: list[float]) -> None:
    """The metric and no-signal rules of the run's project that these newly stored points set off."""
    run = Run.objects.filter(id=run_id).select_related("project").first()
    if run is None:
        return
    rules = live_rules(run, Kind.METRIC, Kind.NO_SIGNAL)
    if not rules:
        return
    fired = set(AlertEvent.objects.filter(run=run, rule__in=rules).values_list("rule_id", flat=True))
    for rule in (r for r in rules if r.id not in fired):
        message = metric_crossed(rule, names, steps, values) if rule.kind == Kind.METRIC else no_signal(rule, run)
        if message:
            fire(rule, run, f"run #{run.id} {run.name!r}: {message}")


def live_rules(run: Run, *kinds: str) -> list[AlertRule]:
    return list(AlertRule.objects.filter(project_id=run.project_id, kind__in=kinds, muted=False))


def metric_crossed(rule: AlertRule, names, steps, values) -> str | None:
    """The first point past the rule's threshold (+inf counts as above, -inf as below; NaN crosses nothing)."""
    for name, step, value in zip(names, steps, values):
        if name != rule.metric or value is None or math.isnan(value):
            continue
        if (value > rule.threshold) if rule.above else (value < rule.threshold):
            side = "above" if rule.above else "below"
            return f"{name} = {value:g} at step {step}, {side} {rule.threshold:g}"
    return None


def no_signal(rule: AlertRule, run: Run) -> str | None:
    """Whether the run's last `rule.steps` steps all had no learning signal (every group zero-variance, or every
    advantage 0): a run that learns nothing while it says it is running."""
    from rolloutlab.metrics.series import last_values

    for name, dead in NO_SIGNAL_METRICS.items():
        recent = last_values(run.id, name, rule.steps)  # [(step, value)], newest first
        if len(recent) == rule.steps and all(value == dead for _, value in recent):
            return f"no learning signal for {rule.steps} steps ({name} = {dead:g} since step {recent[-1][0]})"
    return None


def fire(rule: AlertRule, run: Run, message: str) -> None:
    try:
        with transaction.atomic():
            event = AlertEvent.objects.create(rule=rule, run=run, message=message)
    except IntegrityError:  # it fired already for this run (a concurrent report saw it first)
        return
    transaction.on_commit(lambda: threading.Thread(target=deliver, args=(event.id,), daemon=True).start())


# ------------------------------------------------------------------ delivery
def deliver(event_id: int) -> None:
    """Send the alert by e-mail and webhook; record when it went, or why it did not."""
    event = AlertEvent.objects.select_related("rule", "run", "rule__project").get(id=event_id)
    rule, errors = event.rule, []
    subject = f"[Rollout Lab] {rule.project.name}: {rule}"
    if rule.emails:
        try:
            send_mail(subject, event.message, settings.DEFAULT_FROM_EMAIL, rule.emails)
        except Exception as exc:  # noqa: BLE001 - a mail server's failure is the delivery's, recorded on the event
            errors.append(f"e-mail: {exc}")
    if rule.webhook:
        try:
            post_webhook(rule.webhook, alert_json(event))
        except (OSError, ValueError) as exc:
            errors.append(f"webhook: {exc}")
    AlertEvent.objects.filter(id=event.id).update(
        delivered_at=None if errors else timezone.now(), error="; ".join(errors)[:2000]
    )
    if errors:
        log.warning("alert %s for run %s was not delivered: %s", rule.id, event.run_id, errors)


def alert_json(event: AlertEvent) -> dict:
    return {"alert": str(event.rule), "rule": event.rule.id, "project": event.rule.project.name,
            "run": event.run_id, "state": event.run.state, "message": event.message,
            "url": f"/runs/{event.run_id}/", "fired_at": event.fired_at.isoformat()}  # fmt: skip


class NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None  # a webhook answers; it does not send the server on to another address


def post_webhook(url: str, body: dict) -> None:
    """POST the alert as JSON to an address outside the deployment's own network (unless the deployment allows
    it: ALERT_WEBHOOKS_TO_PRIVATE), with no redirect followed and a short timeout."""
    check_webhook_host(url)
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})  # fmt: skip
    with urllib.request.build_opener(NoRedirects).open(request, timeout=WEBHOOK_TIMEOUT_S) as answer:
        if answer.status >= 300:
            raise ValueError(f"the webhook answered {answer.status}")


def check_webhook_host(url: str) -> None:
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ValueError("a webhook is an http or https URL")
    if settings.ALERT_WEBHOOKS_TO_PRIVATE:
        return
    for info in socket.getaddrinfo(parsed.hostname, parsed.port or 443, proto=socket.IPPROTO_TCP):
        address = ipaddress.ip_address(info[4][0])
        if not address.is_global:
            raise ValueError(f"{parsed.hostname} is {address}, inside a private network (ALERT_WEBHOOKS_TO_PRIVATE)")
