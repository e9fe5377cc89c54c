"""Audit services: keep records, verify by rerun, compare records, export and import bundles."""

from __future__ import annotations

import json
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from rolloutlab.accounts import activity
from rolloutlab.accounts.access import is_member
from rolloutlab.audit.models import AuditRecord, Verification
from rolloutlab.audit.signing import deployment_key, trusted_keys
from rolloutlab.execution import services as execution
from rolloutlab.inputs import UserInputError
from rolloutlab.metrics.ingest import write_columns
from rolloutlab.metrics.models import MetricKey, MetricPoint
from rolloutlab.realtime import notify
from rolloutlab.runs.models import FINAL_STATES, Artifact, Project, Run, Sample, State, Transition
from workers import bundle as bundles
from workers import metrics as metric
from workers.audit import compare_streams, diff_records
from workers.bundle import Bundle, BundleError, Limits, public_key_text, read_bundle, trusted, write_bundle
from workers.config import RunConfig
from workers.errors import ConfigError


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
        raise UserInputError(f"only a succeeded run can be verified; this one is {run.state}", status=409)
    with transaction.atomic():
        rerun = execution.rerun(run, user)
        Run.objects.filter(id=rerun.id).update(name=f"{run.name} (verify)")
        activity.note(user, "verified", run.project, activity.run_subject(run))
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
    if verification.result.get("identical"):  # reproduced here: an unsigned import has earned its place
        Run.objects.filter(id=verification.original_id).update(unverified=False)
    notify(verification.original_id, {"kind": "verification", "rerun": rerun_id, "verdict": verification.verdict})
    return verification


def record_of(run: Run) -> dict:
    audit = AuditRecord.objects.filter(run=run).first()
    return audit.record if audit else {}


WITHHELD = "withheld from a share link: a member of the team reads it on the run's audit page"


def record_for(run: Run, reader) -> dict:
    """The record as `reader` may read it: whole for a member of the run's team; for a share link's holder without
    the text of the uncommitted diff (its sha256 stays), which may hold what the redaction does not know to hide."""
    record = record_of(run)
    if is_member(reader) or not record.get("code", {}).get("diff"):
        return record
    return {**record, "code": {**record["code"], "diff": WITHHELD}}


def differences(a: Run, b: Run) -> dict[str, list[dict]]:
    return diff_records(record_of(a), record_of(b))


def unrecorded(*runs: Run) -> list[Run]:
    """The runs with no record yet (queued, or failed before their first step): nothing to compare them by."""
    recorded = set(AuditRecord.objects.filter(run__in=runs).values_list("run_id", flat=True))
    return [run for run in runs if run.id not in recorded]


# ------------------------------------------------------------------ bundles
def export_bundle(run: Run, path, reader) -> str:
    """Write the run's bundle as `reader` may read it (a share link's holder: without the diff's text); returns its
    sha256."""
    names = dict(MetricKey.objects.values_list("id", "name"))
    metrics = [
        {"step": step, "metric": names[key_id], "value": value, "wall_time": wall}
        for step, key_id, value, wall in MetricPoint.objects.filter(run_id=run.id)
        .values_list("step", "key_id", "value", "wall_time")
        .iterator(chunk_size=20_000)
    ]
    record = dict(record_for(run, reader))
    record["run"] = {"name": run.name, "method": run.method, "seed": run.seed, "state": run.state, "steps": run.step}
    artifacts = [{"path": a.path, "kind": a.kind, "sha256": a.sha256} for a in run.artifacts.all()]
    samples = [{"step": s.step, **s.data} for s in run.samples.all()]
    # an unverified import is passed on unsigned: signing it here would vouch for what no trusted key did
    key = None if run.unverified else deployment_key()
    return write_bundle(path, config=run.config, record=record, metrics=metrics, samples=samples,
                        artifacts=artifacts, key=key)  # fmt: skip


def import_limits() -> Limits:
    return Limits(
        max_bytes=settings.BUNDLE_MAX_BYTES, max_members=settings.BUNDLE_MAX_MEMBERS,
        max_member_bytes=settings.BUNDLE_MAX_MEMBER_BYTES, max_total_bytes=settings.BUNDLE_MAX_TOTAL_BYTES,
        max_ratio=settings.BUNDLE_MAX_RATIO,
    )  # fmt: skip


def imported_config(bundle: Bundle) -> RunConfig:
    """The bundle's config under this deployment's rules: valid knobs, data paths inside DATA_ROOTS.

    The run ceilings are left to a rerun (Verify): an imported run does not execute here."""
    try:
        return execution.validate_config(bundle.config, ceilings=False)
    except ConfigError as exc:
        where = "; ".join(f"{field}: {message}" for field, message in exc.fields.items()) or str(exc)
        raise BundleError(f"config.yaml: {where}") from None


def provenance(bundle: Bundle) -> tuple[bool, str]:
    """(verified, why): verified only for a valid signature by this deployment's key or one it trusts."""
    if trusted(bundle, trusted_keys()):
        own = bundle.signer == public_key_text(deployment_key())
        by = "this deployment" if own else f"trusted key {bundles.key_id(bundle.signer)}"
        return True, f"verified: signed by {by}"
    if bundle.signer:
        return False, f"unverified: signed by key {bundles.key_id(bundle.signer)}, which this deployment does not trust"
    return False, f"unverified: {bundle.signature_problem}"


def import_bundle(source, user, project: Project) -> Run:
    """A bundle as a run of this platform: checked first (BundleError if over a limit, malformed or altered),
    then recorded whole; one no trusted key signed is marked unverified until Verify reproduces it."""
    bundle = read_bundle(source, import_limits())
    cfg = imported_config(bundle)
    verified, judged = provenance(bundle)
    about = bundle.record.get("run") or {}
    state, claimed = imported_state(about.get("state"))
    with transaction.atomic():
        run = Run.objects.create(
            project=project, name=f"{about.get('name') or cfg.method or 'run'} (imported)", owner=user,
            config=cfg.model_dump(mode="json"), config_hash=cfg.config_hash(), method=cfg.method or "",
            task=cfg.task.name, seed=cfg.seed, state=state, total_steps=cfg.schedule.steps,
            finished_at=timezone.now(), unverified=not verified,
        )  # fmt: skip
        cause = f"imported from bundle {bundle.sha256[:16]} by {user} ({judged}){claimed}"
        Transition.objects.create(run=run, from_state="", to_state=run.state, cause=cause)
        store_metrics(run, bundle)
        Sample.objects.bulk_create([Sample(run=run, step=s.pop("step", 0), data=s) for s in bundle.samples])
        Artifact.objects.bulk_create([Artifact(run=run, kind=a.get("kind", ""), path=a.get("path", ""),
                                               sha256=a.get("sha256", "")) for a in bundle.artifacts])  # fmt: skip
        AuditRecord.objects.create(run=run, record=bundle.record, imported_from=bundle.sha256,
                                   signer=bundle.signer or "", signer_trusted=verified, provenance=judged)  # fmt: skip
        activity.note(user, "imported", project, f"{activity.run_subject(run)} from bundle {bundle.sha256[:16]}")
    return run


def imported_state(said) -> tuple[str, str]:
    """The state an imported run lands in, and a note when it is not the one its bundle says. A run that ended
    keeps how it ended; one the bundle says is queued or running (or in a state this platform does not know) lands
    cancelled: an imported run never runs here (no worker may take it, and a live state could never be left)."""
    if said is None:
        return State.SUCCEEDED, ""
    if said in FINAL_STATES:
        return State(said), ""
    return State.CANCELLED, f"; the bundle said {str(said)[:40]!r}, and an imported run never runs here"


def store_metrics(run: Run, bundle: Bundle) -> None:
    points = bundle.metrics
    write_columns(run.id, [p["metric"] for p in points], [p["step"] for p in points],
                  [p["value"] for p in points], [p.get("wall_time") or 0.0 for p in points])  # fmt: skip
    summary = {}
    for point in sorted(points, key=lambda p: p["step"]):
        summary[point["metric"]] = point["value"]
    last = max((p["step"] for p in points), default=0)
    Run.objects.filter(id=run.id).update(summary=summary, step=last, train_seconds=summary.get(metric.WALL_S, 0.0))
