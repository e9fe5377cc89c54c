"""Audit services: keep records, verify by rerun, compare records, export and import bundles."""

from __future__ import annotations

import json
from pathlib import Path

from django.db import transaction
from django.utils import timezone

from rolloutlab.audit.models import AuditRecord, Verification
from rolloutlab.metrics.ingest import write_columns
from rolloutlab.metrics.models import MetricKey, MetricPoint
from rolloutlab.metrics.realtime import notify
from rolloutlab.runs import services as runs
from rolloutlab.runs.models import FINAL_STATES, Artifact, Project, Run, Sample, State, Transition
from workers.audit import compare_streams, diff_records
from workers.bundle import Bundle, read_bundle, write_bundle
from workers.config import RunConfig


def keep_record(run_id: int, path: str, kind: str) -> None:
    """Called for each artifact a run reports: its environment record and data fingerprint go to the audit."""
    if kind == "environment":
        record = json.loads(Path(path).read_text())
        AuditRecord.objects.update_or_create(run_id=run_id, defaults={"record": record})
    elif kind == "data-stream":
        with transaction.atomic():
            audit = AuditRecord.objects.select_for_update().filter(run_id=run_id).first()
            if audit:
                audit.record["data_stream"] = json.loads(Path(path).read_text())
                audit.save(update_fields=["record"])


def metric_rows(run_id: int) -> list[dict]:
    """The run's metrics as metrics.jsonl rows: one object per step."""
    names = dict(MetricKey.objects.values_list("id", "name"))
    rows: dict[int, dict] = {}
    points = MetricPoint.objects.filter(run_id=run_id).values_list("step", "key_id", "value").order_by("step")
    for step, key_id, value in points.iterator(chunk_size=20_000):
        rows.setdefault(step, {"step": step})[names[key_id]] = value
    return list(rows.values())


def compare_runs(original_id: int, rerun_id: int) -> dict:
    return compare_streams(metric_rows(original_id), metric_rows(rerun_id))


def verify(run: Run, user) -> Verification:
    """Rerun the run with its exact config; the comparison is made when the rerun ends."""
    if run.state != State.SUCCEEDED:
        raise ValueError(f"only a succeeded run can be verified; this one is {run.state}")
    with transaction.atomic():
        rerun = runs.rerun(run, user)
        Run.objects.filter(id=rerun.id).update(name=f"{run.name} (verify)")
        return Verification.objects.create(original=run, rerun=rerun, requested_by=user)


def complete_verification(rerun_id: int) -> Verification | None:
    """Compare a finished verification rerun with its original, once; None if there is nothing to do."""
    verification = Verification.objects.select_related("rerun", "original").filter(rerun_id=rerun_id).first()
    if verification is None or verification.result is not None or verification.rerun.state not in FINAL_STATES:
        return verification
    if verification.rerun.state != State.SUCCEEDED:
        verification.result = {"identical": False, "error": f"the rerun ended {verification.rerun.state}"}
    else:
        verification.result = compare_runs(verification.original_id, rerun_id)
    verification.compared_at = timezone.now()
    verification.save(update_fields=["result", "compared_at"])
    notify(verification.original_id, {"kind": "verification", "rerun": rerun_id, "verdict": verification.verdict})
    return verification


def record_of(run: Run) -> dict:
    audit = AuditRecord.objects.filter(run=run).first()
    return audit.record if audit else {}


def differences(a: Run, b: Run) -> dict[str, list[dict]]:
    return diff_records(record_of(a), record_of(b))


# ------------------------------------------------------------------ bundles
def export_bundle(run: Run, path) -> str:
    """Write the run's bundle; returns its sha256."""
    names = dict(MetricKey.objects.values_list("id", "name"))
    metrics = [
        {"step": step, "metric": names[key_id], "value": value, "wall_time": wall}
        for step, key_id, value, wall in MetricPoint.objects.filter(run_id=run.id)
        .values_list("step", "key_id", "value", "wall_time")
        .iterator(chunk_size=20_000)
    ]
    record = dict(record_of(run))
    record["run"] = {"name": run.name, "method": run.method, "seed": run.seed, "state": run.state, "steps": run.step}
    artifacts = [{"path": a.path, "kind": a.kind, "sha256": a.sha256} for a in run.artifacts.all()]
    samples = [{"step": s.step, **s.data} for s in run.samples.all()]
    return write_bundle(path, config=run.config, record=record, metrics=metrics, samples=samples, artifacts=artifacts)


def import_bundle(source, user, project_name: str = "imported") -> Run:
    """A bundle as a run of this platform: checked first (BundleError if altered), then recorded whole."""
    bundle = read_bundle(source)
    cfg = RunConfig.model_validate(bundle.config)
    about = bundle.record.get("run", {})
    with transaction.atomic():
        project, _ = Project.objects.get_or_create(name=project_name[:100] or "imported", defaults={"owner": user})
        run = Run.objects.create(
            project=project, name=f"{about.get('name') or cfg.method or 'run'} (imported)", owner=user,
            config=cfg.model_dump(mode="json"), config_hash=cfg.config_hash(), method=cfg.method or "",
            task=cfg.task.name, seed=cfg.seed, state=about.get("state") or State.SUCCEEDED,
            total_steps=cfg.schedule.steps, finished_at=timezone.now(),
        )  # fmt: skip
        Transition.objects.create(run=run, from_state="", to_state=run.state,
                                  cause=f"imported from bundle {bundle.sha256[:16]} by {user}")  # fmt: skip
        store_metrics(run, bundle)
        Sample.objects.bulk_create([Sample(run=run, step=s.pop("step", 0), data=s) for s in bundle.samples])
        Artifact.objects.bulk_create([Artifact(run=run, kind=a.get("kind", ""), path=a.get("path", ""),
                                               sha256=a.get("sha256", "")) for a in bundle.artifacts])  # fmt: skip
        AuditRecord.objects.create(run=run, record=bundle.record, imported_from=bundle.sha256)
    return run


def store_metrics(run: Run, bundle: Bundle) -> None:
    points = bundle.metrics
    write_columns(run.id, [p["metric"] for p in points], [p["step"] for p in points],
                  [p["value"] for p in points], [p.get("wall_time") or 0.0 for p in points])  # fmt: skip
    summary = {}
    for point in sorted(points, key=lambda p: p["step"]):
        summary[point["metric"]] = point["value"]
    last = max((p["step"] for p in points), default=0)
    Run.objects.filter(id=run.id).update(summary=summary, step=last, train_seconds=summary.get("counters/wall_s", 0.0))
