"""RunConfig: validation messages that name the field, presets, overrides, hash, schema."""

import json

import pytest

from workers.config import METHODS, RunConfig, apply_override, json_schema, load_config, resolve
from workers.errors import ConfigError


def test_defaults_validate_and_hash_is_stable():
    a, b = RunConfig(), RunConfig()
    assert a.config_hash() == b.config_hash()
    assert len(a.config_hash()) == 64


def test_the_wall_time_limit_leaves_the_hash_alone():
    """resources.wall_time_s bounds the execution, not the computation: hashes from before it still hold."""
    # RunConfig() since the defaults became a first run that learns (64 prompts, two minibatches, 200 steps, an
    # evaluation every 20) and objective.behaviour_is_bound was added (a knob added with its default changes every
    # hash: the computation a config names now has one more choice, made explicit; before, schedule.length_buckets)
    pinned = "f9e752c6fa019d52996ce3a019c1eebfd2dd63933e4847ddf0c2634ebd4f44a6"
    assert RunConfig().config_hash() == pinned
    assert resolve({"resources": {"wall_time_s": 60}}).config_hash() == pinned
    # where the actors are placed changes nothing they compute; how many there are does (one generator each)
    on_ray = resolve({"resources": {"executor": "ray"}}).config_hash()
    assert resolve({"resources": {"executor": "ray", "actor_cpus": 0.5, "actor_gpus": 1}}).config_hash() == on_ray
    assert resolve({"resources": {"executor": "ray", "nodes": 2}}).config_hash() == on_ray != pinned
    assert resolve({"resources": {"executor": "ray", "rollout_actors": 3}}).config_hash() != on_ray
    # the actors' knobs are ray's alone: an old local config holding them at their defaults hashes as it did,
    # and one asking for actors a local run would not place is refused, naming the knob
    assert resolve({"resources": {"rollout_actors": 2, "actor_cpus": 1.0, "nodes": 1}}).config_hash() == pinned
    with pytest.raises(ConfigError, match=r"resources.rollout_actors: resources 'local' has no knob rollout_actors"):
        resolve({"resources": {"rollout_actors": 3}})
    assert resolve({"resources": {"wall_time_s": 60}}).resources.wall_time_s == 60


def test_hash_changes_with_any_knob():
    assert resolve({"seed": 1}).config_hash() != resolve({"seed": 2}).config_hash()
    assert resolve({"rollout": {"top_p": 0.9}}).config_hash() != RunConfig().config_hash()


def test_canonical_json_sorts_keys_so_key_order_does_not_matter():
    a = resolve({"seed": 3, "rollout": {"group_size": 4, "temperature": 0.7}})
    b = resolve({"rollout": {"temperature": 0.7, "group_size": 4}, "seed": 3})
    assert a.canonical_json() == b.canonical_json()


def test_method_preset_sets_its_knobs_and_the_user_overrides_them():
    cfg = resolve({"method": "dapo"})
    assert cfg.objective.clip_high == 0.28 and cfg.filter.name == "dynamic-sampling"
    cfg = resolve({"method": "dapo", "objective": {"clip_high": 0.3}})
    assert cfg.objective.clip_high == 0.3
    assert cfg.objective.aggregation == "token-mean"  # the rest of the preset stays


def test_every_method_preset_resolves():
    for name in METHODS:
        assert resolve({"method": name}).method == name


def test_unknown_method_lists_the_valid_ones():
    from workers.config import METHODS

    with pytest.raises(ConfigError) as err:
        resolve({"method": "ppo"})
    assert f"method: unknown method 'ppo'; valid: {', '.join(sorted(METHODS))}" in str(err.value)


def test_unknown_knob_names_the_field_and_the_valid_knobs():
    with pytest.raises(ConfigError) as err:
        resolve({"rollout": {"groupsize": 4}})
    assert "rollout.groupsize: unknown knob; valid: " in str(err.value)
    assert "group_size" in str(err.value)


def test_unknown_section_is_rejected():
    with pytest.raises(ConfigError, match="trainer: unknown knob"):
        resolve({"trainer": {}})


def test_group_size_below_two_is_rejected():
    with pytest.raises(ConfigError, match=r"rollout.group_size: .*greater than or equal to 2 \(got 1\)"):
        resolve({"rollout": {"group_size": 1}})


def test_negative_learning_rate_is_rejected():
    with pytest.raises(ConfigError, match=r"optimizer.lr: .*greater than 0 \(got -0.1\)"):
        resolve({"optimizer": {"lr": -0.1}})


def test_unknown_stage_component_lists_the_valid_names():
    with pytest.raises(ConfigError, match=r"unknown advantage estimator 'mean'; valid: .*group-mean, group-median"):
        resolve({"advantage": {"name": "mean"}})


def test_unknown_reward_function_is_rejected():
    with pytest.raises(ConfigError, match=r"reward.weights: .*unknown reward function 'speed'"):
        resolve({"reward": {"weights": {"speed": 1.0}}})


def test_file_task_needs_a_path():
    with pytest.raises(ConfigError, match="task: .*needs task.path"):
        resolve({"task": {"name": "jsonl"}})


def test_heads_must_divide_width():
    with pytest.raises(ConfigError, match=r"model: heads \(3\) must divide hidden_size \(128\)"):
        resolve({"model": {"heads": 3}})


def test_override_parses_values_as_yaml():
    raw = {}
    apply_override(raw, "seed=7")
    apply_override(raw, "optimizer.lr=1e-4")
    apply_override(raw, "schedule.save_final=false")
    apply_override(raw, "reward.weights.format=0.5")
    cfg = resolve(raw)
    assert cfg.seed == 7 and cfg.optimizer.lr == 1e-4 and cfg.schedule.save_final is False
    assert cfg.reward.weights == {"correct": 1.0, "format": 0.5} or cfg.reward.weights == {"format": 0.5}


def test_override_without_equals_is_an_error():
    with pytest.raises(ConfigError, match="--set expects key.path=value"):
        apply_override({}, "seed")


def test_load_config_applies_file_then_overrides(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("method: rloo\nseed: 3\nrollout:\n  group_size: 4\n")
    cfg = load_config(path, ["seed=9"])
    assert cfg.seed == 9 and cfg.rollout.group_size == 4 and cfg.advantage.name == "leave-one-out"


def test_malformed_yaml_names_file_and_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("seed: 1\nrollout:\n  group_size: [4\n")
    with pytest.raises(ConfigError, match=r"bad.yaml:\d+: not valid YAML"):
        load_config(path)


def test_missing_config_file_is_named(tmp_path):
    with pytest.raises(ConfigError, match="nope.yaml: no such config file"):
        load_config(tmp_path / "nope.yaml")


def test_json_schema_has_descriptions_and_methods():
    schema = json_schema()
    json.dumps(schema)  # serialisable
    rollout = schema["$defs"]["RolloutConfig"]["properties"]
    assert rollout["group_size"]["minimum"] == 2
    assert rollout["group_size"]["description"]
    assert set(schema["x-methods"]) == set(METHODS)


def test_every_field_has_a_description():
    """The descriptions are the launch form's help text: none may be missing."""
    for name, section in RunConfig.model_fields.items():
        assert section.description, name
        model = section.annotation
        if isinstance(model, type) and hasattr(model, "model_fields"):
            for knob, field in model.model_fields.items():
                assert field.description, f"{name}.{knob}"


def test_every_component_knob_has_a_description():
    from workers.config import STAGE_KNOBS

    for stage, members in STAGE_KNOBS.items():
        for name, model in members.items():
            for knob, field in model.model_fields.items():
                assert field.description, f"{stage}.{knob} of {name}"


def test_a_stage_has_the_knobs_of_its_chosen_component_only():
    assert resolve({"filter": {"name": "dynamic-sampling", "max_rounds": 2}}).filter.max_rounds == 2
    with pytest.raises(ConfigError, match=r"filter.max_rounds: not a knob of filter 'none'; valid: name, overlong"):
        resolve({"filter": {"name": "none", "max_rounds": 2}})
    assert "max_rounds" not in resolve({}).model_dump()["filter"]  # nor in the stored config


def test_a_stage_section_without_a_name_keeps_the_default_component():
    cfg = resolve({"objective": {"clip_high": 0.3}, "filter": {"overlong": True}})
    assert cfg.objective.name == "token-clip" and cfg.objective.clip_high == 0.3 and cfg.filter.name == "none"


def test_choosing_another_component_than_the_preset_drops_the_preset_knobs_of_that_stage():
    cfg = resolve({"method": "dapo", "filter": {"name": "none"}})  # dapo's preset sets filter.signal
    assert cfg.filter.name == "none" and cfg.objective.clip_high == 0.28  # the other stages keep the preset
    cfg = load_config(None, ["method=mc-grpo", "advantage.name=group-mean"])
    assert cfg.advantage.name == "group-mean" and cfg.advantage.scale == "std"


def test_an_unknown_component_lists_the_valid_ones():
    with pytest.raises(ConfigError) as err:
        resolve({"advantage": {"name": "median-ish"}})
    from workers.pipeline.advantage import ADVANTAGES

    assert err.value.fields == {
        "advantage.name": f"unknown advantage estimator 'median-ish'; valid: {', '.join(ADVANTAGES.names())}"
    }
    assert all(name in err.value.fields["advantage.name"] for name in ("group-mean", "group-median", "leave-one-out"))


def test_the_schema_shows_each_stage_as_a_choice_of_components():
    schema = json_schema()
    assert schema["properties"]["filter"]["discriminator"]["propertyName"] == "name"
    assert schema["x-components"]["filter"]["dynamic-sampling"]["knobs"] == ["max_rounds", "overlong", "signal"]
    assert schema["x-components"]["filter"]["none"]["knobs"] == ["overlong"]


@pytest.mark.parametrize(
    "section, knob, value",
    [("eval", "samples", 1025), ("control", "prior", 1e7), ("control", "period", 10**7), ("control", "prior", 0)],
)
def test_the_new_knobs_are_bounded(section, knob, value):
    name = {"control": {"prior": "mopps", "period": "siri"}}.get(section, {}).get(knob)
    raw = {section: {knob: value, **({"name": name} if name else {})}}
    with pytest.raises(ConfigError, match=rf"{section}.{knob}: Input should be"):
        resolve(raw)


def test_eval_size_must_leave_problems_to_train_on():
    with pytest.raises(ConfigError, match=r"eval.size: 150 held-out problems would leave too few of the task's 200"):
        resolve({"task": {"digits": 1, "operands": 2, "operators": "+-"}, "eval": {"size": 150}})


def test_config_errors_carry_each_field():
    with pytest.raises(ConfigError) as err:
        resolve({"rollout": {"group_size": 1}, "optimizer": {"lr": 0}, "advantage": {"name": "x"}})
    assert set(err.value.fields) >= {"rollout.group_size", "optimizer.lr"}
