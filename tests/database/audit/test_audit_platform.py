"""Audit on the platform: records kept, verify by rerun, first divergence, bundles out and in."""

import io
import json
import os
import subprocess
import sys
import zipfile
from datetime import timedelta

import pytest
from django.db import OperationalError, connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from rolloutlab.audit import services
from rolloutlab.audit.models import AuditRecord, Verification
from rolloutlab.compare.stats import DEFAULT_BAND
from rolloutlab.execution import lifecycle
from rolloutlab.execution import services as execution
from rolloutlab.execution.executor import execute
from rolloutlab.runs.models import Run
from tests.conftest import REPO
from tests.support.platform_fixtures import SMALL_RUN
from workers.audit import compare_streams
from workers.bundle import read_bundle
from workers.reporting import read_metrics

pytestmark = pytest.mark.django_db(transaction=True)  # the executor's reporter writes from its own thread

RUN = {**SMALL_RUN, "schedule": {**SMALL_RUN["schedule"], "steps": 4, "save_final": True}}


@pytest.fixture(autouse=True)
def run_in_process(monkeypatch, settings, tmp_path):
    """Queued runs are executed here, by the same executor a Celery worker calls."""
    settings.STORAGE_ROOT = tmp_path / "storage"
    monkeypatch.setattr("rolloutlab.execution.services.submit", lambda run_id: None)


def launched(user, config=RUN):
    run = execution.launch_run(user, config)
    assert execute(run.id) == "succeeded", Run.objects.get(id=run.id).detail
    return Run.objects.get(id=run.id)


def test_the_worker_keeps_the_record_with_the_run(alice):
    run = launched(alice)
    record = AuditRecord.objects.get(run=run).record
    assert record["config_hash"] == run.config_hash and record["data_stream"]["examples"] == 16
    assert {a.kind for a in run.artifacts.all()} == {"environment", "data-stream", "checkpoint"}
    assert all(len(a.sha256) == 64 for a in run.artifacts.all())


def test_verify_reruns_and_reports_identical(alice, alice_client):
    run = launched(alice)
    response = alice_client.post(f"/api/runs/{run.id}/verify")
    assert response.status_code == 201
    rerun_id = response.json()["rerun"]
    assert Run.objects.get(id=rerun_id).parent_id == run.id
    assert execute(rerun_id) == "succeeded"
    verification = Verification.objects.get(rerun_id=rerun_id)
    assert verification.result["identical"] and verification.result["compared"] > 100
    page = alice_client.get(f"/audit/runs/{run.id}/").content.decode()
    assert "identical:" in page
    assert alice_client.get(f"/api/runs/{run.id}/audit").json()["verifications"][0]["result"]["identical"]


def test_a_database_blip_as_a_verification_rerun_ends_delays_its_verdict_and_loses_nothing(alice, alice_client,
                                                                                             monkeypatch):  # fmt: skip
    run = launched(alice)
    rerun_id = alice_client.post(f"/api/runs/{run.id}/verify").json()["rerun"]
    real_compare, tries = services.compare_runs, []

    def compare_after_a_blip(*args):
        tries.append(args)
        if len(tries) == 1:
            raise OperationalError("the connection was closed: the database is restarting")
        return real_compare(*args)

    monkeypatch.setattr(services, "compare_runs", compare_after_a_blip)
    assert execute(rerun_id) == "succeeded"
    assert tries == [(run.id, rerun_id)] * 2
    assert Verification.objects.get(rerun_id=rerun_id).result["identical"]


def lose(client, run_id: int) -> None:
    """The rerun's worker stops heartbeating on its only attempt (RUN_MAX_ATTEMPTS 1): the monitor declares the
    run lost. One transaction: the live stack's lost-run monitor, another process on this database, must not see
    the stale run before this test's own check takes it."""
    with transaction.atomic():
        assert lifecycle.claim(run_id, "host-a") == 1
        Run.objects.filter(id=run_id).update(heartbeat_at=timezone.now() - timedelta(minutes=5))
        assert lifecycle.mark_lost_runs() == [run_id]


def cancel_before_it_starts(client, run_id: int) -> None:
    assert client.post(f"/api/runs/{run_id}/cancel").status_code == 200


@pytest.mark.parametrize("end, state", [(cancel_before_it_starts, "cancelled"), (lose, "lost")])
def test_a_verification_whose_rerun_ends_without_a_worker_gets_its_verdict_at_once(alice, alice_client, settings,
                                                                                     end, state):  # fmt: skip
    """A rerun cancelled while queued, or declared lost by the monitor, has no worker left to end it: the move
    itself settles the verification, which would otherwise stay pending for good."""
    run = launched(alice)
    rerun_id = alice_client.post(f"/api/runs/{run.id}/verify").json()["rerun"]
    settings.RUN_MAX_ATTEMPTS = 1
    end(alice_client, rerun_id)
    assert Run.objects.get(id=rerun_id).state == state
    verification = Verification.objects.get(rerun_id=rerun_id)
    assert verification.result == {"identical": False, "error": f"the rerun ended {state}"}
    assert verification.compared_at is not None


def test_the_audit_pages_write_nothing_on_get(alice, alice_client):
    """A verification is settled by the worker when its rerun ends, never by whoever opens a page."""
    run = launched(alice)
    rerun_id = alice_client.post(f"/api/runs/{run.id}/verify").json()["rerun"]
    assert execute(rerun_id) == "succeeded"
    other = launched(alice, {**RUN, "seed": 1})
    pages = [f"/audit/runs/{run.id}/", f"/audit/runs/{rerun_id}/", f"/api/runs/{run.id}/audit",
             f"/audit/differences/?a={run.id}&b={other.id}", f"/runs/{run.id}/", "/runs/"]  # fmt: skip
    for url in pages:
        with CaptureQueriesContext(connection) as queries:
            assert alice_client.get(url).status_code == 200, url
        writes = [q["sql"] for q in queries if q["sql"].lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE"))]
        assert not writes, (url, writes)


def test_one_changed_knob_is_reported_at_its_first_divergence(alice):
    original = launched(alice)
    changed = launched(alice, {**RUN, "optimizer": {"lr": 5e-3}})
    verdict = services.compare_runs(original.id, changed.id)
    # step 1 samples and scores with the same weights; only the learning rate it reports differs
    assert (verdict["step"], verdict["metric"]) == (1, "optim/lr")
    assert verdict["original"] == pytest.approx(2e-4) and verdict["delta"] == pytest.approx(5e-3 - 2e-4)


def test_only_a_succeeded_run_can_be_verified(alice, alice_client):
    run = execution.launch_run(alice, RUN)
    assert alice_client.post(f"/api/runs/{run.id}/verify").status_code == 409
    assert Run.objects.count() == 1


def bundle_bytes(client, run) -> bytes:
    response = client.get(f"/api/runs/{run.id}/bundle")
    assert response.status_code == 200
    return response.content


def test_a_bundle_round_trips_through_import_and_reproduces_from_the_cli(alice, alice_client, tmp_path):
    run = launched(alice)
    data = bundle_bytes(alice_client, run)
    assert bundle_bytes(alice_client, run) == data  # the same run always bundles to the same bytes
    response = alice_client.post("/api/bundles", data=data, content_type="application/zip")
    assert response.status_code == 201
    imported = Run.objects.get(id=response.json()["id"])
    assert imported.id != run.id and imported.state == "succeeded" and imported.config_hash == run.config_hash
    assert services.compare_runs(run.id, imported.id)["identical"]
    assert imported.samples.count() == run.samples.count() and imported.artifacts.count() == run.artifacts.count()
    assert (
        AuditRecord.objects.get(run=imported).record["data_stream"]
        == AuditRecord.objects.get(run=run).record["data_stream"]
    )

    path = tmp_path / "run.zip"
    path.write_bytes(data)
    out = tmp_path / "again"
    command = [sys.executable, "-m", "workers", "run", "--from-bundle", str(path), "--out", str(out), "--no-progress"]
    subprocess.run(command, cwd=REPO, check=True, capture_output=True)
    assert compare_streams(services.metric_rows(run.id), read_metrics(out / "metrics.jsonl"))["identical"]


def test_another_rollout_lab_imports_a_sweeps_bundles_as_one_experiment_or_not_at_all(alice, alice_client, tmp_path):
    """A second platform (the embedded one, on its own SQLite database) shows bundles as runs: `import_bundle A B
    --experiment NAME` (a sweep kept as bundles) puts them in one experiment and prints its compare page; with an
    altered bundle among them, nothing is imported."""
    good, altered = tmp_path / "good.zip", tmp_path / "altered.zip"
    good.write_bytes(bundle_bytes(alice_client, launched(alice)))
    altered.write_bytes(edit_config(good.read_bytes()))
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "SECRET_KEY")}
    env.update(SQLITE_PATH=str(tmp_path / "other.sqlite3"), STORAGE_ROOT=str(tmp_path / "other"))

    def manage(*command):
        return subprocess.run([sys.executable, "manage.py", *command], cwd=REPO, env=env, capture_output=True,
                              text=True)  # fmt: skip

    assert manage("migrate", "-v0").returncode == 0 and manage("demo_user").returncode == 0
    refused = manage("import_bundle", str(good), str(altered), "--experiment", "sweep")
    assert refused.returncode == 1 and "altered: config.yaml does not match its sha256" in refused.stderr
    done = manage("import_bundle", str(good), str(good), "--experiment", "real model")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line.split(":")[0] for line in lines[:2]] == ["imported run #1", "imported run #2"]  # none kept before
    final = [row["eval/pass@1"] for row in read_bundle(good).metric_rows() if "eval/pass@1" in row][-1]
    assert lines[0].endswith(f"({final} eval/pass@1)")
    assert lines[2] == "experiment #1 (2 runs): /compare/?experiment=1"
    too_long = manage("import_bundle", str(good), "--experiment", "x" * 201)
    assert too_long.returncode == 1 and "--experiment: at most 200 characters" in too_long.stderr
    bad_view = manage("import_bundle", str(good), "--experiment", "a card", "--view", "x=hours")
    assert bad_view.returncode == 1 and "--view: x: one of step, tokens, seconds" in bad_view.stderr
    card = manage("import_bundle", str(good), str(good), "--experiment", "a card",
                  "--view", "metrics=eval/pass@1,completions/mean_length&x=tokens&baseline=grpo")  # fmt: skip
    assert card.returncode == 0, card.stderr
    # the bad view imported nothing: the runs are #3 and #4, the experiment #2
    assert [line.split(":")[0] for line in card.stdout.splitlines()[:2]] == ["imported run #3", "imported run #4"]
    permalink = card.stdout.splitlines()[2].split(": ", 1)[1]
    assert permalink == ("/compare/?experiment=2&group=method&metrics=eval/pass@1,completions/mean_length&x=tokens"
                         "&smooth=0&band=" + DEFAULT_BAND + "&baseline=grpo")  # fmt: skip


def edit_config(data: bytes) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(out, "w") as target:
        for item in source.infolist():
            content = source.read(item)
            if item.filename == "config.yaml":
                content = content.replace(b"seed: 0", b"seed: 7", 1)
            target.writestr(item, content)
    return out.getvalue()


def test_an_edited_bundle_is_reported_as_altered_and_not_imported(alice, alice_client):
    run = launched(alice)
    response = alice_client.post("/api/bundles", data=edit_config(bundle_bytes(alice_client, run)),
                                 content_type="application/zip")  # fmt: skip
    assert response.status_code == 400
    assert "altered: config.yaml does not match its sha256" in response.json()["error"]
    assert Run.objects.count() == 1
    page = alice_client.post("/audit/import/", {"bundle": io.BytesIO(b"not a zip")})
    assert page.status_code == 400 and "not a Rollout Lab bundle" in page.content.decode()


def test_the_audit_page_shows_the_record(alice, alice_client):
    run = launched(alice)
    page = alice_client.get(f"/audit/runs/{run.id}/").content.decode()
    record = AuditRecord.objects.get(run=run).record
    for shown in (record["initial_weights_sha256"], record["dataset_fingerprint"], record["data_stream"]["sha256"],
                  record["host"], "torch", record["cpu"]["generation"]):  # fmt: skip
        assert shown in page
    assert json.loads(alice_client.get(f"/api/runs/{run.id}/audit").content)["record"]["seeds"] == {
        "run": 0,
        "model_init": 0,
    }
