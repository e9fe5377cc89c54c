"""The compare service on constructed runs: grouping, the three x-axes, bands, time to target, config diff,
the knobs that vary and the parallel coordinates over them."""

import json

import numpy as np
import pytest
from django.contrib.auth import get_user_model

from rolloutlab.compare.permalink import BadView, View, parse_view
from rolloutlab.compare.service import build_comparison, ema, group_options, select_runs, varying_knobs
from rolloutlab.metrics.ingest import write_points
from rolloutlab.runs.models import Run
from tests.conftest import project_of
from workers.config import resolve

pytestmark = pytest.mark.django_db


def make_run(project, method, seed, reward, tokens_per_step, steps=200, **config):
    cfg = resolve({"method": method, "seed": seed, **config}).model_dump(mode="json")
    run = Run.objects.create(
        project=project, name=f"{method}-{seed}", owner=project.owner, method=method, seed=seed,
        config=cfg, config_hash="0" * 64, state="succeeded", total_steps=steps,
    )  # fmt: skip
    rows = []
    for step in range(1, steps + 1):
        rows += [("reward/mean", step, reward(step)), ("counters/rollout_tokens", step, tokens_per_step * step),
                 ("counters/wall_s", step, 0.1 * step)]  # fmt: skip
    write_points(run.id, [(name, step, value, 0.0) for name, step, value in rows])
    run.summary = {"reward/mean": reward(steps)}
    run.save()
    return run


@pytest.fixture
def project():
    return project_of(get_user_model().objects.create_user("frank"))


def at(chart, x):
    """The group's mean curve at x."""
    return float(np.interp(x, chart["x"], chart["mean"]))


def test_the_tokens_axis_reorders_methods_that_spend_tokens_differently(project):
    # A learns faster per step but spends 1000 tokens a step; B slower per step, 400 tokens a step
    a = [make_run(project, "grpo", s, lambda t, s=s: t / 100 + 0.001 * s, 1000) for s in (0, 1)]
    b = [make_run(project, "dapo", s, lambda t, s=s: t / 150 + 0.001 * s, 400) for s in (0, 1)]
    runs = [r.id for r in a + b]
    by_step = build_comparison(View(runs=runs, metrics=["reward/mean"], x="step"), project.owner)["charts"][
        "reward/mean"
    ]
    assert at(by_step["grpo"], 100) > at(by_step["dapo"], 100)
    by_tokens = build_comparison(View(runs=runs, metrics=["reward/mean"], x="tokens"), project.owner)["charts"][
        "reward/mean"
    ]
    assert at(by_tokens["grpo"], 60_000) < at(by_tokens["dapo"], 60_000)
    # per token, B reaches 1.0 after 150 steps x 400 = 60,000 tokens; A after 100 x 1000 = 100,000
    table = build_comparison(View(runs=runs, metrics=["reward/mean"], target=1.0), project.owner)["table"]
    reach = {row["group"]: row["reach"] for row in table}
    assert reach["grpo"]["steps"] < reach["dapo"]["steps"]
    assert reach["grpo"]["tokens"] > reach["dapo"]["tokens"]
    assert reach["grpo"]["seconds"] == pytest.approx(0.1 * 100, abs=0.2)


def test_groups_get_bands_and_the_table_its_statistics(project):
    # exact binary fractions, so that equal scores are equal
    runs = [make_run(project, "grpo", s, lambda t, s=s: 0.5 + 0.125 * s, 10, steps=50) for s in range(4)]
    runs += [make_run(project, "rloo", s, lambda t, s=s: 0.25 + 0.125 * s, 10, steps=50) for s in range(4)]
    data = build_comparison(View(runs=[r.id for r in runs], metrics=["reward/mean"], baseline="rloo"), project.owner)
    grpo = data["charts"]["reward/mean"]["grpo"]
    assert grpo["runs"] == 4 and len(grpo["x"]) == 200
    assert grpo["mean"][0] == pytest.approx(0.6875) and grpo["low"][0] < 0.6875 < grpo["high"][0]
    rows = {row["group"]: row for row in data["table"]}
    assert rows["grpo"]["mean"] == pytest.approx(0.6875) and rows["grpo"]["iqm"] == pytest.approx(0.6875)
    # {.5 .625 .75 .875} against {.25 .375 .5 .625}: 13 wins and 2 ties of 16 pairs
    assert rows["grpo"]["p_improvement"] == pytest.approx(14 / 16)
    assert rows["grpo"]["p_low"] <= 14 / 16 <= rows["grpo"]["p_high"]
    assert "p_improvement" not in rows["rloo"]  # the baseline itself
    # four runs: the interval is their range, and the table says so beside it
    assert (rows["grpo"]["iqm_low"], rows["grpo"]["iqm_high"]) == (0.5, 0.875)
    assert rows["grpo"]["interval_note"].startswith("4 runs: below 5 the interval is the runs' own range")


def test_from_five_runs_the_interval_is_narrower_than_their_range_and_the_note_only_counts_them(project):
    runs = [make_run(project, "grpo", s, lambda t, s=s: 0.5 + 0.125 * s, 10, steps=20) for s in range(5)]
    (row,) = build_comparison(View(runs=[r.id for r in runs], metrics=["reward/mean"]), project.owner)["table"]
    assert 0.5 < row["iqm_low"] and row["iqm_high"] < 1.0
    assert row["interval_note"] == "5 runs"


def test_the_config_diff_shows_only_the_knobs_that_differ(project):
    runs = [make_run(project, "grpo", 0, lambda t: 0.1, 1), make_run(project, "gspo", 1, lambda t: 0.1, 1)]
    diff = {row["knob"]: row for row in build_comparison(View(runs=[r.id for r in runs]), project.owner)["diff"]}
    assert diff["objective.name"]["values"] == {"grpo": "token-clip", "gspo": "sequence-clip"}
    assert "rollout.group_size" not in diff and "seed" in diff and "method" in diff


def test_grouping_by_a_config_knob(project):
    runs = [make_run(project, "grpo", 0, lambda t: 0.1, 1, rollout={"group_size": g}) for g in (4, 8)]
    data = build_comparison(View(runs=[r.id for r in runs], group="rollout.group_size"), project.owner)
    assert [g["label"] for g in data["groups"]] == ["rollout.group_size=4", "rollout.group_size=8"]


def test_runs_in_different_environments_are_grouped_by_environment(project):
    runs = [make_run(project, "grpo", s, lambda t: 0.1, 1, steps=2) for s in range(2)]
    calculator = {"name": "calculator"}
    runs += [make_run(project, "grpo", s, lambda t: 0.2, 1, steps=2, environment=calculator) for s in range(2)]
    old = runs[0].config
    old.pop("environment")  # a config stored before there were environments: single-turn
    Run.objects.filter(pk=runs[0].pk).update(config=old)
    ids = [r.id for r in runs]
    data = build_comparison(View(runs=ids, metrics=["reward/mean"], group="environment"), project.owner)
    assert data["group_options"][:2] == ["method", "environment"]
    assert {g["label"]: len(g["runs"]) for g in data["groups"]} == {"calculator": 2, "none": 2}
    assert data["charts"]["reward/mean"]["calculator"]["mean"][0] == pytest.approx(0.2)
    single = [r.id for r in runs[2:]]  # one environment: nothing to group by
    with pytest.raises(BadView, match="group: 'environment' does not differ"):
        build_comparison(View(runs=single, group="environment"), project.owner)


def test_individual_seeds_on_demand(project):
    runs = [make_run(project, "grpo", s, lambda t, s=s: 0.1 * s, 1) for s in range(2)]
    chart = build_comparison(View(runs=[r.id for r in runs], metrics=["reward/mean"], seeds=True), project.owner)[
        "charts"
    ]
    assert [s["run"] for s in chart["reward/mean"]["grpo"]["seeds"]] == [r.id for r in runs]


def test_ema_is_debiased():
    assert list(ema(np.array([2.0, 2.0, 2.0]), 0.9)) == pytest.approx([2.0, 2.0, 2.0])
    assert ema(np.array([0.0, 1.0]), 0.5)[1] == pytest.approx((0.5 * 0 * 0.5 + 0.5 * 1) / (1 - 0.25))


def test_the_permalink_round_trips():
    view = View(runs=[3, 1], metrics=["eval/pass@1", "policy/loss"], x="tokens", smooth=0.6, seeds=True,
                baseline="grpo", target=0.5, group="objective.clip_high", band="se")  # fmt: skip
    again = parse_view(dict(pair.split("=", 1) for pair in view.query().split("&")))
    assert again == view


@pytest.mark.parametrize(
    "params, message",
    [({}, "runs:"), ({"runs": "1,x"}, "runs:"), ({"runs": "1", "x": "hours"}, "x: one of step, tokens, seconds"),
     ({"runs": "1", "smooth": "1"}, "smooth:"), ({"runs": "1", "group": "a;drop"}, "group:"),
     ({"runs": "1", "target": "high"}, "target: a number"), ({"runs": "1", "target": "1e13"}, "target: a number from"),
     ({"runs": "1", "target": "nan"}, "target: a finite number"), ({"runs": "1", "band": "sd"}, "band: one of minmax"),
     ({"runs": "1", "group": "x" * 131}, "group:"), ({"runs": "1", "group": "rollout.gröup"}, "group:")],
)  # fmt: skip
def test_a_bad_view_names_its_parameter(params, message):
    with pytest.raises(BadView, match=message):
        parse_view(params)


def test_a_group_of_one_run_has_no_interval_and_the_payload_is_strict_json(project):
    import json

    run = make_run(project, "grpo", 0, lambda t: 0.5, 1, steps=10)
    data = build_comparison(View(runs=[run.id], metrics=["reward/mean"]), project.owner)
    json.dumps(data, allow_nan=False)  # NaN is not JSON: browsers refuse it
    assert data["table"][0]["iqm_low"] is None and data["charts"]["reward/mean"]["grpo"]["low"] is None


def test_the_knobs_that_vary_are_those_whose_values_differ_among_the_runs(project):
    runs = [
        make_run(project, "grpo", s, lambda t: 0.1, 1, steps=2, rollout={"group_size": g}) for s, g in ((0, 4), (1, 8))
    ]
    runs.append(make_run(project, "mc-grpo", 0, lambda t: 0.1, 1, steps=2, rollout={"group_size": 4}))
    knobs = varying_knobs(runs)
    assert {"seed", "method", "rollout.group_size", "generate.name"} <= set(knobs)
    assert "optimizer.lr" not in knobs and "task.name" not in knobs  # the same in every run
    assert group_options(knobs)[0] == "method" and group_options(knobs).count("method") == 1
    assert varying_knobs(runs[:1]) == [] and group_options([]) == ["method"]  # one run: nothing varies


def test_grouping_by_a_knob_that_does_not_vary_is_refused_by_name(project):
    runs = [make_run(project, "grpo", s, lambda t: 0.1, 1, steps=2) for s in (0, 1)]
    ids = [r.id for r in runs]
    with pytest.raises(
        BadView, match="group: 'optimizer.lr' does not differ among these runs; group by one of method, seed"
    ):
        select_runs(View(runs=ids, group="optimizer.lr"), project.owner)
    with pytest.raises(BadView, match="group: 'no.such.knob'"):
        build_comparison(View(runs=ids, group="no.such.knob"), project.owner)
    assert [g["label"] for g in build_comparison(View(runs=ids, group="seed"), project.owner)["groups"]] == ["0", "1"]


def test_the_chosen_band_is_drawn_and_none_draws_none(project):
    runs = [make_run(project, "grpo", s, lambda t, s=s: 0.5 * s, 10, steps=20) for s in range(3)]  # 0, .5, 1
    ids = [r.id for r in runs]

    def band(kind):
        curve = build_comparison(View(runs=ids, metrics=["reward/mean"], band=kind), project.owner)["charts"]
        return curve["reward/mean"]["grpo"]["low"], curve["reward/mean"]["grpo"]["high"]

    assert band("minmax")[0][0] == 0.0 and band("minmax")[1][0] == 1.0
    assert band("se")[1][0] == pytest.approx(0.5 + 0.5 / np.sqrt(3), rel=1e-5)
    assert band("ci")[1][0] > 1.0 and band("none") == (None, None)
    data = build_comparison(View(runs=ids, band="se"), project.owner)
    assert data["view"]["band"] == "se" and "band=se" in data["permalink"]


def test_tokens_to_reach_a_target_are_the_mean_and_range_over_the_runs_that_reached_it(project):
    # reward = step / 100 for every run; 300, 500 and 1000 tokens a step: 1.0 is first reached at step 100
    runs = [
        make_run(project, "grpo", s, lambda t: t / 100, tokens, steps=120) for s, tokens in enumerate((300, 500, 1000))
    ]
    runs.append(make_run(project, "grpo", 3, lambda t: t / 1000, 99, steps=120))  # never gets there
    runs.append(make_run(project, "rloo", 0, lambda t: t / 200, 100, steps=120))  # nor this group
    data = build_comparison(View(runs=[r.id for r in runs], metrics=["reward/mean"], target=1.0), project.owner)
    reach = {row["group"]: row["reach"] for row in data["table"]}
    assert reach["grpo"] == {"reached": 3, "of": 4, "steps": 100.0, "tokens": 60_000.0, "tokens_low": 30_000.0,
                             "tokens_high": 100_000.0, "seconds": pytest.approx(10.0)}  # fmt: skip
    assert reach["rloo"] == {"reached": 0, "of": 1}


def test_parallel_coordinates_have_a_line_per_scored_run_over_the_varying_knobs_and_the_metric(project):
    cells = [("grpo", 1e-4), ("grpo", 3e-4), ("mc-grpo", 1e-4)]
    runs = [make_run(project, m, 0, lambda t, lr=lr: lr * 1000, 1, steps=2, optimizer={"lr": lr}) for m, lr in cells]
    unscored = make_run(project, "grpo", 0, lambda t: 0.1, 1, steps=2, optimizer={"lr": 1e-3})
    unscored.summary = {}
    unscored.save()
    data = build_comparison(View(runs=[r.id for r in [*runs, unscored]], metrics=["reward/mean"]), project.owner)
    parallel = data["parallel"]
    axes = {d["label"]: d for d in parallel["dimensions"]}
    assert parallel["runs"] == [r.id for r in runs] and parallel["unscored"] == 1
    assert axes["optimizer.lr"]["values"] == [1e-4, 3e-4, 1e-4] and "ticktext" not in axes["optimizer.lr"]
    assert axes["method"]["ticktext"] == ["grpo", "mc-grpo"] and axes["method"]["values"] == [0, 0, 1]
    assert parallel["dimensions"][-1] == {"label": "reward/mean", "values": pytest.approx([0.1, 0.3, 0.1])}
    assert "seed" not in axes  # every run is seed 0 here; and a seed is never an axis of the sweep


def test_parallel_coordinates_keep_the_most_varied_knobs_when_too_many_differ(project, monkeypatch):
    from rolloutlab.compare import service

    monkeypatch.setattr(service, "MAX_KNOB_AXES", 2)
    cells = [("grpo", 1e-4), ("grpo", 3e-4), ("mc-grpo", 1e-3)]  # lr: 3 values; method and its knobs: 2 each
    runs = [make_run(project, m, 0, lambda t: 0.1, 1, steps=2, optimizer={"lr": lr}) for m, lr in cells]
    parallel = build_comparison(View(runs=[r.id for r in runs], metrics=["reward/mean"]), project.owner)["parallel"]
    labels = [d["label"] for d in parallel["dimensions"]]
    assert len(labels) == 3 and "optimizer.lr" in labels and labels[-1] == "reward/mean"
    assert parallel["hidden_knobs"] and not set(parallel["hidden_knobs"]) & set(labels)
    assert "method" in labels + parallel["hidden_knobs"]


def test_runs_that_differ_only_by_seed_have_no_parallel_coordinates(project):
    runs = [make_run(project, "grpo", s, lambda t: 0.1, 1, steps=2) for s in (0, 1)]
    assert build_comparison(View(runs=[r.id for r in runs]), project.owner)["parallel"] is None


@pytest.mark.parametrize("band", ["minmax", "ci", "se"])
def test_values_near_a_floats_limit_give_json_numbers_or_nulls_never_a_500(project, band):
    """1.7e308 comes back from jsonb as an integer of 309 digits, and means of such values overflow to inf."""
    from django.test import Client

    runs = [make_run(project, "grpo", s, lambda t, s=s: 1.7e308 - s * 1e306, 10, steps=20) for s in range(3)]
    client = Client()
    client.force_login(project.owner)
    ids = ",".join(str(r.id) for r in runs)
    response = client.get(f"/api/compare?runs={ids}&metrics=reward/mean&table=reward/mean&band={band}&smooth=0.5")
    assert response.status_code == 200
    text = response.content.decode()
    assert "Infinity" not in text and "NaN" not in text
    data = json.loads(text)
    (row,) = data["table"]
    assert row["iqm"] is None or row["iqm"] > 1e307  # the mean of three 1.7e308s overflows to inf: null
    assert data["parallel"] is None or all(
        isinstance(v, float) for d in data["parallel"]["dimensions"] for v in d["values"]
    )
