"""The run page as a researcher reads it: samples grouped by prompt with filters, pages and token colours; the
charts each user last chose in the project; a failed run's cause and log before anything else."""

from __future__ import annotations

import json
import threading

import pytest
from django.test import Client

from rolloutlab.accounts.models import Membership, Role
from rolloutlab.metrics.ingest import write_points
from rolloutlab.metrics.models import ChartChoice, GroupOutcome
from rolloutlab.metrics.rollouts import rollout_views
from rolloutlab.realtime import notify
from rolloutlab.runs.inspector import inspect_step
from rolloutlab.runs.models import Run, Sample
from tests.conftest import project_of, small_config
from tests.live.platform.test_live_runs import log_in
from workers.reporting import MemoryReporter
from workers.training.trainer import Trainer


def sample(group, correct, **more):
    return {"group": group, "prompt": f"p{group}", "answer": "1", "completion": "x", "reward": float(correct),
            "correct": correct, "truncated": False, "stages": {}, **more}  # fmt: skip


STEP = [
    sample(0, True), sample(0, False), sample(0, False, truncated=True),
    sample(1, False, stages={"filter": "dropped: zero variance"}),
    sample(1, False, stages={"filter": "dropped: zero variance"}),
    sample(2, True, stages={"advantage": "pivot: left out of the loss"}), sample(2, True),
]  # fmt: skip


def test_a_steps_samples_are_grouped_with_their_whole_groups_numbers():
    view = inspect_step(STEP, "all", 1, 10)
    assert [(g["prompt"], g["size"], g["correct"]) for g in view["groups"]] == [
        ("p0", 3, 1),
        ("p1", 2, 0),
        ("p2", 2, 2),
    ]
    assert view["groups"][1]["dropped"] and not view["groups"][0]["dropped"]
    assert view["groups"][0]["mean_reward"] == pytest.approx(1 / 3)


@pytest.mark.parametrize(
    "show, groups, samples",
    [("correct", ["p0", "p2"], 3), ("wrong", ["p0", "p1"], 4), ("truncated", ["p0"], 1), ("dropped", ["p1"], 2),
     ("pivot", ["p2"], 1)],
)  # fmt: skip
def test_a_filter_keeps_the_groups_holding_such_samples_and_only_those_samples(show, groups, samples):
    view = inspect_step(STEP, show, 1, 10)
    assert [g["prompt"] for g in view["groups"]] == groups
    assert view["matching_samples"] == samples == sum(len(g["samples"]) for g in view["groups"])
    assert view["groups"][0]["size"] == sum(s["group"] == view["groups"][0]["samples"][0]["group"] for s in STEP)


def test_groups_come_a_page_at_a_time_and_a_page_past_the_end_is_the_last():
    assert [g["prompt"] for g in inspect_step(STEP, "all", 2, 2)["groups"]] == ["p2"]
    assert inspect_step(STEP, "all", 99, 2)["page"] == 2 and inspect_step(STEP, "all", 1, 2)["pages"] == 2


def test_samples_stored_without_a_group_number_are_grouped_by_prompt():
    old = [
        {"prompt": "a", "answer": "1", "correct": True},
        {"prompt": "b", "answer": "2"},
        {"prompt": "a", "answer": "1"},
    ]
    assert [g["size"] for g in inspect_step(old, "all", 1, 10)["groups"]] == [2, 1]


# ------------------------------------------------------------------ the engine's samples
@pytest.fixture(scope="module")
def engine_samples():
    """Samples a real (tiny) training run stored: whole groups, tokens, log-probabilities and entropies."""
    reporter = MemoryReporter()
    cfg = small_config(schedule={"steps": 2, "samples_per_step": 8, "save_final": False})
    Trainer(cfg, reporter).run()
    return reporter.sample_rows


def test_the_engine_stores_whole_groups_with_each_tokens_log_probability_and_entropy(engine_samples):
    first = [s for s in engine_samples if s["step"] == 1]
    assert len(first) == 8 and [s["group"] for s in first] == [0] * 4 + [1] * 4  # two whole groups of 4
    assert len({s["prompt"] for s in first if s["group"] == 0}) == 1
    for s in first:
        assert len(s["tokens"]) == len(s["logprobs"]) == len(s["entropies"]) == s["length"]
        assert all(lp <= 0 for lp in s["logprobs"]) and all(e >= 0 for e in s["entropies"])
        assert "".join(s["tokens"]).startswith(s["completion"])  # the completion, then the end-of-sequence token


def store(run, rows):
    Sample.objects.bulk_create([Sample(run=run, step=r["step"], data=r) for r in rows])


def make_run(owner, config=None, **fields):
    fields = {"state": "succeeded", **fields}
    config = config or small_config().model_dump(mode="json")
    return Run.objects.create(project=project_of(owner), name="r", owner=owner, method="grpo", config=config,
                              config_hash="0" * 64, **fields)  # fmt: skip


@pytest.mark.django_db
def test_the_samples_api_filters_and_pages_groups_and_refuses_an_unknown_filter(alice, alice_client, engine_samples):
    run = make_run(alice)
    store(run, engine_samples)
    answer = alice_client.get(f"/api/runs/{run.id}/samples?step=1&per_page=1&page=2").json()
    assert answer["pages"] == 2 and len(answer["groups"]) == 1 and answer["groups"][0]["samples"][0]["group"] == 1
    refused = alice_client.get(f"/api/runs/{run.id}/samples?show=everything")
    assert refused.status_code == 400 and "show" in refused.content.decode()
    assert alice_client.get(f"/api/runs/{run.id}/samples?per_page=1000").status_code == 400


# ------------------------------------------------------------------ the charts a user chose
@pytest.mark.django_db
def test_the_charts_chosen_on_one_run_open_every_run_of_the_project_for_that_user_only(alice, bob, alice_client):
    first, second = make_run(alice), make_run(alice)
    Membership.objects.create(team=first.project.team, user=bob, role=Role.VIEWER)
    keys = ["policy/entropy", "reward/mean"]
    saved = alice_client.put(
        f"/api/runs/{first.id}/charts", json.dumps({"keys": keys}), content_type="application/json"
    )
    assert saved.status_code == 200 and saved.json() == {"keys": keys}
    assert alice_client.get(f"/runs/{second.id}/").context["charts"] == keys
    bobs = Client()
    bobs.force_login(bob)
    assert bobs.get(f"/runs/{second.id}/").context["charts"] != keys  # bob has not chosen: the defaults
    assert ChartChoice.objects.get(user=alice).keys == keys


@pytest.mark.django_db
def test_a_chart_choice_is_bounded_and_typed(alice, alice_client):
    run = make_run(alice)
    too_many = json.dumps({"keys": [f"m/{i}" for i in range(51)]})
    assert alice_client.put(f"/api/runs/{run.id}/charts", too_many, content_type="application/json").status_code == 400
    hostile = json.dumps({"keys": ["<script>alert(1)</script>"]})
    refused = alice_client.put(f"/api/runs/{run.id}/charts", hostile, content_type="application/json")
    assert refused.status_code == 400 and not ChartChoice.objects.exists()


@pytest.mark.django_db
def test_another_teams_run_is_not_found_for_a_chart_choice(alice, bob):
    run = make_run(alice)
    bobs = Client()
    bobs.force_login(bob)
    body = json.dumps({"keys": ["reward/mean"]})
    assert bobs.put(f"/api/runs/{run.id}/charts", body, content_type="application/json").status_code == 404


# ------------------------------------------------------------------ a failed run
@pytest.mark.django_db
def test_a_running_runs_page_opened_after_its_first_evaluation_still_charts_the_training_metrics(alice, alice_client):
    run = make_run(alice, state="running")
    write_points(run.id, [("eval/pass@1", 0, 0.3, 0.0)])  # the evaluation before step 1: the only metric so far
    charts = alice_client.get(f"/runs/{run.id}/").context["charts"]
    assert "reward/mean" in charts and "policy/loss" in charts  # they fill in live as the steps come
    Run.objects.filter(id=run.id).update(state="succeeded")
    assert alice_client.get(f"/runs/{run.id}/").context["charts"] == ["eval/pass@1"]  # ended: what it has


@pytest.mark.django_db
def test_a_run_of_episodes_charts_success_and_turns_and_names_its_environment(alice, alice_client):
    config = small_config(environment={"name": "calculator"}).model_dump(mode="json")
    run = make_run(alice, state="running", config=config)
    page = alice_client.get(f"/runs/{run.id}/")
    assert page.context["charts"][-2:] == ["episodes/success", "episodes/turns_mean"]
    assert '<span id="run-environment">calculator</span>' in page.content.decode()
    assert 'data-environment="calculator"' in page.content.decode()
    single = make_run(alice, state="running")
    assert "episodes/success" not in alice_client.get(f"/runs/{single.id}/").context["charts"]


@pytest.mark.django_db
def test_a_runs_page_charts_what_the_worker_sampled_of_the_machine(alice, alice_client):
    run = make_run(alice)
    write_points(run.id, [(key, s, 1.0 + s, 0.0) for key in ("system/cpu_util", "system/rss_gb") for s in range(3)])
    page = alice_client.get(f"/runs/{run.id}/").content.decode()
    assert 'id="system-charts"' in page
    assert '<script id="system-charts-keys" type="application/json">["system/cpu_util", "system/rss_gb"]' in page
    bare = make_run(alice)  # a run that sampled nothing of the machine (an external one, say): no empty section
    assert 'id="system-charts"' not in alice_client.get(f"/runs/{bare.id}/").content.decode()


@pytest.mark.django_db
def test_a_failed_run_shows_its_cause_and_log_before_the_charts_and_no_empty_charts(alice, alice_client):
    run = make_run(alice, state="failed", detail="CUDA out of memory in the update")
    run.log_lines.create(text="step 3: loading the batch")
    page = alice_client.get(f"/runs/{run.id}/").content.decode()
    assert page.index('id="run-failure"') < page.index("<h2>Charts</h2>")
    assert "CUDA out of memory in the update" in page and "step 3: loading the batch" in page
    assert 'id="no-charts"' in page
    write_points(run.id, [("reward/mean", 1, 0.5, 0.0)])
    page = alice_client.get(f"/runs/{run.id}/").content.decode()
    assert 'id="no-charts"' not in page


# ------------------------------------------------------------------ in the browser
@pytest.mark.timeout(300)
def test_the_inspector_groups_filters_and_colours_tokens_in_the_browser(page, alice, stack, engine_samples):
    run = make_run(alice)
    store(run, engine_samples)
    write_points(run.id, [("policy/entropy", 1, 0.5, 0.0)])
    log_in(page, "alice", "alice-password")
    page.goto(f"/runs/{run.id}/")
    page.wait_for_selector(".sample-group")
    last = [s for s in engine_samples if s["step"] == 2]
    assert page.locator(".sample-group").count() == len({s["group"] for s in last})
    page.select_option("#sample-show", "wrong")
    wrong = [s for s in last if not s["correct"]]
    page.wait_for_function(f"document.querySelectorAll('#sample-groups tr.sample').length === {len(wrong)}")
    assert page.locator("#sample-groups td.correct").count() == 0
    page.select_option("#token-colour", "entropy")
    page.wait_for_selector("#sample-groups .token")
    tokens = page.locator("#sample-groups tr.sample").first.locator(".token")
    shown = tokens.evaluate_all("els => els.map(e => Number(e.dataset.value))")
    assert shown == pytest.approx(wrong[0]["entropies"])  # the first wrong sample of the first group shown
    # waited for, not read once: a token read while the table is drawn again has no style yet
    page.wait_for_function(
        "getComputedStyle(document.querySelector('#sample-groups .token')).backgroundColor"
        ".startsWith('rgba(48, 86, 211')"
    )
    # a chart ticked here is the one every run of the project opens with, for alice
    page.click("details.picker summary")
    page.check("#metric-picker input[value='policy/entropy']")
    page.wait_for_function("document.getElementById('run').dataset.chartsSaved?.includes('policy/entropy')")
    assert "policy/entropy" in ChartChoice.objects.get(user=alice, project=run.project).keys
    assert page.locator(".chart[data-key='policy/entropy']").count() == 1


def announce(run_id: int, event: dict) -> None:
    """notify() from a thread of its own: Playwright's event loop runs in this one, and the channel layer's
    synchronous send may not run inside an event loop."""
    sender = threading.Thread(target=notify, args=(run_id, event))
    sender.start()
    sender.join()


def test_an_open_run_page_draws_again_the_steps_after_the_checkpoint_a_new_attempt_resumes_from(page, alice, stack):
    run = make_run(alice, state="running", step=20, total_steps=40)
    write_points(run.id, [("reward/mean", s, s / 100, 0.0) for s in range(21)])
    log_in(page, "alice", "alice-password")
    page.goto(f"/runs/{run.id}/")
    line = "document.querySelector(\".chart[data-key='reward/mean']\")?.data?.[0]?.x"
    page.wait_for_function(
        f"Array.from({line} || []).length === 21 && document.getElementById('run').dataset.socketOpens"
    )
    announce(
        run.id, {"kind": "rewind", "step": 10}
    )  # as rolloutlab.execution.resume does once the later points are gone
    page.wait_for_function(f"Array.from({line}).length === 11")
    announce(run.id, {"kind": "points", "points": {"reward/mean": [[11, 0.5]]}})  # step 11 comes again, drawn again
    page.wait_for_function(f"Array.from({line}).at(-1) === 11")
    assert page.evaluate(f"Array.from({line})") == list(range(12))


def test_a_chart_ticked_mid_run_keeps_the_points_that_arrive_while_its_series_loads(page, alice, stack):
    """A live message reaching a chart whose series is still on its way is drawn once the series is, and the
    message's points for the other charts are drawn at once (none lost to the chart that was not ready)."""
    run = make_run(alice, state="running", step=20, total_steps=40)
    write_points(run.id, [(name, s, s / 100, 0.0) for s in range(21) for name in ("reward/mean", "policy/entropy")])
    log_in(page, "alice", "alice-password")
    page.goto(f"/runs/{run.id}/")
    line = "document.querySelector(\".chart[data-key='{}']\")?.data?.[0]?.x"
    reward, entropy = line.format("reward/mean"), line.format("policy/entropy")
    opened = "document.getElementById('run').dataset.socketOpens"
    page.wait_for_function(f"Array.from({reward} || []).length === 21 && {opened}")
    held = []  # the entropy chart's series request, answered only once the live point has arrived
    page.route(lambda url: "keys=policy%2Fentropy" in url, lambda route: held.append(route))
    page.click("details.picker summary")
    with page.expect_request(lambda request: "keys=policy%2Fentropy" in request.url):
        page.check("#metric-picker input[value='policy/entropy']")
    assert len(held) == 1
    write_points(run.id, [("policy/entropy", 21, 0.3, 0.0), ("reward/mean", 21, 0.3, 0.0)])  # as the worker does:
    Run.objects.filter(id=run.id).update(step=21)  # committed, then announced
    announce(run.id, {"kind": "points", "points": {"policy/entropy": [[21, 0.3]], "reward/mean": [[21, 0.3]]}})
    page.wait_for_function(f"Array.from({reward}).at(-1) === 21")  # the other chart's point, drawn at once
    held[0].continue_()
    page.wait_for_function(f"Array.from({entropy} || []).at(-1) === 21")
    assert page.evaluate(f"Array.from({entropy})") == list(range(22))  # the stored series, then the live point


def test_an_open_run_page_follows_a_cancel_and_a_resume_without_a_reload(page, alice, stack):
    """Cancelled: Resume and Delete offered, Cancel not, at once; resumed: the attempts table says from which step."""
    from django.utils import timezone

    from rolloutlab.runs.models import RunAttempt, Transition

    run = make_run(alice, state="running", step=20, total_steps=40)
    Transition.objects.create(run=run, from_state="", to_state="queued", cause="launched")  # launched here
    RunAttempt.objects.create(run=run, number=1, worker_host="w1", started_at=timezone.now())
    log_in(page, "alice", "alice-password")
    page.goto(f"/runs/{run.id}/")
    page.wait_for_function("document.getElementById('run').dataset.socketOpens")
    assert page.is_hidden("#resume-form") and page.is_disabled("#delete-button") and page.is_hidden("#attempts-section")

    Run.objects.filter(id=run.id).update(state="cancelled")
    RunAttempt.objects.filter(run=run).update(ended_at=timezone.now(), outcome="cancelled")
    announce(run.id, {"kind": "state", "state": "cancelled", "detail": "cancelled by alice"})
    page.wait_for_selector("#resume-form", state="visible")
    assert page.is_enabled("#delete-button") and page.is_disabled("#cancel-button")

    Run.objects.filter(id=run.id).update(state="running")
    RunAttempt.objects.create(run=run, number=2, worker_host="w2", started_at=timezone.now())
    announce(run.id, {"kind": "state", "state": "running", "detail": "attempt 2"})
    page.wait_for_selector("#attempts-section", state="visible")
    assert page.inner_text("#attempts tr[data-attempt='2'] td:last-child") == "reading its checkpoint…"
    RunAttempt.objects.filter(run=run, number=2).update(resumed_from_step=10)
    announce(run.id, {"kind": "rewind", "step": 10})  # as rolloutlab.execution.resume does once it has read it
    cell = "document.querySelector(\"#attempts tr[data-attempt='2'] td:last-child\").textContent"
    page.wait_for_function(f"{cell} === 'resumed from step 10'")
    assert page.is_hidden("#resume-form") and page.is_enabled("#cancel-button")


def test_the_eta_counts_the_evaluations_due_and_the_bar_fills_only_when_the_run_ends(page, alice, stack):
    run = make_run(alice, state="running", step=10, total_steps=100, train_seconds=10.0)  # 1 s a step
    Run.objects.filter(id=run.id).update(config={**run.config, "eval": {**run.config["eval"], "every": 20}})
    log_in(page, "alice", "alice-password")
    page.goto(f"/runs/{run.id}/")
    page.wait_for_function("document.getElementById('run').dataset.socketOpens")
    # 90 steps at 1 s, and the evaluations at 20, 40, 60, 80 and 100 at 30 s each: 240 s
    announce(run.id, {"kind": "progress", "step": 10, "train_seconds": 10.0, "eval_seconds": 30.0})
    page.wait_for_function("document.getElementById('progress-text').textContent.includes('ETA 4 min')")
    announce(run.id, {"kind": "progress", "step": 100, "train_seconds": 100.0, "eval_seconds": 30.0})
    page.wait_for_function("document.getElementById('progress-text').textContent.includes('finishing')")
    assert page.evaluate("document.getElementById('progress-bar').style.width") == "99%"
    announce(run.id, {"kind": "state", "state": "succeeded", "detail": "100 steps", "step": 100})
    page.wait_for_function("document.getElementById('progress-bar').style.width === '100%'")
    assert "finishing" not in page.inner_text("#progress-text")


# ------------------------------------------------------------------ rollout views
def outcome(run, step, prompt, correct, size=4, lengths=(3, 3, 5, 9)):
    return GroupOutcome(run=run, step=step, prompt=prompt, answer="1", size=size, correct=correct, reward_min=0.0,
                        reward_max=float(correct > 0), lengths=list(lengths), kept=True)  # fmt: skip


@pytest.mark.django_db
def test_a_prompt_seen_at_several_steps_gets_its_pass_rate_per_step_bin(alice):
    run = make_run(alice)
    GroupOutcome.objects.bulk_create(
        [outcome(run, 1, "a", 1), outcome(run, 2, "a", 3), outcome(run, 2, "b", 4), outcome(run, 9, "a", 4),
         outcome(run, 3, "once", 2)]
    )  # fmt: skip
    view = rollout_views(run.id, columns=100)["pass_rates"]
    assert view["prompts"] == ["a → 1"]  # b and once were seen at one step only
    assert view["steps"] == [1, 2, 9] and view["z"] == [[0.25, 0.75, 1.0]]
    binned = rollout_views(run.id, columns=3)["pass_rates"]  # steps 1-3, 4-6, 7-9
    assert binned["width"] == 3 and binned["steps"] == [1, 7] and binned["z"] == [[pytest.approx(4 / 8), 1.0]]


@pytest.mark.django_db
def test_each_step_bins_completion_lengths_into_shares_of_its_samples(alice):
    run = make_run(alice)
    GroupOutcome.objects.bulk_create(
        [outcome(run, 1, "a", 1, lengths=(2, 2, 4, 4)), outcome(run, 2, "a", 1, lengths=(4,) * 4)]
    )
    view = rollout_views(run.id, columns=100)["lengths"]
    assert view["steps"] == [1, 2] and view["lengths"] == [0, 1, 2, 3, 4]
    assert [row[0] for row in view["z"]] == [0, 0, 0.5, 0, 0.5] and [row[1] for row in view["z"]] == [0, 0, 0, 0, 1.0]


@pytest.mark.django_db
def test_the_engine_reports_every_group_it_sampled_and_the_platform_stores_them(alice):
    from rolloutlab.execution.reporter import PlatformReporter

    reporter = MemoryReporter()
    Trainer(small_config(schedule={"steps": 2, "save_final": False}), reporter).run()
    assert len(reporter.group_rows) == 2 * 4  # 4 prompts a step
    assert all(0 <= g["correct"] <= g["size"] == len(g["lengths"]) == 4 for g in reporter.group_rows)
    run = make_run(alice)
    platform = PlatformReporter(run.id)
    try:
        platform.groups(1, [{k: v for k, v in g.items() if k != "step"} for g in reporter.group_rows[:4]])
    finally:
        platform.close()
    assert GroupOutcome.objects.filter(run=run, step=1).count() == 4


@pytest.mark.django_db
def test_the_rollout_views_endpoint_is_bounded_and_scoped(alice, bob, alice_client):
    run = make_run(alice)
    assert alice_client.get(f"/api/runs/{run.id}/rollouts?columns=5000").status_code == 400
    assert set(alice_client.get(f"/api/runs/{run.id}/rollouts").json()) == {"pass_rates", "lengths"}
    bobs = Client()
    bobs.force_login(bob)
    assert bobs.get(f"/api/runs/{run.id}/rollouts").status_code == 404


@pytest.mark.timeout(300)
def test_the_per_prompt_pass_rate_view_draws_each_repeated_prompt_in_the_browser(page, alice, stack):
    run = make_run(alice)
    GroupOutcome.objects.bulk_create(
        [outcome(run, s, p, (s + i) % 5) for s in range(1, 21) for i, p in enumerate("abc")]
    )
    log_in(page, "alice", "alice-password")
    page.goto(f"/runs/{run.id}/")
    page.wait_for_function("document.getElementById('run').dataset.rolloutPrompts === '3'")
    drawn = page.eval_on_selector(
        "#pass-rate-chart", "el => [el.data[0].type, el.data[0].y.length, el.data[0].x.length]"
    )
    assert drawn == ["heatmap", 3, 20]
    assert page.eval_on_selector("#length-chart", "el => el.data[0].type") == "heatmap"


@pytest.mark.django_db
def test_the_inspector_shows_the_prompt_as_a_chat_model_read_it(page, alice, stack, tmp_path):
    from tests.support.chat_models import save_chat_llama

    path = save_chat_llama(tmp_path / "chat-llama")
    reporter = MemoryReporter()
    cfg = small_config(model={"name": str(path)}, schedule={"steps": 1}, prompt={"system": "Be brief."})
    assert Trainer(cfg, reporter).run() == "succeeded"
    run = make_run(alice)
    store(run, reporter.sample_rows)
    log_in(page, "alice", "alice-password")
    page.goto(f"/runs/{run.id}/")
    page.wait_for_selector(".sample-group details.rendered-prompt")
    first = reporter.sample_rows[0]
    assert page.locator(".sample-group h3").first.inner_text().startswith(f"{first['prompt']} → {first['answer']}")
    page.click(".sample-group details.rendered-prompt summary")
    shown = page.locator(".sample-group details.rendered-prompt pre").first.inner_text()
    assert shown == first["rendered_prompt"] and shown.startswith("<|im_start|>system\nBe brief.<|im_end|>")


@pytest.mark.django_db
def test_the_inspector_shows_an_episode_as_its_turns(page, alice, stack):
    from tests.offline.engine.test_environments import scripted_episode_samples

    samples, _ = scripted_episode_samples(advantage={"name": "gigpo"})
    config = small_config(environment={"name": "calculator"}, advantage={"name": "gigpo"}).model_dump(mode="json")
    run = make_run(alice, config=config)
    store(run, samples)
    write_points(run.id, [("episodes/success", 1, 0.5, 0.0)])
    log_in(page, "alice", "alice-password")
    page.goto(f"/runs/{run.id}/")
    page.wait_for_selector(".sample-group .turns")
    first = samples[0]
    episode = page.locator("#sample-groups tr.sample").first
    assert episode.locator(".turn").count() == len(first["turns"]) == 2
    call, answer = first["turns"]
    heads = episode.locator(".turn-head").all_inner_texts()
    assert heads[0].startswith(f"turn 1 · reward 0.00 · advantage {call['advantage']:.3f} · {call['trained']} tokens")
    assert heads[1].startswith(f"turn 2 · reward {answer['reward']:.2f} · advantage {answer['advantage']:.3f}")
    assert episode.locator(".turn-action").first.inner_text() == first["prompt"].rstrip("=")  # the tool call
    policy = episode.locator(".turn-policy").all_inner_texts()
    assert policy[0] == "".join(first["tokens"][call["start"] : call["end"]]) == f"<calc>{call['action']}</calc>"
    observation = episode.locator(".turn-observation").first.inner_text()
    assert observation == "".join(first["tokens"][call["end"] : call["observation_end"]])
    assert observation.startswith("<result>")
    assert episode.locator(".turn-observation").count() == 1  # none after the answer
    # colouring shades the policy's tokens only: the observation was written, not sampled
    page.select_option("#token-colour", "logprob")
    page.wait_for_selector("#sample-groups .turn-policy .token[data-value]")
    assert episode.locator(".turn-observation .token[data-value]").count() == 0
    title = page.locator(".chart[data-key='episodes/success'] .gtitle").text_content()
    assert title == "episodes/success · calculator"
