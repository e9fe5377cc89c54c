"""The runs table: search, saved views of its columns, bulk actions, rename and notes in place, badges."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from rolloutlab.accounts.models import Activity, Membership, Role
from rolloutlab.audit.models import AuditRecord, Verification
from rolloutlab.metrics.ingest import write_points
from rolloutlab.metrics.models import MetricPoint
from rolloutlab.runs.columns import DEFAULT_COLUMNS
from rolloutlab.runs.models import Run, SavedView, Tag
from tests.conftest import project_of, small_config

pytestmark = pytest.mark.django_db


def make_run(owner, name="r", project="p", state="succeeded", notes="", tags=(), **fields):
    run = Run.objects.create(
        project=project_of(owner, project), name=name, owner=owner, state=state, notes=notes,
        config=small_config().model_dump(mode="json"), config_hash="0" * 64, **fields,
    )  # fmt: skip
    run.tags.set([Tag.objects.get_or_create(name=t)[0] for t in tags])
    return run


def listed(client, query="") -> list[str]:
    """The names of the runs the list shows, in order."""
    response = client.get("/runs/" + query)
    assert response.status_code == 200, response.content[:500]
    return [run.name for run, _ in response.context["rows"]]


def send(client, method, path, body):
    return getattr(client, method)(path, json.dumps(body), content_type="application/json")


def bulk(client, **order):
    return send(client, "post", "/api/runs/bulk", order)


# ---------------------------------------------------------------- search


def test_search_finds_runs_by_name_tags_or_notes_in_any_case(alice_client, alice):
    make_run(alice, "grpo-baseline", tags=["ablation"])
    make_run(alice, "dapo-long", notes="Clip-higher helps on the LONG tasks")
    make_run(alice, "mc-grpo")
    assert listed(alice_client, "?q=ABLATION") == ["grpo-baseline"]
    assert listed(alice_client, "?q=long") == ["dapo-long"]  # in its name and its notes: listed once
    assert listed(alice_client, "?q=helps") == ["dapo-long"]
    assert set(listed(alice_client, "?q=grpo")) == {"grpo-baseline", "mc-grpo"}


def test_the_filter_forms_any_is_sent_empty_and_filters_nothing(alice_client, alice):
    """The list's form, submitted as it stands: every select left at "any" arrives as an empty value."""
    make_run(alice, "mc-grpo")
    make_run(alice, "dapo-long")
    assert listed(alice_client, "?project=&method=&state=&tag=&sort=&q=mc") == ["mc-grpo"]
    assert set(listed(alice_client, "?project=&method=&state=&tag=&sort=&q=")) == {"mc-grpo", "dapo-long"}
    assert alice_client.get("/api/runs?state=&q=mc").json()["runs"][0]["name"] == "mc-grpo"


def test_search_needs_every_word_to_match_somewhere(alice_client, alice):
    make_run(alice, "grpo-baseline", tags=["ablation"])
    make_run(alice, "grpo-other")
    assert listed(alice_client, "?q=grpo+ablation") == ["grpo-baseline"]
    assert listed(alice_client, "?q=grpo+nothing") == []


def test_search_through_the_api_sees_only_the_callers_runs(alice_client, alice, bob):
    make_run(alice, "shared-word")
    make_run(bob, "shared-word-of-bob")
    names = [run["name"] for run in alice_client.get("/api/runs?q=shared").json()["runs"]]
    assert names == ["shared-word"]


@pytest.mark.parametrize(("query", "field"), [("q=" + "x" * 201, "q"), ("q=a%00b", "q"), ("q=a&q=b", "q")])
def test_a_search_too_long_or_hostile_is_a_clear_400(alice_client, query, field):
    response = alice_client.get("/runs/?" + query)
    assert response.status_code == 400
    assert field in response.context["fields"] or field in response.context["message"]


def test_archived_runs_leave_the_list_until_asked_for(alice_client, alice):
    make_run(alice, "kept")
    make_run(alice, "old", archived=True)
    assert listed(alice_client) == ["kept"]
    assert listed(alice_client, "?archived=true") == ["old"]
    assert alice_client.get("/runs/?archived=maybe").status_code == 400


# ---------------------------------------------------------------- saved views and columns


def save_view(client, name, columns, project=None):
    return send(client, "put", "/api/runs/views", {"name": name, "project": project, "columns": columns})


def test_a_saved_view_shows_its_knob_metric_and_duration_columns(alice_client, alice):
    start = timezone.now() - timedelta(minutes=3, seconds=5)
    make_run(alice, "r", summary={"eval/pass@1": 0.5, "counters/rollout_tokens": 12345.0},
             started_at=start, finished_at=start + timedelta(minutes=3, seconds=5))  # fmt: skip
    columns = ["config:rollout.group_size", "metric:eval/pass@1", "duration", "rollout_tokens"]
    assert save_view(alice_client, "knobs", columns).status_code == 200
    page = alice_client.get("/runs/")
    assert [col.key for col in page.context["columns"]] == columns
    cells = dict((col.key, value) for col, value in page.context["rows"][0][1])
    assert cells == {"config:rollout.group_size": str(small_config().rollout.group_size),
                     "metric:eval/pass@1": "0.500", "duration": "3m 05s", "rollout_tokens": "12,345"}  # fmt: skip
    assert '<th data-column="config:rollout.group_size">rollout.group_size</th>' in page.content.decode()


def test_a_small_knob_value_keeps_its_digits_in_the_table(alice_client, alice):
    make_run(alice, "r", summary={"optim/lr": 2e-05})
    assert save_view(alice_client, "lr", ["config:optimizer.lr", "metric:optim/lr"]).status_code == 200
    cells = dict((col.key, value) for col, value in alice_client.get("/runs/").context["rows"][0][1])
    assert cells == {"config:optimizer.lr": "0.001", "metric:optim/lr": "2e-05"}  # small_config's lr is 1e-3


def test_the_column_chooser_offers_every_knob_and_metric_of_the_runs_shown(alice_client, alice):
    make_run(alice, summary={"policy/entropy": 1.0})
    offered = alice_client.get("/runs/").context["available_columns"]
    assert "config:rollout.group_size" in offered["config"] and "config:optimizer.lr" in offered["config"]
    assert offered["metric"] == ["metric:policy/entropy"]
    assert offered["fixed"] == ["duration", "rollout_tokens"]


def test_the_list_opens_with_the_view_last_used_per_user_and_project(alice_client, alice, bob, client):
    make_run(alice, project="p")
    save_view(alice_client, "wide", ["duration", "config:seed"], project="p")
    save_view(alice_client, "narrow", ["duration"], project="p")
    assert alice_client.get("/runs/?project=p").context["saved_view"].name == "narrow"
    assert alice_client.get("/runs/?project=p&view=wide").context["chosen_columns"] == ["duration", "config:seed"]
    assert alice_client.get("/runs/?project=p").context["saved_view"].name == "wide"  # switched: now the latest
    assert alice_client.get("/runs/").context["saved_view"] is None  # all projects: a list of its own
    client.force_login(bob)
    assert client.get("/runs/").context["saved_views"] == []
    assert client.get("/runs/?project=p&view=wide").status_code == 404  # alice's project and view are not bob's


def test_saving_a_view_of_the_same_name_replaces_its_columns(alice_client, alice):
    save_view(alice_client, "v", ["duration"])
    save_view(alice_client, "v", ["rollout_tokens", "rollout_tokens"])
    assert list(SavedView.objects.values_list("columns", flat=True)) == [["rollout_tokens"]]


@pytest.mark.parametrize(
    ("columns", "name", "field"),
    [
        (["config:../../etc"], "v", "columns.0"),
        (["drop table"], "v", "columns.0"),
        (["metric:a\u0000b"], "v", "columns.0"),
        (["duration"] * 41, "v", "columns"),
        (["duration"], "", "name"),
        (["duration"], "x" * 51, "name"),
    ],
)
def test_a_view_with_a_bad_column_or_name_is_refused_naming_the_field(alice_client, columns, name, field):
    response = save_view(alice_client, name, columns)
    assert response.status_code == 400 and field in response.json()["fields"], response.json()
    assert not SavedView.objects.exists()


def test_a_view_of_a_project_the_user_cannot_see_is_a_404(alice_client, bob):
    make_run(bob, project="bobs")
    assert save_view(alice_client, "v", ["duration"], project="bobs").status_code == 404


def test_deleting_a_view_brings_back_the_default_columns(alice_client, alice):
    save_view(alice_client, "v", ["rollout_tokens"])
    assert alice_client.delete("/api/runs/views?name=v").status_code == 200
    assert alice_client.get("/runs/").context["chosen_columns"] == DEFAULT_COLUMNS
    assert alice_client.delete("/api/runs/views?name=v").status_code == 404


# ---------------------------------------------------------------- bulk actions


def test_bulk_compare_opens_the_compare_page_with_the_selected_runs(alice_client, alice):
    a, b = make_run(alice, "a"), make_run(alice, "b")
    response = bulk(alice_client, action="compare", runs=[a.id, b.id])
    assert response.status_code == 200 and response.json()["url"] == f"/compare/?runs={a.id},{b.id}"
    assert alice_client.get(response.json()["url"]).status_code == 200


@pytest.mark.parametrize("action", ["tag", "archive", "delete"])
def test_a_bulk_action_that_changes_runs_needs_its_confirmation(alice_client, alice, action):
    run = make_run(alice, "r")
    response = bulk(alice_client, action=action, runs=[run.id], tag="t")
    assert response.status_code == 400 and "confirm" in response.json()["fields"]
    run.refresh_from_db()
    assert not run.archived and not run.tags.exists()


def test_bulk_tag_tags_every_selected_run(alice_client, alice):
    a, b = make_run(alice, "a"), make_run(alice, "b", tags=["old"])
    response = bulk(alice_client, action="tag", runs=[a.id, b.id], tag=" sweep-3 ", confirm=True)
    assert response.status_code == 200, response.json()
    assert set(Run.objects.filter(tags__name="sweep-3").values_list("name", flat=True)) == {"a", "b"}
    assert list(b.tags.order_by("name").values_list("name", flat=True)) == ["old", "sweep-3"]
    assert Activity.objects.filter(action="tagged").count() == 2


def test_bulk_archive_and_unarchive(alice_client, alice):
    a, _ = make_run(alice, "a"), make_run(alice, "b")
    assert bulk(alice_client, action="archive", runs=[a.id], confirm=True).json()["message"] == "Archived 1 run(s)."
    assert listed(alice_client) == ["b"]
    bulk(alice_client, action="unarchive", runs=[a.id], confirm=True)
    assert set(listed(alice_client)) == {"a", "b"}


def test_bulk_delete_removes_the_runs_their_points_and_their_files_after_commit(
    alice_client, alice, settings, tmp_path, django_capture_on_commit_callbacks
):
    settings.STORAGE_ROOT = tmp_path
    a, b, kept = make_run(alice, "a"), make_run(alice, "b"), make_run(alice, "kept")
    for run in (a, b, kept):
        write_points(run.id, [("reward/mean", 0, 0.5, 0.0)])
        (tmp_path / "runs" / str(run.id)).mkdir(parents=True)
        (tmp_path / "runs" / str(run.id) / "final.pt").write_bytes(b"weights")
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = bulk(alice_client, action="delete", runs=[a.id, b.id], confirm=True)
        assert (tmp_path / "runs" / str(a.id)).exists()  # nothing removed before the commit
    for callback in callbacks:
        callback()
    assert response.status_code == 200 and response.json()["message"] == "Deleted 2 run(s)."
    assert list(Run.objects.values_list("name", flat=True)) == ["kept"]
    assert set(MetricPoint.objects.values_list("run_id", flat=True)) == {kept.id}
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == [str(kept.id)]


def test_bulk_delete_with_a_live_run_deletes_nothing_and_says_which(
    alice_client, alice, settings, tmp_path, django_capture_on_commit_callbacks
):
    settings.STORAGE_ROOT = tmp_path
    done, live = make_run(alice, "done"), make_run(alice, "live", state="running")
    (tmp_path / "runs" / str(done.id)).mkdir(parents=True)
    with django_capture_on_commit_callbacks(execute=True):
        response = bulk(alice_client, action="delete", runs=[done.id, live.id], confirm=True)
    assert response.status_code == 409 and f"#{live.id} is running" in response.json()["error"]
    assert Run.objects.count() == 2 and (tmp_path / "runs" / str(done.id)).exists()


@pytest.mark.parametrize("action", ["compare", "tag", "archive", "delete"])
def test_a_bulk_action_with_another_teams_run_is_refused_naming_it(alice_client, alice, bob, action):
    mine, theirs = make_run(alice, "mine"), make_run(bob, "theirs")
    response = bulk(alice_client, action=action, runs=[mine.id, theirs.id], tag="t", confirm=True)
    assert response.status_code == 404 and f"#{theirs.id}" in response.json()["error"]
    assert "nothing was changed" in response.json()["error"]
    mine.refresh_from_db()
    assert Run.objects.count() == 2 and not mine.archived and not mine.tags.exists()


def test_a_bulk_action_on_a_teammates_run_needs_an_admin(client, alice, bob):
    theirs = make_run(alice, "alices")
    Membership.objects.create(team=theirs.project.team, user=bob, role=Role.MEMBER)
    mine = Run.objects.create(project=theirs.project, name="bobs", owner=bob, config={}, config_hash="0" * 64)
    client.force_login(bob)
    response = bulk(client, action="archive", runs=[mine.id, theirs.id], confirm=True)
    assert response.status_code == 403 and f"#{theirs.id}" in response.json()["error"]
    assert not Run.objects.filter(archived=True).exists()
    assert bulk(client, action="compare", runs=[mine.id, theirs.id]).status_code == 200  # reading is allowed


@pytest.mark.parametrize(
    "order",
    [
        {"action": "explode", "runs": [1]},
        {"action": "archive", "runs": []},
        {"action": "archive", "runs": list(range(1, 502))},
        {"action": "archive", "runs": ["١"]},
        {"action": "tag", "runs": [1], "tag": "x" * 51, "confirm": True},
        {"action": "archive", "runs": [1], "confirm": True, "extra": 1},
    ],
)
def test_a_malformed_bulk_order_is_a_clear_400(alice_client, order):
    response = bulk(alice_client, **order)
    assert response.status_code == 400 and response.json()["error"].startswith("invalid input")


@pytest.mark.parametrize(
    ("order", "field"),
    [
        ({"action": "tag", "runs": [1], "tag": "  ", "confirm": True}, "tag"),
        ({"action": "compare", "runs": list(range(1, 202))}, "runs"),
    ],
)
def test_a_bulk_order_missing_what_its_action_needs_names_the_field(alice_client, order, field):
    response = bulk(alice_client, **order)
    assert response.status_code == 400 and field in response.json()["fields"], response.json()


# ---------------------------------------------------------------- rename and notes


def edit(client, run, body):
    return send(client, "patch", f"/api/runs/{run.id}", body)


def test_a_run_is_renamed_and_annotated_in_place(alice_client, alice):
    run = make_run(alice, "old name")
    response = edit(alice_client, run, {"name": "  new name  ", "notes": "lr too high?\nretry with 1e-5"})
    assert response.status_code == 200 and response.json()["name"] == "new name"
    run.refresh_from_db()
    assert (run.name, run.notes) == ("new name", "lr too high?\nretry with 1e-5")
    assert Activity.objects.filter(action="renamed").count() == 1
    assert edit(alice_client, run, {"notes": ""}).status_code == 200  # notes may be cleared
    run.refresh_from_db()
    assert run.notes == "" and run.name == "new name"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": ""}, "name"),
        ({"name": "   "}, "name"),
        ({"name": "x" * 201}, "name"),
        ({"notes": "x" * 5001}, "notes"),
        ({"name": "a\u0000b"}, "name"),
        ({"name": "a\u001bb"}, "name"),
        ({"name": ["a"]}, "name"),
        ({"owner": "bob"}, "owner"),
        ({}, "body"),
    ],
)
def test_a_bad_name_or_notes_is_a_clear_400_and_changes_nothing(alice_client, alice, body, field):
    run = make_run(alice, "kept")
    response = edit(alice_client, run, body)
    assert response.status_code == 400 and field in response.json()["fields"], response.json()
    run.refresh_from_db()
    assert run.name == "kept"


def test_a_body_that_is_not_json_is_a_400_not_a_500(alice_client, alice):
    run = make_run(alice)
    response = alice_client.patch(f"/api/runs/{run.id}", b"\xff{", content_type="application/json")
    assert response.status_code == 400 and "UTF-8" in response.json()["error"]


def test_hostile_markup_in_a_name_or_notes_is_shown_as_text(alice_client, alice):
    run = make_run(alice)
    edit(alice_client, run, {"name": "<script>alert(1)</script>", "notes": "<img src=x onerror=alert(2)>"})
    page = alice_client.get("/runs/").content.decode()
    assert "<script>alert(1)" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<img src=x" not in page


def test_another_teams_run_cannot_be_renamed(alice_client, bob):
    theirs = make_run(bob, "theirs")
    assert edit(alice_client, theirs, {"name": "mine now"}).status_code == 404
    theirs.refresh_from_db()
    assert theirs.name == "theirs"


# ---------------------------------------------------------------- badges


def badges(client, run) -> tuple[bool, bool]:
    """(verified badge, unverified badge) of the run's row."""
    page = client.get(f"/runs/?ids={run.id}").content.decode()
    row = page[page.index(f'data-run-id="{run.id}"') :]
    row = row[: row.index("</tr>")]
    return 'data-field="verified"' in row, 'data-field="unverified"' in row


def test_a_run_reproduced_by_verify_is_badged_verified(alice_client, alice):
    run, rerun = make_run(alice, "original"), make_run(alice, "rerun")
    assert badges(alice_client, run) == (False, False)  # launched here, never checked: no badge
    result = {"identical": True, "compared": 3}
    Verification.objects.create(original=run, rerun=rerun, requested_by=alice, result=result)
    assert badges(alice_client, run) == (True, False)


def test_a_run_whose_verify_diverged_is_not_badged_verified(alice_client, alice):
    run, rerun = make_run(alice, "original"), make_run(alice, "rerun")
    AuditRecord.objects.create(run=run, record={}, imported_from="a" * 64, signer_trusted=True)
    result = {"identical": False, "step": 2, "metric": "reward/mean", "original": 0.1, "rerun": 0.2}
    Verification.objects.create(original=run, rerun=rerun, requested_by=alice, result=result)
    assert badges(alice_client, run) == (False, False)


def test_imports_are_badged_by_whether_a_trusted_key_signed_their_bundle(alice_client, alice):
    signed, unsigned = make_run(alice, "signed"), make_run(alice, "unsigned", unverified=True)
    AuditRecord.objects.create(run=signed, record={}, imported_from="a" * 64, signer_trusted=True)
    AuditRecord.objects.create(run=unsigned, record={}, imported_from="b" * 64, signer_trusted=False)
    assert badges(alice_client, signed) == (True, False)
    assert badges(alice_client, unsigned) == (False, True)


def test_a_running_runs_duration_counts_to_now(alice_client, alice):
    make_run(alice, state="running", started_at=timezone.now() - timedelta(hours=2, minutes=5))
    cells = dict((col.key, value) for col, value in alice_client.get("/runs/").context["rows"][0][1])
    assert cells["duration"] == "2h 05m"
