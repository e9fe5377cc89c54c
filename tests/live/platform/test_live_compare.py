"""In Chromium: a sweep of grpo and mc-grpo x 2 seeds on the tiny model runs on the worker; the compare
page shows a band per method and a table with both groups, and the bands move while the runs run."""

import json
import time

import numpy as np
import pytest
from scipy import stats as scipy_stats

from rolloutlab.runs.models import Run
from tests.live.platform.test_live_runs import log_in

pytestmark = pytest.mark.timeout(600)

SMALL = {"model.hidden_size": "32", "model.heads": "2", "model.layers": "2", "model.warmup_steps": "150",
         "task.operands": "2", "eval.size": "16", "eval.every": "10", "schedule.steps": "80",
         "rollout.prompts_per_step": "8", "schedule.minibatches": "1"}  # fmt: skip


def compare_state(page) -> tuple[int, dict, int]:
    return page.eval_on_selector(
        "#compare", "el => [Number(el.dataset.bands), JSON.parse(el.dataset.bandEnds), Number(el.dataset.updates)]"
    )


def test_a_sweep_is_compared_live_with_a_band_per_method(page, alice, stack):
    log_in(page, "alice", "alice-password")
    page.goto("/compare/sweep/?method=grpo")
    page.check("input[name=methods][value=mc-grpo]")
    assert page.is_checked("input[name=methods][value=grpo]")
    page.fill("#seeds", "0,1")
    for knob, value in SMALL.items():
        page.fill(f"[name='{knob}']", value)
    page.click("#sweep-submit")
    page.wait_for_url("**/compare/experiments/*/")
    assert Run.objects.count() == 4
    page.click("#compare-link")
    page.wait_for_url("**/compare/?experiment=*")

    ends_seen, moved = [], False
    deadline = time.time() + 400
    while time.time() < deadline:
        bands, ends, _ = compare_state(page)
        running = Run.objects.filter(state__in=["queued", "running"]).exists()
        if running and ends:
            if ends_seen and any(ends.get(k, 0) > v for k, v in ends_seen[-1].items()):
                moved = True  # a band reached further while the sweep was running
            ends_seen.append(ends)
        if not running:
            break
        time.sleep(0.5)
    assert moved, ends_seen[-5:]
    assert set(Run.objects.values_list("state", flat=True)) == {"succeeded"}

    page.reload()
    page.wait_for_function("Number(document.getElementById('compare').dataset.updates) > 0")
    bands, ends, _ = compare_state(page)
    assert {key.split("|")[1] for key in ends if key.startswith("reward/mean|")} == {"grpo", "mc-grpo"}
    rows = page.locator("#final-table tbody tr")
    assert rows.count() == 2
    assert sorted(rows.nth(i).get_attribute("data-group") for i in range(2)) == ["grpo", "mc-grpo"]
    assert "[" in rows.nth(0).inner_text()  # an IQM with its interval
    assert "2 runs: below 5 the interval is the runs' own range" in rows.nth(0).inner_text()  # and what it rests on
    diff = page.locator("#config-diff").inner_text()
    assert "generate.name" in diff and "advantage.name" in diff and "rollout.group_size" not in diff

    # the permalink: another tab opening the same address shows the same view
    page.check("input[name=x][value=tokens]")
    page.wait_for_function("location.search.includes('x=tokens')")
    link = page.url
    other = page.context.new_page()
    other.goto(link)
    other.wait_for_function("Number(document.getElementById('compare').dataset.updates) > 0")
    assert other.is_checked("input[name=x][value=tokens]")
    assert json.dumps(compare_state(other)[1], sort_keys=True) == json.dumps(
        page.eval_on_selector("#compare", "el => JSON.parse(el.dataset.bandEnds)"), sort_keys=True
    )


def band_widths(page, metric="reward/mean") -> dict[str, float]:
    """{group: high - low at the band's first point}, read from the traces Plotly drew."""
    return page.eval_on_selector(
        f'#charts [data-metric="{metric}"]',
        """div => Object.fromEntries(div.data.map((t, i) => [t, i]).filter(([t]) => t.fill === "tonexty")
             .map(([t, i]) => [t.legendgroup, div.data[i - 1].y[0] - t.y[0]]))""",
    )


def wait_for_update(page, after: int) -> None:
    page.wait_for_function(f"Number(document.getElementById('compare').dataset.updates) > {after}")


def test_compare_from_the_navigation_switches_bands_and_groups_by_a_knob_that_varies(page, alice, stack):
    from rolloutlab.runs.models import Experiment
    from tests.conftest import project_of
    from tests.database.compare.test_comparison import make_run

    project = project_of(alice)
    experiment = Experiment.objects.create(project=project, name="lr sweep", owner=alice)
    for method in ("grpo", "mc-grpo"):
        for lr in (1e-4, 3e-4):
            for seed in (0, 1, 2):  # seeds 0.1 apart: each group's range is 0.2
                run = make_run(project, method, seed, lambda t, s=seed: t / 100 + 0.1 * s, 100, steps=30,
                               optimizer={"lr": lr})  # fmt: skip
                run.experiment = experiment
                run.save()

    log_in(page, "alice", "alice-password")
    page.click("#nav-compare")
    page.wait_for_url("**/compare/experiments/")
    page.click(f"tr[data-experiment-id='{experiment.id}'] a.compare-experiment")
    page.wait_for_url("**/compare/?experiment=*")
    wait_for_update(page, 0)
    assert page.eval_on_selector("#band-select", "s => s.value") == "minmax"  # the default, said on the page
    assert "the default is the min–max of the runs" in page.inner_text("#band-note")
    assert band_widths(page) == {"grpo": pytest.approx(0.2, abs=1e-6), "mc-grpo": pytest.approx(0.2, abs=1e-6)}

    updates = compare_state(page)[2]
    page.select_option("#band-select", "ci")
    wait_for_update(page, updates)
    assert "band=ci" in page.url and "95% CI" in page.inner_text("#band-name")
    per_method = [0.0, 0.0, 0.1, 0.1, 0.2, 0.2]  # two learning rates x three seeds, at the first point
    half = scipy_stats.t.ppf(0.975, 5) * np.std(per_method, ddof=1) / np.sqrt(6)
    assert band_widths(page)["grpo"] == pytest.approx(2 * half, rel=1e-4)

    updates = compare_state(page)[2]
    page.select_option("#band-select", "none")
    wait_for_update(page, updates)
    assert band_widths(page) == {} and compare_state(page)[0] == 0

    options = page.eval_on_selector_all("#group-select option", "os => os.map(o => o.value)")
    assert options[0] == "method" and "optimizer.lr" in options and "seed" in options
    assert "rollout.group_size" not in options  # the same in every run of the sweep
    updates = compare_state(page)[2]
    page.select_option("#group-select", "optimizer.lr")
    wait_for_update(page, updates)
    assert "group=optimizer.lr" in page.url
    rows = page.locator("#final-table tbody tr")
    assert sorted(rows.nth(i).get_attribute("data-group") for i in range(rows.count())) == [
        "optimizer.lr=0.0001", "optimizer.lr=0.0003"]  # fmt: skip

    # the parallel coordinates: a line per run over the knobs that differ, and the final (table) metric
    assert page.is_hidden("#parallel-section")  # no run has the default table metric, eval/pass@1
    updates = compare_state(page)[2]
    page.select_option("select[name=table]", "reward/mean")
    wait_for_update(page, updates)
    dims = page.eval_on_selector("#parallel", "div => div.data[0].dimensions.map(d => d.label)")
    assert page.is_visible("#parallel") and "optimizer.lr" in dims and "method" in dims and dims[-1] == "reward/mean"
    assert page.eval_on_selector("#parallel", "div => div.data[0].dimensions[0].values.length") == 12

    # rollout tokens to a target on the tokens axis: reward t/100 + 0.1 s reaches 0.25 at steps 25, 15, 5
    updates = compare_state(page)[2]
    page.check("input[name=x][value=tokens]")
    page.fill("input[name=target]", "0.25")
    page.dispatch_event("input[name=target]", "change")
    # two changes, two requests: the page draws the answer to the latest, whichever comes back first
    page.wait_for_function("(document.getElementById('compare').dataset.drawn || '').includes('target=0.25') && "
                           "document.getElementById('compare').dataset.drawn.includes('x=tokens')")  # fmt: skip
    assert compare_state(page)[2] > updates
    reach = page.locator("#reach-table tbody tr").first
    assert reach.get_attribute("data-group") == "optimizer.lr=0.0001" and reach.get_attribute("data-tokens") == "1500"
    assert "6/6" in reach.inner_text() and "[500, 2,500]" in reach.inner_text()

    # the permalink keeps the band and the group-by
    page.reload()
    wait_for_update(page, 0)
    assert page.eval_on_selector("#band-select", "s => s.value") == "none"
    assert page.eval_on_selector("#group-select", "s => s.value") == "optimizer.lr"


def test_a_config_string_is_drawn_as_its_text_in_the_legend_never_as_a_link(page, alice, stack):
    """Plotly reads trace names as a subset of HTML: a knob's value that holds a link was drawn as one."""
    from tests.conftest import project_of
    from tests.database.compare.test_comparison import make_run

    link = '<a href="https://evil.example/">open me</a>'
    project = project_of(alice)
    runs = [make_run(project, "grpo", seed, lambda t: t / 100, 100, steps=10, prompt={"system": system})
            for seed, system in ((0, link), (1, "Be brief."))]  # fmt: skip
    log_in(page, "alice", "alice-password")
    page.goto(f"/compare/?runs={runs[0].id},{runs[1].id}&group=prompt.system")
    wait_for_update(page, 0)
    legend = page.eval_on_selector_all("#charts .legendtext", "ts => ts.map(t => t.textContent)")
    assert f"prompt.system={link} (1)" in legend and "prompt.system=Be brief. (1)" in legend
    assert page.locator("#charts .legend a").count() == 0  # no link drawn, nothing to click


def test_metrics_a_running_run_logs_after_the_page_opened_join_the_picker_without_a_reload(page, alice, stack):
    from rolloutlab.metrics.ingest import write_points
    from tests.conftest import project_of
    from tests.database.compare.test_comparison import make_run

    run = make_run(project_of(alice), "grpo", 0, lambda t: 0.0, 100, steps=0)
    Run.objects.filter(id=run.id).update(state="running")  # the page refreshes itself while a run runs
    write_points(run.id, [("eval/pass@1", 0, 0.25, 0.0)])
    log_in(page, "alice", "alice-password")
    page.goto(f"/compare/?runs={run.id}")
    wait_for_update(page, 0)
    offered = "els => els.map(e => [e.value, e.checked])"
    assert page.eval_on_selector_all("input[name=metrics]", offered) == [["eval/pass@1", True], ["reward/mean", True]]

    write_points(run.id, [("completions/mean_length", 1, 21.0, 0.0), ("reward/mean", 1, 0.5, 0.0)])
    page.wait_for_selector("input[name=metrics][value='completions/mean_length']", state="attached", timeout=15_000)
    assert page.eval_on_selector_all("input[name=metrics]", offered) == [
        ["completions/mean_length", False], ["eval/pass@1", True], ["reward/mean", True]]  # fmt: skip
    options = page.eval_on_selector_all("select[name=table] option", "os => os.map(o => o.value)")
    assert options == ["completions/mean_length", "eval/pass@1", "reward/mean"]
    assert "completions/mean_length" not in page.url  # the view changes only when the user picks it

    page.click("summary:has-text('Metrics')")
    page.check("input[name=metrics][value='completions/mean_length']")
    page.wait_for_selector('#charts [data-metric="completions/mean_length"]', timeout=15_000)
    assert "metrics=completions/mean_length,eval/pass@1,reward/mean" in page.url
    Run.objects.filter(id=run.id).update(state="succeeded")
