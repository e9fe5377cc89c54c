"""Warnings for knobs the schedule leaves inert: declared on the knob, never an error."""

import pytest

from workers.config import resolve
from workers.knobs import Section
from workers.schedule_checks import CONDITIONS, warnings

CLIP = "objective.clip_low, objective.clip_high: cannot act"


@pytest.mark.parametrize("method", ["grpo", "gspo"])
def test_the_clip_range_is_inert_at_the_default_schedule_and_acts_with_two_passes(method):
    assert [w for w in warnings(resolve({"method": method})) if w.startswith(CLIP)]
    assert not warnings(resolve({"method": method, "schedule": {"updates_per_batch": 2}}))
    assert not warnings(resolve({"method": method, "schedule": {"minibatches": 2}}))


def test_a_component_that_trains_on_older_samples_makes_the_clip_act_on_one_pass():
    assert not warnings(resolve({"replay": {"name": "rollout-replay"}}))
    assert not warnings(resolve({"method": "april"}))


def test_a_warm_up_longer_than_the_run_is_warned_and_a_shorter_one_is_not():
    long = warnings(resolve({"optimizer": {"warmup_steps": 401}, "schedule": {"steps": 100, "minibatches": 4}}))
    assert long == ["optimizer.warmup_steps: never completes: 401 is more than the run's 400 optimizer steps "
                    "(steps x passes x minibatches)"]  # fmt: skip
    assert not warnings(resolve({"optimizer": {"warmup_steps": 400}, "schedule": {"steps": 100, "minibatches": 4}}))


def test_every_marker_names_a_known_condition():
    from workers.config import STAGE_KNOBS, RunConfig

    models = [m for members in STAGE_KNOBS.values() for m in members.values()]
    models += [f.annotation for f in RunConfig.model_fields.values() if isinstance(f.annotation, type)]
    markers = {
        (f.json_schema_extra or {}).get("acts_when")
        for model in models
        if isinstance(model, type) and issubclass(model, Section)
        for f in model.model_fields.values()
        if isinstance(f.json_schema_extra, dict)
    } - {None}
    assert markers and markers <= set(CONDITIONS)
