"""Runs stored before components owned their knobs still load, and rerun as they ran."""

import importlib

from workers.config import METHODS, RunConfig, resolve

migration = importlib.import_module("rolloutlab.runs.migrations.0002_component_owned_knobs")


def flat_config(method):
    """A config as stored before: every stage carried every knob of its section."""
    config = resolve({"method": method}).model_dump(mode="json")
    flat_filter = {"name": config["filter"]["name"], "max_rounds": 4}
    flat_advantage = {"name": config["advantage"]["name"], "scale": config["advantage"]["scale"], "eps": 1e-4}
    config.update(filter=flat_filter, advantage=flat_advantage)
    for stage in ("objective",):
        config[stage].pop("old_logprobs")
    return config


def test_every_preset_stored_the_old_way_validates_after_the_migration():
    for method in METHODS:
        old = flat_config(method)
        RunConfig.model_validate(migration.owned_only(old))


def test_an_old_dynamic_sampling_run_keeps_the_reward_signal_it_ran_with():
    migrated = RunConfig.model_validate(migration.owned_only(flat_config("dapo")))
    assert migrated.filter.name == "dynamic-sampling" and migrated.filter.signal == "reward"
    assert migrated.filter.max_rounds == 4
    kept = RunConfig.model_validate(migration.owned_only(flat_config("grpo")))
    assert kept.filter.model_dump() == {"name": "none", "overlong": False}
