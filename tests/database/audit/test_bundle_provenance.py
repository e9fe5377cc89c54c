"""Imported bundles: verified when a trusted key signed them, otherwise unverified and badged until Verify."""

from __future__ import annotations

import io
import os

import pyarrow as pa
import pytest

from rolloutlab.audit import signing
from rolloutlab.audit.models import AuditRecord
from rolloutlab.execution.executor import execute
from rolloutlab.runs.models import Run
from tests.offline.engine.bundles import many_members_bomb, members, resealed, rss_growth, small_bundle, zeros_bomb
from tests.offline.engine.test_bundle_safety import GOOD_METRICS, parquet
from workers.bundle import load_signing_key, new_signing_key, public_key_text, read_bundle, signing_key_pem

pytestmark = pytest.mark.django_db

BADGE = 'class="badge unverified"'


@pytest.fixture(autouse=True)
def fresh_keys():
    signing.forget()  # settings a test changes are read afresh
    yield
    signing.forget()


def own_key():
    return signing.deployment_key()


def imported(client, data: bytes) -> Run:
    response = client.post("/api/bundles?project=imports", data=data, content_type="application/zip")
    assert response.status_code == 201, response.content
    return Run.objects.get(id=response.json()["id"])


def edited_metrics(data: bytes) -> bytes:
    """The metrics made better, the manifest's hashes recomputed; the signature left as it was."""
    better = parquet({**GOOD_METRICS, "value": pa.array([0.99], pa.float64())})
    return resealed(data, {"metrics.parquet": better})


def badge_pages(client, run: Run) -> dict[str, str]:
    return {
        "runs list": client.get("/runs/").content.decode(),
        "run page": client.get(f"/runs/{run.id}/").content.decode(),
        "compare": client.get(f"/compare/?runs={run.id}").content.decode(),
        "audit page": client.get(f"/audit/runs/{run.id}/").content.decode(),
    }


def test_a_bundle_signed_by_this_deployment_imports_as_verified(alice_client):
    run = imported(alice_client, small_bundle(own_key()))
    assert not run.unverified
    audit = AuditRecord.objects.get(run=run)
    assert audit.signer_trusted and audit.signer == public_key_text(own_key())
    assert audit.provenance == "verified: signed by this deployment"
    assert all(BADGE not in page for page in badge_pages(alice_client, run).values())


def test_an_export_is_signed_with_the_deployment_key(alice, alice_client):
    run = imported(alice_client, small_bundle(own_key()))
    exported = alice_client.get(f"/api/runs/{run.id}/bundle").content
    assert read_bundle(exported).signer == public_key_text(own_key())


def test_a_resealed_edited_bundle_imports_only_as_unverified_and_is_badged_everywhere(alice_client):
    run = imported(alice_client, edited_metrics(small_bundle(own_key())))
    assert run.unverified and run.summary["reward/mean"] == 0.99  # imported whole, but marked
    audit = AuditRecord.objects.get(run=run)
    assert not audit.signer_trusted and audit.signer == ""
    assert audit.provenance.startswith("unverified: the signature by key") and "does not match" in audit.provenance
    for where, page in badge_pages(alice_client, run).items():
        assert BADGE in page, where
    assert alice_client.get(f"/api/runs/{run.id}").json()["unverified"] is True
    # passed on, it goes unsigned: this deployment does not vouch for what no trusted key signed
    assert read_bundle(alice_client.get(f"/api/runs/{run.id}/bundle").content).signature_problem == "not signed"


def test_a_bundle_resealed_and_signed_with_another_key_is_unverified(alice_client):
    forger = new_signing_key()
    run = imported(alice_client, resealed(small_bundle(own_key()), {}, key=forger))
    assert run.unverified
    audit = AuditRecord.objects.get(run=run)
    assert audit.signer == public_key_text(forger) and not audit.signer_trusted
    assert "which this deployment does not trust" in audit.provenance
    assert BADGE in alice_client.get(f"/runs/{run.id}/").content.decode()


def test_a_key_listed_in_trusted_keys_makes_its_bundles_verified(alice_client, settings):
    partner = new_signing_key()
    settings.BUNDLE_TRUSTED_KEYS = [public_key_text(partner)]
    run = imported(alice_client, small_bundle(partner))
    assert not run.unverified
    assert AuditRecord.objects.get(run=run).provenance.startswith("verified: signed by trusted key ")


@pytest.mark.parametrize("said", ["queued", "running"])
def test_a_bundle_that_claims_a_live_state_lands_cancelled_and_no_worker_is_sent_it(alice_client, said, monkeypatch):
    sent = []
    monkeypatch.setattr("rolloutlab.execution.services.submit", sent.append)
    record = {"run": {"name": "live", "method": "grpo", "seed": 0, "state": said, "steps": 2}}
    run = imported(alice_client, small_bundle(record=record))
    assert run.state == "cancelled" and run.finished_at is not None and sent == []
    assert "an imported run never runs here" in run.transitions.get().cause
    assert alice_client.post(f"/api/runs/{run.id}/cancel").status_code == 409  # a final state: nothing to cancel
    assert alice_client.delete(f"/api/runs/{run.id}").status_code == 204  # and it can be deleted
    ended = imported(alice_client, small_bundle(record={"run": {**record["run"], "state": "failed"}}))
    assert ended.state == "failed"  # how a run ended is kept
    unknown = small_bundle(record={"run": {**record["run"], "state": "paused"}})
    refused = alice_client.post("/api/bundles?project=imports", data=unknown, content_type="application/zip")
    assert refused.status_code == 400 and "run.state" in refused.json()["error"]


def test_an_unsigned_bundle_is_unverified(alice_client):
    run = imported(alice_client, small_bundle())
    assert run.unverified and AuditRecord.objects.get(run=run).provenance == "unverified: not signed"


def test_the_deployment_key_comes_from_settings(settings):
    key = new_signing_key()
    settings.BUNDLE_SIGNING_KEY = signing_key_pem(key)
    signing.forget()
    assert public_key_text(signing.deployment_key()) == public_key_text(load_signing_key(signing_key_pem(key)))
    assert public_key_text(key) in signing.trusted_keys()


# ------------------------------------------------------------------ refused before anything is written
def test_a_zip_bomb_upload_is_refused_with_a_clear_message_and_little_memory(alice_client, tmp_path):
    path = tmp_path / "bomb.zip"
    zeros_bomb(path, gigabytes=1.0)
    with path.open("rb") as upload, rss_growth() as memory:
        response = alice_client.post("/api/bundles", {"bundle": upload})
    assert response.status_code == 400
    assert "refused: metrics.parquet would decompress to 1073741824 bytes" in response.json()["error"]
    assert memory["mb"] <= 50, memory
    assert Run.objects.count() == 0


def test_a_many_member_bomb_is_refused_on_the_import_page(alice_client, tmp_path):
    path = tmp_path / "many.zip"
    many_members_bomb(path, 60_000)
    with path.open("rb") as upload, rss_growth() as memory:
        response = alice_client.post("/audit/import/", {"bundle": upload})
    assert response.status_code == 400 and "refused: 60000 members" in response.content.decode()
    assert memory["mb"] <= 50, memory
    assert Run.objects.count() == 0


def test_an_upload_over_the_cap_is_refused_with_413_before_it_is_parsed(alice_client, settings):
    settings.BUNDLE_MAX_BYTES = 1000
    data = small_bundle()
    raw = alice_client.post("/api/bundles", data=data, content_type="application/zip")
    form = alice_client.post("/api/bundles", {"bundle": io.BytesIO(data)})
    page = alice_client.post("/audit/import/", {"bundle": io.BytesIO(data)})
    assert (raw.status_code, form.status_code, page.status_code) == (413, 413, 413)
    assert "larger than" in raw.json()["error"]
    assert Run.objects.count() == 0


@pytest.mark.parametrize(
    ("member", "content", "named"),
    [
        ("config.yaml", b"seed: -5\n", "config.yaml: seed"),
        ("record.json", b'{"run": {"state": "exploded"}}', "record.json: run.state"),
        ("metrics.parquet", b"nope", "metrics.parquet: not a readable parquet file"),
        ("samples.jsonl", b'{"step": 1, "completion": "a\\u0000"}\n', "samples.jsonl: line 1, completion"),
        ("artifacts.json", b'[{"path": 1, "kind": "x"}]', "artifacts.json: item 0, path"),
        ("signature.json", b'{"algorithm": "ed25519"}', "signature.json: public_key"),
    ],
)
def test_a_malformed_member_is_refused_by_name_and_nothing_is_written(alice_client, member, content, named):
    response = alice_client.post("/api/bundles", data=resealed(small_bundle(own_key()), {member: content}),
                                 content_type="application/zip")  # fmt: skip
    assert response.status_code == 400
    assert named in response.json()["error"]
    assert Run.objects.count() == 0 and AuditRecord.objects.count() == 0


# ------------------------------------------------------------------ Verify lifts the badge
@pytest.mark.django_db(transaction=True)  # the executor's reporter writes from its own thread
def test_verify_reruns_an_unverified_import_and_its_verdict_replaces_the_badge(alice, alice_client, monkeypatch):
    from tests.database.audit.test_audit_platform import launched

    monkeypatch.setattr("rolloutlab.execution.services.submit", lambda run_id: None)
    original = launched(alice)
    exported = alice_client.get(f"/api/runs/{original.id}/bundle").content
    unsigned = resealed(exported, {}, keep_signature=False)
    assert "signature.json" not in members(unsigned)
    run = imported(alice_client, unsigned)
    assert run.unverified
    rerun_id = alice_client.post(f"/api/runs/{run.id}/verify").json()["rerun"]
    assert execute(rerun_id) == "succeeded"
    run.refresh_from_db()
    assert not run.unverified
    for where in ("/runs/", f"/runs/{run.id}/"):
        page = alice_client.get(where).content.decode()
        assert 'data-field="verdict"' in page and "verify: identical:" in page, where
        assert BADGE not in page, where  # reproduced here: no longer unverified


def test_a_raw_body_over_djangos_memory_cap_is_streamed_not_refused_by_it(alice_client, settings):
    """request.body is capped at DATA_UPLOAD_MAX_MEMORY_SIZE (2.5 MB); bundles are read as a capped stream instead."""
    body = os.urandom(settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 2**20)
    response = alice_client.post("/api/bundles", data=body, content_type="application/zip")
    assert response.status_code == 400 and "not a Rollout Lab bundle (not a zip archive)" in response.json()["error"]


def test_the_management_command_prints_the_public_key_and_makes_new_keys(tmp_path):
    from django.core.management import call_command

    shown = io.StringIO()
    call_command("bundle_signing_key", stdout=shown)
    assert shown.getvalue().strip() == public_key_text(own_key())
    made = io.StringIO()
    call_command("bundle_signing_key", "--new", str(tmp_path / "k.pem"), stdout=made)
    key = load_signing_key((tmp_path / "k.pem").read_text())
    assert made.getvalue().strip().endswith(public_key_text(key)) and public_key_text(key) != public_key_text(own_key())


@pytest.mark.django_db
def test_the_differences_of_a_queued_run_say_it_has_no_record_instead_of_listing_everything(alice_client, alice):
    from tests.conftest import project_of, small_config

    project = project_of(alice)
    config = small_config().model_dump(mode="json")
    made = {state: Run.objects.create(project=project, name=state, owner=alice, config=config, config_hash="0" * 64,
                                      state=state) for state in ("succeeded", "queued")}  # fmt: skip
    done, queued = made["succeeded"], made["queued"]
    AuditRecord.objects.create(run=done, record={"config": config, "seeds": {"seed": 0}, "packages": {"torch": "2"}})
    page = alice_client.get(f"/audit/differences/?a={done.id}&b={queued.id}").content.decode()
    assert 'id="not-recorded"' in page and f"#{queued.id} (queued) has no record yet" in page
    assert "different)" not in page
    answer = alice_client.get(f"/api/differences?a={done.id}&b={queued.id}").json()
    assert answer["unrecorded"] == [queued.id] and answer["differences"] == {}
