"""In Chromium: a pipeline stage (and the task, the model, the executor) shows the knobs of the kind chosen, and
only those; warnings follow edits;
switching preset keeps the user's edits; the YAML editor checks as you type and launches; errors link to fields."""

import pytest

from tests.live.platform.test_live_runs import log_in
from tests.support.platform_fixtures import open_section

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


def test_choosing_a_task_model_or_executor_shows_its_knobs_and_hides_the_others(page, alice, stack):
    log_in(page, "alice", "alice-password")
    page.goto("/runs/launch/")
    for knob in ("task.name", "model.name", "resources.executor"):
        open_section(page, knob)
    assert page.is_visible("[name='task.digits']") and not page.is_visible("[name='task.path']")
    page.select_option("[name='task.name']", "jsonl")
    assert page.is_visible("[name='task.path']") and not page.is_visible("[name='task.digits']")
    assert page.is_visible("[name='model.hidden_size']") and page.is_visible("[name='model.dtype']")
    page.fill("[name='model.name']", "models/smol")  # a directory, typed: the tiny model's knobs go
    assert not page.is_visible("[name='model.hidden_size']") and page.is_visible("[name='model.dtype']")
    assert not page.is_visible("[name='resources.rollout_actors']")
    page.select_option("[name='resources.executor']", "ray")
    assert page.is_visible("[name='resources.rollout_actors']") and page.is_visible("[name='resources.threads']")


def test_the_inert_knob_warning_follows_the_schedule_as_it_is_edited(page, alice, stack):
    log_in(page, "alice", "alice-password")
    page.goto("/runs/launch/?method=grpo")
    assert not page.is_visible("#schedule-warnings")  # the default schedule (two minibatches) lets the clip act
    page.click("#section-schedule > summary")  # grpo sets nothing apart from itself: every section starts closed
    page.fill("[name='schedule.minibatches']", "1")
    page.dispatch_event("[name='schedule.minibatches']", "change")
    page.wait_for_selector("#schedule-warnings li.warning", state="visible")
    assert "cannot act" in page.inner_text("#schedule-warnings")
    page.fill("[name='schedule.updates_per_batch']", "2")
    page.dispatch_event("[name='schedule.updates_per_batch']", "change")
    page.wait_for_selector("#schedule-warnings", state="hidden")
    page.fill("[name='schedule.updates_per_batch']", "1")
    page.dispatch_event("[name='schedule.updates_per_batch']", "change")
    page.wait_for_selector("#schedule-warnings li.warning", state="visible")


def test_switching_preset_keeps_the_users_edits_and_marks_what_the_preset_sets(page, alice, stack):
    log_in(page, "alice", "alice-password")
    page.goto("/runs/launch/?method=grpo")
    assert not page.is_visible("[name='rollout.group_size']")  # sections start closed when grpo sets nothing apart
    page.click("#section-rollout > summary")
    page.fill("[name='rollout.group_size']", "6")
    page.select_option("#method-picker", "dapo")  # no reload: the edit stays, dapo's own knobs come in
    assert page.evaluate("performance.getEntriesByType('navigation').length") == 1
    assert page.input_value("[name='rollout.group_size']") == "6"
    assert page.input_value("[name='filter.name']") == "dynamic-sampling"
    assert page.is_visible("#section-filter .field.preset-set[data-name='filter.name']")  # open and highlighted
    assert "set by dapo" in page.inner_text("#section-filter .field[data-name='filter.name'] .preset-badge")
    assert "1 knob changed by you" in page.inner_text("#edit-count")
    page.select_option("#method-picker", "grpo")
    assert page.input_value("[name='filter.name']") == "none" and page.input_value("[name='rollout.group_size']") == "6"
    assert page.is_visible("#launch-submit")  # the launch bar stays in view
    page.click("#launch-submit")
    page.wait_for_url("**/runs/*/")
    from rolloutlab.runs.models import Run

    launched = Run.objects.latest("id")
    assert launched.config["rollout"]["group_size"] == 6 and launched.config["method"] == "grpo"


def test_the_yaml_editor_is_checked_live_and_launches_what_it_holds(page, alice, stack):
    log_in(page, "alice", "alice-password")
    page.goto("/runs/launch/?method=grpo")
    page.click("#mode-toggle")
    page.wait_for_selector("#config-yaml", state="visible")
    assert "group_size:" in page.input_value("#config-yaml")
    page.fill("#config-yaml", "method: grpo\nrollout:\n  group_size: 0\n")
    page.wait_for_function("document.getElementById('launch-form').dataset.yamlErrors === '1'")
    assert "rollout.group_size" in page.inner_text("#yaml-errors")
    page.fill("#config-yaml", "method: grpo\nrollout:\n  group_size: [\n")
    page.wait_for_function("document.querySelector('#yaml-errors').textContent.includes('not valid YAML at line')")
    page.fill("#config-yaml", "method: rloo\nseed: 11\nrollout:\n  group_size: 5\n")
    page.wait_for_function("document.getElementById('launch-form').dataset.yamlErrors === '0'")
    page.click("#mode-toggle")  # back to the form, which now holds the YAML's config
    page.wait_for_selector("#form-fields", state="visible")
    assert page.input_value("#method-picker") == "rloo" and page.input_value("[name='rollout.group_size']") == "5"
    page.click("#mode-toggle")
    page.fill("#config-yaml", "method: rloo\nseed: 11\nrollout:\n  group_size: 5\n")
    page.wait_for_function("document.getElementById('launch-form').dataset.yamlErrors === '0'")
    page.click("#launch-submit")
    page.wait_for_url("**/runs/*/")
    from rolloutlab.runs.models import Run

    launched = Run.objects.latest("id")
    assert (launched.config["method"], launched.config["seed"], launched.config["rollout"]["group_size"]) == (
        "rloo",
        11,
        5,
    )


def test_the_error_summary_links_to_each_field_in_its_opened_section(page, alice, stack):
    log_in(page, "alice", "alice-password")
    page.goto("/runs/launch/?method=grpo")
    page.click("#section-optimizer > summary")
    page.fill("[name='optimizer.lr']", "-1")
    page.click("#launch-submit")
    page.wait_for_selector("#error-summary a[data-field='optimizer.lr']")
    assert page.is_visible("[name='optimizer.lr']")  # its section opens on the answer
    page.click("#section-optimizer > summary")  # closed again, the link opens it and focuses the field
    page.click("#error-summary a[data-field='optimizer.lr']")
    assert page.evaluate("document.activeElement.name") == "optimizer.lr"


def test_the_prompt_section_previews_a_training_example_as_the_model_will_read_it(page, alice, stack):
    log_in(page, "alice", "alice-password")
    page.goto("/runs/launch/")
    open_section(page, "prompt.format")
    page.wait_for_selector("#prompt-preview pre", state="visible")
    question = page.get_attribute("#prompt-preview", "data-question")
    assert question and page.inner_text("#prompt-preview pre") == question  # the tiny model reads the bare question
    open_section(page, "task.name")
    page.select_option("[name='task.name']", "word-problems")
    page.fill("[name='prompt.system']", "Be brief.")
    page.dispatch_event("[name='prompt.system']", "change")
    page.wait_for_function("document.querySelector('#prompt-preview pre').textContent.startsWith('Be brief.')")
    question = page.get_attribute("#prompt-preview", "data-question")
    assert question.endswith("?") and page.inner_text("#prompt-preview pre") == f"Be brief.\n\n{question}"
