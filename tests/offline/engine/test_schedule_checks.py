"""Warnings for knobs the schedule leaves inert: declared on the knob, never an error."""

import pytest

from workers.config import resolve
from workers.knobs import Section
from workers.schedule_checks import CONDITIONS, warnings

CLIP = "objective.clip_low, objective.clip_high: cannot act"


ONE_UPDATE = {"updates_per_batch": 1, "minibatches": 1}


@pytest.mark.parametrize("method", ["grpo", "gspo"])
def test_the_clip_range_is_inert_with_one_update_per_batch_and_acts_with_two(method):
    assert [w for w in warnings(resolve({"method": method, "schedule": ONE_UPDATE})) if w.startswith(CLIP)]
    assert not warnings(resolve({"method": method, "schedule": {**ONE_UPDATE, "updates_per_batch": 2}}))
    assert not warnings(resolve({"method": method, "schedule": {**ONE_UPDATE, "minibatches": 2}}))


@pytest.mark.parametrize("method, minibatches", [("dapo", 16), ("gspo", 4), ("dr-grpo", 8), ("minpro", 4)])
def test_presets_whose_mechanism_acts_off_policy_bring_their_papers_schedule(method, minibatches):
    cfg = resolve({"method": method})
    assert cfg.schedule.minibatches == minibatches and not warnings(cfg)


@pytest.mark.parametrize("method, component", [("gspo", "sequence-clip"), ("minpro", "min-prefix-ratio"),
                                               ("vcpo", "variance-controlled")])  # fmt: skip
def test_an_objective_that_only_reshapes_ratios_is_named_when_the_schedule_leaves_them_at_1(method, component):
    found = warnings(resolve({"method": method, "schedule": ONE_UPDATE}))
    assert found[0].startswith(f"objective '{component}': cannot act: one pass of one minibatch")


def test_a_kl_estimator_is_warned_only_when_chosen_and_the_kl_term_has_no_weight():
    two = {"minibatches": 2}
    chosen = warnings(resolve({"objective": {"kl_estimator": "k2"}, "schedule": two}))
    assert chosen == ["objective.kl_estimator: cannot act: objective.kl_coef = 0, so the loss has no KL term; "
                      "give it a weight > 0 (e.g. 0.001)"]  # fmt: skip
    assert not warnings(resolve({"objective": {"kl_estimator": "k2", "kl_coef": 0.01}, "schedule": two}))
    assert not warnings(resolve({"schedule": two}))  # the default estimator, never chosen: nothing to say
    spelled_out = {"objective": {"kl_estimator": "k3", "kl_coef": 0.0}, "schedule": two}  # as the form posts it
    assert not warnings(resolve(spelled_out))


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
