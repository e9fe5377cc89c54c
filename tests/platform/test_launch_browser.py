"""In Chromium: a pipeline stage shows the knobs of the component chosen, and only those; warnings follow edits."""

import pytest

from tests.platform.test_live_runs import log_in

pytestmark = pytest.mark.timeout(300)


def test_choosing_a_stage_component_shows_its_knobs_and_hides_the_others(page, alice, stack):
    log_in(page, "alice", "alice-password")
    page.goto("/runs/launch/?method=dapo")
    assert page.input_value("[name='filter.name']") == "dynamic-sampling"
    assert page.is_visible("[name='filter.max_rounds']") and page.is_visible("[name='filter.signal']")
    page.select_option("[name='filter.name']", "none")
    assert not page.is_visible("[name='filter.max_rounds']") and not page.is_visible("[name='filter.signal']")
    assert page.is_visible("[name='filter.overlong']")  # every filter owns it
    page.select_option("[name='filter.name']", "dynamic-sampling")
    assert page.is_visible("[name='filter.max_rounds']")


def test_the_inert_knob_warning_follows_the_schedule_as_it_is_edited(page, alice, stack):
    log_in(page, "alice", "alice-password")
    page.goto("/runs/launch/?method=grpo")
    assert page.is_visible("#schedule-warnings") and "cannot act" in page.inner_text("#schedule-warnings")
    page.fill("[name='schedule.updates_per_batch']", "2")
    page.dispatch_event("[name='schedule.updates_per_batch']", "change")
    page.wait_for_selector("#schedule-warnings", state="hidden")
    page.fill("[name='schedule.updates_per_batch']", "1")
    page.dispatch_event("[name='schedule.updates_per_batch']", "change")
    page.wait_for_selector("#schedule-warnings li.warning", state="visible")
