"""Runs stored before components (then tasks, models and executors) owned their knobs still load, and rerun as
they ran."""

import importlib
import json
from pathlib import Path

from django.apps import apps

from rolloutlab.runs.models import Run
from tests.conftest import project_of
from workers.config import METHODS, RunConfig, resolve

migration = importlib.import_module("rolloutlab.runs.migrations.0002_component_owned_knobs")
kinds_migration = importlib.import_module("rolloutlab.runs.migrations.0009_kind_owned_knobs")
FLAT_CONFIGS = Path(__file__).parents[2] / "offline" / "engine" / "data" / "flat_configs.json"
FLAT = json.loads(FLAT_CONFIGS.read_text())["configs"]


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


def test_runs_stored_with_flat_task_model_and_resources_sections_load_after_the_migration(db, alice):
    """Real configs of the code before the switch, stored as it stored them; the migration runs over the table."""
    project = project_of(alice)
    runs = {name: Run.objects.create(project=project, name=name, owner=alice, config=old["config"],
                                     config_hash=old["config_hash"]) for name, old in FLAT.items()}  # fmt: skip
    script = {"my_knob": 3, "task": {"digits": 9}}  # an external run's config is its script's own: left alone
    external = Run.objects.create(project=project, name="x", owner=alice, config=script, config_hash="0" * 64,
                                  kind="external")  # fmt: skip
    kinds_migration.forwards(apps, None)
    for name, run in runs.items():
        run.refresh_from_db()
        cfg = RunConfig.model_validate(run.config)  # what the executor, a resume and the run page do
        assert run.config_hash == FLAT[name]["config_hash"], "the recorded identity of the launch stays"
        if not name.startswith("inert-"):
            assert cfg.config_hash() == run.config_hash, name
    assert "digits" not in Run.objects.get(id=runs["jsonl"].id).config["task"]
    assert "rollout_actors" not in Run.objects.get(id=runs["inert-actors-on-local"].id).config["resources"]
    assert Run.objects.get(id=runs["ray-two-nodes"].id).config["resources"]["nodes"] == 2
    external.refresh_from_db()
    assert external.config == script
