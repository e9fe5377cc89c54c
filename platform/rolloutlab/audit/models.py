"""Reproducibility records, and verifications: a rerun of a run compared with it metric by metric."""

from django.conf import settings
from django.db import models

from rolloutlab.runs.models import Run


class AuditRecord(models.Model):
    """What produced a run (workers.repro.capture_environment), taken by the worker before the first step."""

    run = models.OneToOneField(Run, on_delete=models.CASCADE, related_name="audit")
    record = models.JSONField()
    imported_from = models.CharField(max_length=64, blank=True, help_text="sha256 of the bundle it came from")
    signer = models.CharField(
        max_length=44, blank=True, help_text="The public key whose valid signature the bundle carried (base64)"
    )
    signer_trusted = models.BooleanField(default=False, help_text="The signer is this deployment or one it trusts")
    provenance = models.CharField(max_length=300, blank=True, help_text="How the imported bundle's origin was judged")
    created_at = models.DateTimeField(auto_now_add=True)


class Verification(models.Model):
    original = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="verifications")
    rerun = models.OneToOneField(Run, on_delete=models.CASCADE, related_name="verifies")
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    result = models.JSONField(null=True, blank=True, help_text="workers.audit.compare_streams of the two runs")
    compared_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    @property
    def verdict(self) -> str:
        if self.result is None:
            return f"waiting for rerun #{self.rerun_id} ({self.rerun.state})"
        if self.result.get("identical"):
            return f"identical: {self.result['compared']} metric points"
        if "error" in self.result:
            return self.result["error"]
        r = self.result
        delta = "" if r.get("delta") is None else f" (by {r['delta']:+.6g})"
        return f"diverged at step {r['step']}, {r['metric']}: {r['original']} -> {r['rerun']}{delta}"
