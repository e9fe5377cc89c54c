"""In Chromium: a sweep of grpo and mc-grpo x 2 seeds on the tiny model runs on the worker; the compare
page shows a band per method and a table with both groups, and the bands move while the runs run."""

import json
import time

import pytest

from rolloutlab.runs.models import Run
from tests.platform.test_live_runs import log_in

pytestmark = pytest.mark.timeout(600)

SMALL = {"model.hidden_size": "32", "model.heads": "2", "model.layers": "2", "model.warmup_steps": "150",
         "task.operands": "2", "eval.size": "16", "eval.every": "10", "schedule.steps": "200"}  # fmt: skip


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
