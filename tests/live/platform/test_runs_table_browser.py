"""In Chromium: the runs table's column chooser adds a config knob's column, kept as a saved view; two runs
selected and bulk-compared open the compare page with both."""

from urllib.parse import parse_qs, urlparse

import pytest

from rolloutlab.metrics.ingest import write_points
from rolloutlab.runs.models import Run, SavedView
from tests.conftest import project_of, small_config
from tests.live.platform.test_live_runs import log_in

pytestmark = pytest.mark.timeout(300)


def finished_run(owner, name: str, group_size: int) -> Run:
    config = small_config().model_dump(mode="json")
    config["rollout"]["group_size"] = group_size
    run = Run.objects.create(project=project_of(owner), name=name, owner=owner, method="grpo", state="succeeded",
                             config=config, config_hash="0" * 64, step=3, total_steps=3)  # fmt: skip
    write_points(run.id, [("reward/mean", s, s / 10, 0.0) for s in range(3)])
    return run


def test_a_knob_column_is_chosen_and_kept_then_two_runs_are_compared_in_bulk(page, alice, stack):
    first, second = finished_run(alice, "narrow-groups", 3), finished_run(alice, "wide-groups", 6)
    finished_run(alice, "left-out", 4)
    log_in(page, "alice", "alice-password")
    page.goto("/runs/")
    assert page.locator('th[data-column="config:rollout.group_size"]').count() == 0

    page.click("#column-chooser summary")
    page.fill("#column-filter", "group_size")
    assert not page.is_visible('label:has(input[value="config:optimizer.lr"])')  # the filter narrows the list
    page.check('input.column-pick[value="config:rollout.group_size"]')
    page.fill("#view-name", "groups")
    page.click("#save-view")
    page.wait_for_selector('th[data-column="config:rollout.group_size"]')
    assert "Saved the view 'groups'." in page.inner_text("#table-message")
    cell = 'tr[data-run-id="{}"] td[data-column="config:rollout.group_size"]'
    assert page.inner_text(cell.format(first.id)) == "3" and page.inner_text(cell.format(second.id)) == "6"
    assert SavedView.objects.get(user=alice).name == "groups"
    page.goto("/runs/")  # kept: the list opens with it
    assert page.input_value("#view-select") == "groups" and page.is_visible(cell.format(first.id))

    page.check(f'input.pick[value="{first.id}"]')
    page.check(f'input.pick[value="{second.id}"]')
    page.click("#compare-selected")
    in_table_order = f"{second.id},{first.id}"  # newest first
    assert f"#{second.id}, #{first.id}" in page.inner_text("#bulk-question")
    page.click("#bulk-ok")
    page.wait_for_url("**/compare/?runs=*")
    url = urlparse(page.url)
    assert url.path == "/compare/" and parse_qs(url.query)["runs"] == [in_table_order]
    assert page.input_value("#controls input[name=runs]") == in_table_order


def test_a_run_is_renamed_in_place_and_a_cancelled_delete_deletes_nothing(page, alice, stack):
    run = finished_run(alice, "before", 3)
    log_in(page, "alice", "alice-password")
    page.goto("/runs/")
    row = f'tr[data-run-id="{run.id}"]'
    page.click(f'{row} td[data-edit="name"] button.edit')
    page.fill(f"{row} input.edit-name", "x" * 200 + "<b>")
    page.press(f"{row} input.edit-name", "Enter")  # the input's maxlength cut it to 200: accepted
    page.wait_for_function(f"document.querySelector('{row} [data-field=name]').textContent.length === 200")
    page.click(f'{row} td[data-edit="name"] button.edit')
    page.fill(f"{row} input.edit-name", "   ")
    page.press(f"{row} input.edit-name", "Enter")
    page.wait_for_selector("#table-message.error")
    assert "name: String should have at least 1 character" in page.inner_text("#table-message")
    page.fill(f"{row} input.edit-name", "after")
    page.press(f"{row} input.edit-name", "Enter")
    page.wait_for_selector(f"{row} [data-field=name]:text-is('after')")
    run.refresh_from_db()
    assert run.name == "after"

    page.check(f'input.pick[value="{run.id}"]')
    page.click("button.bulk-action[data-action=delete]")
    assert "for good" in page.inner_text("#bulk-question")
    page.click("#bulk-confirm button[value=cancel]")
    page.wait_for_selector("#bulk-confirm", state="hidden")
    assert Run.objects.filter(id=run.id).exists()
    page.click("button.bulk-action[data-action=delete]")
    page.click("#bulk-ok")
    page.wait_for_selector("#table-message:text('Deleted 1 run(s).')")
    assert not Run.objects.filter(id=run.id).exists() and page.locator(row).count() == 0


def test_the_filter_form_submitted_as_it_stands_searches_and_the_sweep_forms_boxes_sit_beside_their_names(
    page, alice, stack
):
    """What a first visit hit: Filter with State left at "any" answered an error page; each sweep checkbox sat above
    its name, so the ticked grpo box looked like the label below it."""
    finished_run(alice, "mc-search-me", 4)
    finished_run(alice, "other", 4)
    log_in(page, "alice", "alice-password")
    page.goto("/runs/")
    page.fill("#run-search", "mc")
    page.click("form.filters button[type=submit]")
    page.wait_for_url("**/runs/?*")
    assert "state=" in page.url and page.locator("tr[data-run-id]").count() == 1
    assert "mc-search-me" in page.inner_text("tbody")

    page.goto("/compare/sweep/?method=grpo")
    for name in ("grpo", "gdro", "dapo"):
        box = page.locator(f'input[name=methods][value="{name}"]').bounding_box()
        label = page.locator(f'label.inline-check:has(input[value="{name}"])').bounding_box()
        # the box is on its label's line, at its left, and the label no taller than one line
        assert abs(box["y"] + box["height"] / 2 - (label["y"] + label["height"] / 2)) < 4, (name, box, label)
        assert box["x"] <= label["x"] + 4 and label["height"] < 2.5 * box["height"], (name, box, label)
