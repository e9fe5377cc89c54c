"""Resume checkpoints: a run stopped after any step and resumed from its last checkpoint reports, from there on,
exactly the metrics, samples and data fingerprint of the same run undisturbed."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel

from tests.configs import small_config
from workers.config import method_names
from workers.errors import ConfigError
from workers.reporting import MemoryReporter, is_deterministic_metric
from workers.training import checkpoint
from workers.training.trainer import Trainer

STEPS, EVERY, STOP = 9, 3, 7  # checkpoints after steps 3 and 6; stopped after step 7, so step 7 is run twice

# one preset per kind of state a step carries to the next: none beyond the shared ones (grpo), a replay buffer
# (rorecomp), partial rollouts (april), a control stage's estimates (xrpo, dars, mopps), a learned predictor (arrol),
# an objective's averaged proximal policy (ppo-ewma), an advantage stage's estimator trained online (spa-rl)
METHODS = ["grpo", "rorecomp", "april", "xrpo", "dars", "mopps", "arrol", "trace", "ppo-ewma", "spa-rl"]
METHODS_ALL = method_names()
# and april's pool of episodes (the environments' state pickled with it), beside its pool of completions
CASES = [(method, None) for method in METHODS] + [("april", "calculator")]


def config(method: str, environment: str | None = None, **schedule):
    sections = {"environment": {"name": environment}} if environment else {}
    return small_config(method=method, schedule={"steps": STEPS, "checkpoint_every": EVERY, **schedule},
                        eval={"every": 3}, **sections)  # fmt: skip


def deterministic(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in row.items() if is_deterministic_metric(k)} for row in rows]


def data_stream(directory) -> dict:
    return json.loads((directory / "data_stream.json").read_text())


@pytest.mark.parametrize(("method", "environment"), CASES)
def test_a_run_resumed_from_its_checkpoint_reports_what_the_undisturbed_run_reports(method, environment, tmp_path):
    whole, cut = MemoryReporter(), MemoryReporter(stop_after=1 + STOP)  # the evaluation at step 0, then 7 steps
    assert Trainer(config(method, environment), whole, artifacts_dir=tmp_path / "whole").run() == "succeeded"
    assert Trainer(config(method, environment), cut, artifacts_dir=tmp_path / "cut").run() == "cancelled"
    point = checkpoint.latest_checkpoint(tmp_path / "cut")
    assert point is not None and point.step == 6  # only the newest is kept
    assert [p.name for p in (tmp_path / "cut" / checkpoint.DIRECTORY).iterdir()] == [point.path.name]

    resumed = MemoryReporter()
    assert (
        Trainer(config(method, environment), resumed, artifacts_dir=tmp_path / "cut").run(resume=point) == "succeeded"
    )
    assert [row["step"] for row in resumed.metric_rows] == [7, 8, 9]  # the evaluation at 9 is in its step's row
    assert deterministic(resumed.metric_rows) == deterministic(whole.metric_rows[-3:])
    assert [r for r in resumed.sample_rows] == [r for r in whole.sample_rows if r["step"] > 6]
    assert [r for r in resumed.group_rows] == [r for r in whole.group_rows if r["step"] > 6]
    assert data_stream(tmp_path / "cut") == data_stream(tmp_path / "whole")
    assert f"resumed from the checkpoint of step {point.step}" in resumed.lines


def test_checkpoints_come_by_model_size_unless_set_and_never_when_zero(tmp_path):
    assert checkpoint.checkpoint_interval(None, 10_000) == 10
    assert checkpoint.checkpoint_interval(None, 500_000_000) == 25
    assert checkpoint.checkpoint_interval(None, 7_000_000_000) == 50
    assert checkpoint.checkpoint_interval(4, 7_000_000_000) == 4
    Trainer(config("grpo", checkpoint_every=0), MemoryReporter(), artifacts_dir=tmp_path).run()
    assert checkpoint.latest_checkpoint(tmp_path) is None


def test_the_knob_is_not_part_of_what_the_run_computes():
    assert config("grpo", checkpoint_every=2).config_hash() == config("grpo", checkpoint_every=None).config_hash()


def test_a_checkpoint_of_another_config_is_refused(tmp_path):
    Trainer(config("grpo"), MemoryReporter(), artifacts_dir=tmp_path).run()
    point = checkpoint.latest_checkpoint(tmp_path)
    other = Trainer(small_config(method="grpo", seed=5, schedule={"steps": STEPS}), MemoryReporter())
    with pytest.raises(ConfigError, match="checkpoint of another config"):
        other.run(resume=point)


def test_a_half_written_checkpoint_is_never_taken_for_one(tmp_path):
    Trainer(config("grpo"), MemoryReporter(), artifacts_dir=tmp_path).run()
    directory = tmp_path / checkpoint.DIRECTORY
    (directory / "step-00000012.pt.partial").write_bytes(b"cut off mid-write")
    assert checkpoint.latest_checkpoint(tmp_path).step == 9


def test_an_asynchronous_run_writes_none(tmp_path):
    Trainer(config("grpo", max_staleness=1), MemoryReporter(), artifacts_dir=tmp_path).run()
    assert checkpoint.latest_checkpoint(tmp_path) is None


@pytest.mark.parametrize("method", METHODS_ALL)
def test_every_presets_components_are_saved_and_loaded_holding_the_resumed_configs_own_objects(method):
    from workers.config import load_config
    from workers.pipeline.stages import build_stages

    cfg, again = load_config(overrides=[f"method={method}"]), load_config(overrides=[f"method={method}"])
    stages = checkpoint.thaw_components(checkpoint.freeze_components(build_stages(cfg), cfg), again)
    configs = {id(obj) for obj in checkpoint.config_objects(again).values()}
    for component in vars(stages).values():  # a config object a component keeps is the resumed config's own
        kept = [v for v in vars(component).values() if isinstance(v, BaseModel)]
        assert all(id(v) in configs for v in kept), (method, component)


@pytest.mark.parametrize("module, name, now", [
    ("workers.pipeline.control.dars", "DifficultyAdaptiveRollouts", "workers.pipeline.control.dars.component"),
    ("workers.pipeline.generate.april", "PooledGroup", "workers.pipeline.generate.april.component"),
    ("workers.pipeline.objective.offpolicy", "TruncatedIS", "workers.pipeline.objective.truncated_is.component"),
    ("workers.pipeline.objective.base", "TokenClip", "workers.pipeline.objective.token_clip.component"),
    ("workers.pipeline.replay.base", "NoReplay", "workers.pipeline.replay.none.component"),
])  # fmt: skip
def test_a_checkpoint_written_before_components_were_folders_still_loads(module, name, now):
    """A run paused before the move resumes after it: its pickle names each class by the module it lived in."""
    from workers.config import load_config

    cfg = load_config()
    legacy = b"\x80\x04c" + f"{module}\n{name}\n".encode() + b"."  # GLOBAL module name, the pickle of a class
    loaded = checkpoint.thaw_components(legacy, cfg)
    assert loaded.__name__ == name and loaded.__module__ == now
