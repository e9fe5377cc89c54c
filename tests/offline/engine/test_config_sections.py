"""The task, model and resources sections: each kind owns its knobs, old configs upgrade, old hashes hold."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from workers.config import SECTION_KINDS, ConfigError, RunConfig, json_schema, load_config, resolve, upgrade
from workers.config.legacy import FLAT_DEFAULTS

FLAT = json.loads((Path(__file__).parent / "data" / "flat_configs.json").read_text())["configs"]
REFUSED = {"inert-digits-on-a-file": "task.digits", "inert-actors-on-local": "resources.rollout_actors"}


def test_a_section_holds_the_knobs_of_its_kind_only():
    stored = resolve({"task": {"name": "jsonl", "path": "/d/train.jsonl"}, "model": {"name": "/d/m"}}).model_dump()
    assert stored["task"] == {"name": "jsonl", "path": "/d/train.jsonl", "eval_path": None,
                              "question_field": "question", "answer_field": "answer", "verifier": "numeric",
                              "answer_position": "last", "extraction": "strict"}  # fmt: skip
    assert stored["model"] == {"name": "/d/m", "dtype": "float32", "lora_rank": 0, "lora_alpha": 32.0,
                               "lora_target_modules": "all-linear", "attn_implementation": "sdpa",
                               "gradient_checkpointing": False, "autocast": "none"}  # fmt: skip
    assert set(stored["resources"]) == {"executor", "device", "threads", "gpus", "wall_time_s"}
    ray = resolve({"resources": {"executor": "ray", "rollout_actors": 3}}).resources
    assert ray.rollout_actors == 3 and ray.nodes == 1
    assert "shortcut_share" in resolve({"task": {"name": "chain"}}).model_dump()["task"]
    assert "shortcut_share" not in resolve({}).model_dump()["task"]


def test_a_knob_of_another_kind_is_refused_naming_the_field():
    with pytest.raises(ConfigError) as err:
        resolve({"model": {"name": "/d/m", "hidden_size": 64}})
    assert err.value.fields == {"model.hidden_size": "model 'pretrained' has no knob hidden_size, and this config "
                                "sets it to 64: only tiny has it"}  # fmt: skip
    with pytest.raises(ConfigError, match=r"task.path: task 'countdown' has no knob path.*only jsonl and parquet"):
        resolve({"task": {"name": "countdown", "path": "/d/x.jsonl"}})
    with pytest.raises(ConfigError) as err:  # a key no kind ever had is the schema's to name
        resolve({"task": {"name": "jsonl", "path": "/d/x.jsonl", "bogus": 1}})
    assert err.value.fields["task.bogus"].startswith("not a knob of task 'jsonl'; valid: answer_field, answer_position")


def test_an_unknown_kind_lists_the_valid_ones_under_its_switch():
    with pytest.raises(ConfigError) as err:
        resolve({"task": {"name": "sudoku"}, "resources": {"executor": "slurm"}})
    assert err.value.fields == {
        "task.name": "unknown task 'sudoku'; valid: arith, chain, countdown, grid, jsonl, lookup, parquet, "
        "word-problems",
        "resources.executor": "unknown resources.executor 'slurm'; valid: local, ray",
    }


@pytest.mark.parametrize("name", sorted(set(FLAT) - set(REFUSED)))
def test_a_config_stored_before_the_switch_loads_with_the_hash_it_had(name, tmp_path):
    old = FLAT[name]
    assert RunConfig.model_validate(upgrade(old["config"])).config_hash() == old["config_hash"]
    path = tmp_path / "old.yaml"  # an old run directory's config.yaml, read by the loader
    path.write_text(yaml.safe_dump(old["config"]))
    assert load_config(path).config_hash() == old["config_hash"]


@pytest.mark.parametrize("name, field", sorted(REFUSED.items()))
def test_an_old_config_that_set_a_knob_its_kind_never_read_is_refused_unless_it_already_ran(name, field):
    old = FLAT[name]["config"]
    with pytest.raises(ConfigError) as err:
        upgrade(old)
    assert list(err.value.fields) == [field]
    ran = RunConfig.model_validate(upgrade(old, history=True))  # a stored run: the inert knob goes
    assert field.split(".")[1] not in ran.model_dump()[field.split(".")[0]]


def test_upgrade_drops_only_knobs_at_their_old_default_and_leaves_the_rest_to_validation():
    old = {"task": {"name": "jsonl", "path": "p", "digits": 1, "operators": "+-", "bogus": 2}, "seed": 3}
    assert upgrade(old) == {"task": {"name": "jsonl", "path": "p", "bogus": 2}, "seed": 3}
    assert old["task"]["digits"] == 1  # the caller's dict is left as it was
    assert upgrade({"task": {"name": "sudoku", "digits": 4}}) == {"task": {"name": "sudoku", "digits": 4}}
    with pytest.raises(ConfigError, match=r"resources.executor: 'local' runs on one machine, and nodes is 3"):
        upgrade({"resources": {"nodes": 3}})


def test_the_frozen_flat_defaults_are_the_defaults_of_the_kinds_that_own_them():
    """Each knob of legacy.py is some kind's, with the same default: a config that leaves it unset hashes the same
    whether the knob was dropped or not."""
    for section, flat in FLAT_DEFAULTS.items():
        for knob, default in flat.items():
            owners = [m for m in SECTION_KINDS[section].values() if knob in m.model_fields]
            assert owners, f"{section}.{knob}"
            assert all(m.model_fields[knob].default == default for m in owners), f"{section}.{knob}"


def test_an_override_that_changes_a_kind_takes_none_of_the_file_knobs_of_that_section(tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text("model: {hidden_size: 32, heads: 2}\ntask: {name: chain, shortcut_share: 0.3}\n")
    cfg = load_config(path, ["model.name=/d/m", "task.name=jsonl", "task.path=/d/x.jsonl"])
    assert cfg.model.model_dump() == {"name": "/d/m", "dtype": "float32", "lora_rank": 0, "lora_alpha": 32.0,
                                      "lora_target_modules": "all-linear", "attn_implementation": "sdpa",
                                      "gradient_checkpointing": False, "autocast": "none"}  # fmt: skip
    assert cfg.task.name == "jsonl" and cfg.task.path == "/d/x.jsonl"
    assert load_config(path, ["task.operands=4"]).task.shortcut_share == 0.3  # the same kind keeps them


def test_the_schema_lists_each_kind_of_the_switched_sections_with_its_knobs():
    schema = json_schema()
    assert schema["x-switches"]["resources"] == {"knob": "executor", "default": "local", "other": None}
    assert schema["x-switches"]["model"]["other"] == "pretrained"
    pretrained = [
        "attn_implementation",
        "autocast",
        "dtype",
        "gradient_checkpointing",
        "lora_alpha",
        "lora_rank",
        "lora_target_modules",
    ]
    assert schema["x-components"]["model"]["pretrained"]["knobs"] == pretrained
    assert schema["x-components"]["model"]["smollm2-135m-instruct"]["knobs"] == pretrained
    assert "shortcut_share" in schema["x-components"]["task"]["chain"]["knobs"]
    assert "rollout_actors" in schema["x-components"]["resources"]["ray"]["knobs"]
    for kinds in schema["x-components"].values():
        for about in kinds.values():
            assert about["$ref"].split("/")[-1] in schema["$defs"]


def test_every_kind_knob_has_a_description():
    for section in ("model", "task", "resources"):
        for kind, model in SECTION_KINDS[section].items():
            for knob, field in model.model_fields.items():
                assert field.description, f"{section}.{knob} of {kind}"


def test_the_tasks_import_no_config():
    """config reads the tasks' declarations (workers/tasks/knobs.py); the tasks never read the config's code."""
    probe = "import sys, workers.tasks; print(sorted(m for m in sys.modules if m.startswith('workers.config')))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_bundle_exported_before_the_switch_imports_with_its_hash():
    """The CLI's --from-bundle and the platform's import both resolve the bundle's config: it is upgraded first."""
    from tests.offline.engine.bundles import small_bundle
    from workers.bundle import read_bundle

    old = FLAT["jsonl"]
    bundle = read_bundle(small_bundle(config=old["config"]))
    assert bundle.config["task"]["digits"] == 1  # the flat shape, as it was signed
    assert load_config(None, base=bundle.config).config_hash() == old["config_hash"]
