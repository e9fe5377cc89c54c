"""Attempts: a worker claims a run with its latest wake-up only; a run whose worker stops heartbeating goes back to
the queue (bounded attempts); an attempt that a newer one fenced out writes nothing; a new attempt forgets the
steps after its checkpoint; a user resumes a failed, cancelled or lost run (and nothing else).

The runs wait on a queue of the test Redis that no worker serves, so every wake-up sent stays there to be read.
"""

from __future__ import annotations

import math
import threading
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from rolloutlab.execution import lifecycle, resume
from rolloutlab.execution.dispatch import broker_task_ids, submit
from rolloutlab.execution.reporter import Heartbeat, Lease, PlatformReporter
from rolloutlab.metrics.ingest import write_points
from rolloutlab.metrics.models import GroupOutcome, MetricBucket, MetricPoint
from rolloutlab.runs.models import Kind, LogLine, Outcome, Run, RunAttempt, Sample, State, Transition
from tests.conftest import project_of, small_config
from workers.stopping import Cancelled

pytestmark = pytest.mark.django_db(transaction=True)  # the reporter writes from its own thread


@pytest.fixture
def run(alice, probe_queue, settings):
    # A live stack may be up on this database (make test keeps one per worker): its monitor, another process with
    # a HEARTBEAT_TIMEOUT_S of 15 s, must not take a run first. Here the timeout is 1 s and a stopped heartbeat 2 s
    # old: stale for this process's monitor rounds, fresh for that one's for 13 s more.
    settings.HEARTBEAT_TIMEOUT_S = 1
    config = small_config(schedule={"steps": 300}).model_dump(mode="json")
    run = Run.objects.create(project=project_of(alice), name="r", owner=alice, config=config, config_hash="0" * 64,
                             queue=probe_queue, total_steps=300)  # fmt: skip
    Transition.objects.create(run=run, from_state="", to_state=State.QUEUED, cause="launched by alice")
    return run


def token(run) -> str:
    return Run.objects.values_list("celery_task_id", flat=True).get(id=run.id)


def claimed(run, host: str = "host-a") -> int:
    """Send the run's wake-up and claim the run with it, as a worker does."""
    submit(run.id)
    number = lifecycle.claim(run.id, host, token(run))
    assert number is not None
    return number


def stop_heartbeating(run) -> None:
    Run.objects.filter(id=run.id).update(heartbeat_at=timezone.now() - timedelta(seconds=2))


# ------------------------------------------------------------------ claims
def test_only_the_latest_wake_up_claims_the_run_and_only_once(run):
    submit(run.id)
    first = token(run)
    submit(run.id)  # e.g. the monitor sent it again
    latest = token(run)
    assert first != latest and {first, latest} <= broker_task_ids({run.queue})
    assert lifecycle.claim(run.id, "host-a", first) is None  # an older message (or one the broker redelivered)
    assert lifecycle.claim(run.id, "host-b", latest) == 1
    assert lifecycle.claim(run.id, "host-c", latest) is None  # running now: a redelivery of the same message
    run.refresh_from_db()
    assert run.state == State.RUNNING and run.worker_host == "host-b" and run.attempt == 1
    assert list(run.attempts.values_list("number", "worker_host", "outcome")) == [(1, "host-b", "")]


def test_an_attempt_ends_with_the_state_its_run_ends_in(run):
    claimed(run)
    assert lifecycle.transition(run.id, State.SUCCEEDED, "300 steps")
    attempt = RunAttempt.objects.get(run=run)
    assert (attempt.outcome, attempt.reason) == (Outcome.SUCCEEDED, "300 steps") and attempt.ended_at


# ------------------------------------------------------------------ lost workers
def test_a_run_whose_worker_stops_heartbeating_is_requeued_and_sent_again_until_its_attempts_run_out(run, settings):
    settings.RUN_MAX_ATTEMPTS = 3
    for number in (1, 2, 3):
        assert claimed(run, host=f"host-{number}") == number
        stop_heartbeating(run)
        assert lifecycle.mark_lost_runs() == [run.id]
        run.refresh_from_db()
        if number < 3:
            assert run.state == State.QUEUED and f"re-queued for attempt {number + 1}" in run.detail
            assert token(run) in broker_task_ids({run.queue})  # its new wake-up waits in the broker
    assert run.state == State.LOST and "3 attempts in a row lost their worker" in run.detail
    attempts = list(run.attempts.values_list("number", "worker_host", "outcome"))
    assert attempts == [(1, "host-1", "lost"), (2, "host-2", "lost"), (3, "host-3", "lost")]
    assert all("no heartbeat from its worker" in a.reason and a.ended_at for a in run.attempts.all())
    assert lifecycle.mark_lost_runs() == []  # lost stays lost


def test_a_run_whose_attempts_used_its_wall_time_is_lost_not_requeued(run, settings):
    settings.RUN_MAX_ATTEMPTS = 3
    config = {**run.config, "resources": {**run.config["resources"], "wall_time_s": 600}}
    Run.objects.filter(id=run.id).update(config=config)
    claimed(run)
    RunAttempt.objects.filter(run=run).update(started_at=timezone.now() - timedelta(minutes=11))  # hard-killed
    stop_heartbeating(run)
    assert lifecycle.mark_lost_runs() == [run.id]
    run.refresh_from_db()
    assert run.state == State.LOST and "its attempts have used its wall time of 600 s" in run.detail


def test_a_run_that_beats_again_before_the_monitor_takes_it_is_left_running(run):
    claimed(run)
    stop_heartbeating(run)
    deadline = timezone.now() - timedelta(seconds=30)
    Run.objects.filter(id=run.id).update(heartbeat_at=timezone.now())  # the beat lands between query and lock
    assert lifecycle.lost_worker(run.id, deadline, "no heartbeat") is None
    assert Run.objects.get(id=run.id).state == State.RUNNING


def test_an_attempt_fenced_out_by_a_newer_one_writes_nothing_and_is_told_to_stop(run, settings):
    settings.HEARTBEAT_INTERVAL_S = 0.05
    old = Lease(run.id, claimed(run, "host-a"))
    old_reporter = PlatformReporter(run.id, old)
    old_reporter.metrics(1, {"reward/mean": 0.1})
    old_reporter.flush()
    assert not old_reporter.should_stop()
    stop_heartbeating(run)  # the worker is cut off from the database for longer than the timeout
    assert lifecycle.mark_lost_runs() == [run.id]
    # back in the queue: no write lands any more, even before the next attempt claims the run
    old_reporter.metrics(2, {"reward/mean": 0.2})
    with pytest.raises(Cancelled):  # the trainer's flush before a resume checkpoint: no checkpoint follows
        old_reporter.flush()
    assert old.lost and MetricPoint.objects.filter(run=run).count() == 1
    new = Lease(run.id, lifecycle.claim(run.id, "host-b", token(run)))
    # the old worker is back: it writes nothing, reports no state, its heartbeat ends, and its trainer stops
    old_reporter.samples(2, [{"prompt": "1+1=", "completion": "2"}])
    old_reporter.groups(2, [group_row()])
    old_reporter.log("the old attempt speaks")
    old_reporter.status(State.SUCCEEDED, "2 steps")
    old_reporter._stop_checked_at = 0.0  # past the half-second cache
    assert old_reporter.should_stop()
    beat_before = Run.objects.get(id=run.id).heartbeat_at
    old_heartbeat = Heartbeat(old).start()
    old_heartbeat._thread.join(timeout=5)
    assert not old_heartbeat._thread.is_alive()
    old_reporter.close()
    run.refresh_from_db()
    assert run.state == State.RUNNING and run.attempt == 2 and run.heartbeat_at == beat_before
    assert not Sample.objects.filter(run=run).exists() and not GroupOutcome.objects.filter(run=run).exists()
    assert not LogLine.objects.filter(run=run, text="the old attempt speaks").exists()
    # the new attempt holds the run
    reporter = PlatformReporter(run.id, new)
    reporter.metrics(2, {"reward/mean": 0.25})
    reporter.status(State.SUCCEEDED, "2 steps")
    reporter.close()
    run.refresh_from_db()
    assert run.state == State.SUCCEEDED and not new.lost
    assert sorted(MetricPoint.objects.filter(run=run).values_list("step", "value")) == [(1, 0.1), (2, 0.25)]
    assert list(run.attempts.values_list("outcome", flat=True)) == ["lost", "succeeded"]


def test_a_heartbeat_that_sees_the_attempts_own_final_move_leaves_its_lease_held(run, monkeypatch):
    """The heartbeat and the flusher run in threads of their own: one that finds the run out of `running` just
    after the attempt's move to `succeeded` committed, before the reporter heard back, is seeing that move. The
    attempt must not take itself for fenced out (the executor would then skip what follows a run's end, such as
    settling a verification)."""
    lease = Lease(run.id, claimed(run))
    real_transition, sights = lifecycle.transition, []

    def transition_then_a_beat(*args, **kwargs) -> bool:
        moved = real_transition(*args, **kwargs)
        beat = threading.Thread(target=lambda: sights.append(held_in_own_connection(lease)))
        beat.start(), beat.join(10)
        return moved

    monkeypatch.setattr(lifecycle, "transition", transition_then_a_beat)
    PlatformReporter(run.id, lease).status(State.SUCCEEDED, "300 steps")
    assert sights == [False] and Run.objects.get(id=run.id).state == State.SUCCEEDED
    assert not lease.lost


def test_an_attempts_final_move_refused_because_a_newer_attempt_holds_the_run_loses_its_lease(run):
    old = Lease(run.id, claimed(run, "host-a"))
    stop_heartbeating(run)
    assert lifecycle.mark_lost_runs() == [run.id]
    assert lifecycle.claim(run.id, "host-b", token(run)) == 2
    assert not old.lost  # the old attempt has not looked since
    PlatformReporter(run.id, old).status(State.SUCCEEDED, "300 steps")
    assert old.lost and Run.objects.get(id=run.id).state == State.RUNNING


def test_a_report_after_the_attempts_own_final_move_is_refused_and_leaves_its_lease_held(run):
    lease = Lease(run.id, claimed(run))
    reporter = PlatformReporter(run.id, lease)
    reporter.status(State.SUCCEEDED, "300 steps")
    reporter.status(State.FAILED, "an error after the end")  # e.g. raised by what follows the trainer's last report
    assert Run.objects.get(id=run.id).state == State.SUCCEEDED and not lease.lost


def held_in_own_connection(lease: Lease) -> bool:
    try:
        with transaction.atomic():
            return lease.hold()
    finally:
        connection.close()


def test_a_write_under_way_holds_the_requeue_off_until_it_commits_and_none_lands_after_it(run):
    """The lease is checked in the write's own transaction, holding the run's row: the monitor's re-queue waits
    for the write, and the next write of the old attempt finds the run gone."""
    lease = Lease(run.id, claimed(run))
    stop_heartbeating(run)
    holding, release, requeued = threading.Event(), threading.Event(), threading.Event()

    def write_slowly() -> None:
        try:
            with transaction.atomic():
                assert lease.hold()
                holding.set()
                release.wait(10)
                write_points(run.id, [("reward/mean", 1, 0.5, 1.0)])
        finally:
            connection.close()

    def requeue() -> None:
        try:
            lifecycle.mark_lost_runs()
            requeued.set()
        finally:
            connection.close()

    writer = threading.Thread(target=write_slowly)
    writer.start()
    assert holding.wait(10)
    monitor = threading.Thread(target=requeue)
    monitor.start()
    assert not requeued.wait(1.0)  # the re-queue waits for the write's transaction
    release.set()
    writer.join(10), monitor.join(10)
    assert requeued.is_set() and Run.objects.get(id=run.id).state == State.QUEUED
    assert MetricPoint.objects.filter(run=run).count() == 1  # the write that held the run landed, before the move
    with transaction.atomic():
        assert not lease.hold() and lease.lost  # and none lands after it


def group_row() -> dict:
    return {"prompt": "1+1=", "answer": "2", "size": 4, "correct": 2, "reward_min": 0.0, "reward_max": 1.0,
            "lengths": [1, 1, 2, 2]}  # fmt: skip


# ------------------------------------------------------------------ what a new attempt forgets
def store_steps(run, steps: range) -> None:
    rows = []
    for step in steps:
        rows += [("reward/mean", step, step / 1000, 1.0), ("counters/wall_s", step, step * 0.5, 1.0)]
        rows.append(("policy/loss", step, math.nan if step == 150 else -step, 1.0))
    write_points(run.id, rows)
    Sample.objects.bulk_create([Sample(run=run, step=step, data={"completion": str(step)}) for step in steps])
    GroupOutcome.objects.bulk_create([GroupOutcome(run=run, step=step, **group_row()) for step in steps])
    last = steps[-1]
    Run.objects.filter(id=run.id).update(step=last, summary={"reward/mean": last / 1000})


def buckets(run) -> list[tuple]:
    return sorted(MetricBucket.objects.filter(run=run).values_list(
        "key__name", "bucket", "first_step", "last_step", "count", "total", "low", "high"))  # fmt: skip


def test_a_new_attempt_forgets_exactly_the_steps_after_its_checkpoint(run, alice):
    store_steps(run, range(0, 301))
    resume.forget_after(run.id, 200)
    undisturbed = Run.objects.create(project=run.project, name="u", owner=alice, config={}, config_hash="1" * 64)
    store_steps(undisturbed, range(0, 201))
    assert MetricPoint.objects.filter(run=run).count() == 3 * 201
    assert buckets(run) == buckets(undisturbed)  # the bucket cut at step 200 is rebuilt; those after it are gone
    assert set(Sample.objects.filter(run=run).values_list("step", flat=True)) == set(range(201))
    assert GroupOutcome.objects.filter(run=run, step__gt=200).count() == 0
    run.refresh_from_db()
    assert run.step == 200 and run.train_seconds == 100.0
    assert run.summary == {"counters/wall_s": 100.0, "policy/loss": -200.0, "reward/mean": 0.2}
    resume.forget_after(run.id, resume.EVERYTHING)
    run.refresh_from_db()
    assert not MetricPoint.objects.filter(run=run).exists() and not MetricBucket.objects.filter(run=run).exists()
    assert not Sample.objects.filter(run=run).exists() and (run.step, run.summary) == (0, {})


def checkpoint_at(folder, step: int) -> None:
    (folder / "resume").mkdir(parents=True, exist_ok=True)
    (folder / "resume" / f"step-{step:08d}.pt").write_bytes(b"not read here")


def test_a_later_attempt_resumes_from_the_latest_checkpoint_and_a_first_one_ignores_any(run, tmp_path):
    store_steps(run, range(0, 71))
    claimed(run)
    checkpoint_at(tmp_path, 60)
    assert resume.prepare(run.id, 1, tmp_path) == (None, "")
    assert not (tmp_path / "resume").exists()  # a folder of an earlier run of the same id
    assert MetricPoint.objects.filter(run=run).count() == 0  # nor anything it stored
    store_steps(run, range(0, 71))
    checkpoint_at(tmp_path, 60)
    RunAttempt.objects.create(run=run, number=2, started_at=timezone.now())
    point, note = resume.prepare(run.id, 2, tmp_path)
    assert point.step == 60 and "resumes after step 60" in note
    assert MetricPoint.objects.filter(run=run).values("step").distinct().count() == 61
    assert RunAttempt.objects.get(run=run, number=2).resumed_from_step == 60


def test_a_later_attempt_with_no_checkpoint_or_one_ahead_of_the_stored_points_starts_over(run, tmp_path):
    store_steps(run, range(0, 51))
    point, note = resume.prepare(run.id, 2, tmp_path)
    assert point is None and "the run has no checkpoint yet" in note
    assert not MetricPoint.objects.filter(run=run).exists() and not Sample.objects.filter(run=run).exists()
    store_steps(run, range(0, 51))
    checkpoint_at(tmp_path, 60)
    point, note = resume.prepare(run.id, 3, tmp_path)
    assert point is None and "ahead of the stored metrics (step 50)" in note
    assert not MetricPoint.objects.filter(run=run).exists() and not GroupOutcome.objects.filter(run=run).exists()


# ------------------------------------------------------------------ a user's resume
def test_a_user_resumes_a_failed_run_as_a_new_attempt_of_the_same_run(run, alice_client, settings):
    claimed(run)
    Run.objects.filter(id=run.id).update(requeues=2, cancel_requested=True)
    lifecycle.transition(run.id, State.FAILED, "OutOfMemoryError")
    page = alice_client.get(f"/runs/{run.id}/").content.decode()
    # one attempt: the table is there for the live page to fill, hidden until a second attempt starts
    assert 'id="resume-form">' in page and '<section id="attempts-section" hidden>' in page
    response = alice_client.post(f"/api/runs/{run.id}/resume")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["id"] == run.id and body["state"] == "queued" and body["attempts"][0]["outcome"] == "failed"
    run.refresh_from_db()
    assert (run.requeues, run.cancel_requested, run.finished_at) == (0, False, None)
    assert token(run) in broker_task_ids({run.queue}) and "resumed by alice" in run.detail
    assert lifecycle.claim(run.id, "host-b", token(run)) == 2
    Run.objects.filter(id=run.id).update(step=60)
    RunAttempt.objects.filter(run=run, number=2).update(resumed_from_step=60)
    page = alice_client.get(f"/runs/{run.id}/").content.decode()
    assert '<section id="attempts-section">' in page and "resumed from step 60" in page and "OutOfMemoryError" in page
    assert 'id="resume-form" hidden>' in page  # running: the live page shows it again when the run ends


@pytest.mark.parametrize("state", [State.QUEUED, State.RUNNING, State.SUCCEEDED])
def test_a_run_that_is_not_failed_cancelled_or_lost_is_not_resumed(run, alice_client, state):
    Run.objects.filter(id=run.id).update(state=state)
    response = alice_client.post(f"/api/runs/{run.id}/resume")
    assert response.status_code == 409
    assert response.json()["error"] == f"the run is {state}; only a failed, cancelled or lost run can be resumed"
    assert Run.objects.get(id=run.id).state == state and token(run) == ""


def test_an_imported_run_is_not_resumed_but_rerun(run, alice_client):
    Transition.objects.filter(run=run).update(to_state=State.FAILED, cause="imported from bundle 0123 by alice")
    Run.objects.filter(id=run.id).update(state=State.FAILED)
    assert 'id="resume-button"' not in alice_client.get(f"/runs/{run.id}/").content.decode()
    response = alice_client.post(f"/api/runs/{run.id}/resume")
    assert response.status_code == 409 and response.json()["fields"] == {"run": response.json()["error"]}
    assert "imported" in response.json()["error"] and Run.objects.get(id=run.id).state == State.FAILED


def test_an_external_run_and_another_teams_run_are_not_resumed(run, alice_client, bob):
    Run.objects.filter(id=run.id).update(kind=Kind.EXTERNAL, state=State.LOST)
    response = alice_client.post(f"/api/runs/{run.id}/resume")
    assert response.status_code == 409 and "its own script" in response.json()["error"]
    bobs = Run.objects.create(project=project_of(bob), name="b", owner=bob, config=run.config, config_hash="0" * 64,
                              state=State.FAILED)  # fmt: skip
    assert alice_client.post(f"/api/runs/{bobs.id}/resume").status_code == 404
    assert Run.objects.get(id=bobs.id).state == State.FAILED
