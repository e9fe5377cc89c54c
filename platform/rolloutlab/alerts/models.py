"""A project's alert rules and the alerts they fired (one per rule and run)."""

from django.conf import settings
from django.db import models


class Kind(models.TextChoices):
    RUN_STATE = "run_state", "a run ends in one of these states"
    METRIC = "metric", "a metric crosses a threshold"
    NO_SIGNAL = "no_signal", "a run has had no learning signal for N steps"


class AlertRule(models.Model):
    project = models.ForeignKey("runs.Project", on_delete=models.CASCADE, related_name="alert_rules")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    kind = models.CharField(max_length=20, choices=Kind.choices)
    states = models.JSONField(default=list, blank=True, help_text="run_state: the final states that fire it")
    metric = models.CharField(max_length=200, blank=True, help_text="metric: the metric watched")
    above = models.BooleanField(default=True, help_text="metric: fire above the threshold (else below)")
    threshold = models.FloatField(null=True, blank=True)
    steps = models.PositiveIntegerField(default=20, help_text="no_signal: steps in a row without signal")
    emails = models.JSONField(default=list, blank=True, help_text="addresses to e-mail")
    webhook = models.URLField(max_length=500, blank=True, help_text="a URL that gets the alert as JSON (POST)")
    muted = models.BooleanField(default=False)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        if self.kind == Kind.RUN_STATE:
            return f"a run ends {' or '.join(self.states)}"
        if self.kind == Kind.METRIC:
            return f"{self.metric} goes {'above' if self.above else 'below'} {self.threshold:g}"
        return f"no learning signal for {self.steps} steps"


class AlertEvent(models.Model):
    rule = models.ForeignKey(AlertRule, on_delete=models.CASCADE, related_name="events")
    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="+")
    fired_at = models.DateTimeField(auto_now_add=True)
    message = models.TextField()
    delivered_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True, help_text="why a delivery failed, if one did")

    class Meta:
        ordering = ["-id"]
        constraints = [models.UniqueConstraint(fields=["rule", "run"], name="one_alert_per_rule_and_run")]
