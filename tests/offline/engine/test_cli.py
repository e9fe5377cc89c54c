"""The command line, run as a user runs it: real subprocesses, real files."""

import json
import os
import subprocess
import sys
import time

import pytest
import yaml

from tests.conftest import REPO
from workers.config import METHODS


def cli(*args, cwd=REPO):
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.run([sys.executable, "-m", "workers", *args], capture_output=True, text=True, cwd=cwd, env=env)


SMALL = {
    "method": "grpo",
    "model": {"hidden_size": 32, "layers": 2, "heads": 2, "warmup_steps": 60},
    "task": {"name": "arith", "digits": 1, "operands": 2, "operators": "+-"},
    "rollout": {"group_size": 4, "prompts_per_step": 4, "max_new_tokens": 4},
    "schedule": {"steps": 3},
    "eval": {"every": 3, "size": 16, "k": 2},
    "resources": {"device": "cpu"},
}


@pytest.fixture
def small_yaml(tmp_path):
    path = tmp_path / "small.yaml"
    path.write_text(yaml.safe_dump(SMALL))
    return path


def test_methods_lists_every_preset_with_a_description():
    out = cli("methods")
    assert out.returncode == 0
    lines = [line for line in out.stdout.strip().splitlines() if not line.startswith(" ")]  # indented: warnings
    assert [line.split()[0] for line in lines] == sorted(METHODS)
    assert all(len(line.split(None, 1)[1]) > 20 for line in lines)


def warned(stdout: str) -> dict[str, list[str]]:
    """preset -> the warnings printed under it."""
    found, preset = {}, None
    for line in stdout.splitlines():
        if line.startswith(" "):
            found[preset].append(line.strip())
        else:
            preset = line.split()[0]
            found[preset] = []
    return found


def test_methods_warns_of_an_inert_clip_range_on_one_update_per_batch_but_not_with_two_passes():
    default = warned(cli("methods").stdout)
    assert default["grpo"] == []  # the default schedule: two minibatch updates per batch, the second off-policy
    one_update = warned(cli("methods", "--set", "schedule.minibatches=1").stdout)
    assert one_update["grpo"] and one_update["grpo"][0].startswith("warning: objective.clip_low, objective.clip_high")
    assert one_update["gspo"][0].startswith("warning: objective 'sequence-clip': cannot act")
    assert one_update["dots"] == []  # its replayed groups are older samples: their ratios are not 1
    two_passes = cli("methods", "--set", "schedule.updates_per_batch=2")
    assert two_passes.returncode == 0
    assert all(not w for w in warned(two_passes.stdout).values())


def test_run_writes_metrics_config_environment_and_checkpoint(small_yaml, tmp_path):
    out_dir = tmp_path / "run"
    out = cli("run", str(small_yaml), "--out", str(out_dir), "--set", "seed=7")
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in (out_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1, 2, 3]
    assert "reward/mean" in rows[1] and "eval/pass@1" in rows[0] and "eval/pass@1" in rows[3]
    assert yaml.safe_load((out_dir / "config.yaml").read_text())["seed"] == 7
    assert json.loads((out_dir / "environment.json").read_text())["seeds"]["run"] == 7
    assert (out_dir / "checkpoints" / "step-3" / "config.json").is_file()
    artifacts = [json.loads(line) for line in (out_dir / "artifacts.jsonl").read_text().splitlines()]
    assert {a["kind"] for a in artifacts} == {"environment", "checkpoint", "data-stream"}
    assert all(len(a["sha256"]) == 64 for a in artifacts)
    assert json.loads((out_dir / "status.jsonl").read_text().splitlines()[-1])["state"] == "succeeded"
    assert "step" in out.stderr and "pass@1" in out.stderr  # the progress bar


def test_validate_prints_the_resolved_config_and_hash(small_yaml):
    out = cli("validate", str(small_yaml), "--set", "method=dapo")
    assert out.returncode == 0
    assert "clip_high: 0.28" in out.stdout and "# config hash: " in out.stdout


def test_schema_is_json():
    out = cli("schema")
    assert json.loads(out.stdout)["title"] == "RunConfig"


def write_jsonl(path, lines):
    path.write_text("\n".join(lines) + "\n")


GOOD_LINE = json.dumps({"question": "1+1?", "answer": "#### 2"})


@pytest.mark.parametrize(
    "overrides, expected",
    [
        (["method=ppo"], f"method: unknown method 'ppo'; valid: {', '.join(sorted(METHODS))}"),
        (["rollout.groupsize=4"], "rollout.groupsize: unknown knob; valid: backend, group_size"),
        (["rollout.group_size=1"], "rollout.group_size: Input should be greater than or equal to 2 (got 1)"),
        (["optimizer.lr=-0.001"], "optimizer.lr: Input should be greater than 0 (got -0.001)"),
        (["task.name=jsonl", "task.path=/no/such/file.jsonl"], "/no/such/file.jsonl: no such dataset file"),
        (["task.name=jsonl", "task.path=BAD"], "bad.jsonl:3: not valid JSON"),
        (["model.name=/no/such/model"], "model.name: '/no/such/model' is neither 'tiny' nor a directory"),
    ],
)
def test_bad_input_is_one_clear_line_exit_2_and_nothing_written(small_yaml, tmp_path, overrides, expected):
    bad = tmp_path / "bad.jsonl"
    write_jsonl(bad, [GOOD_LINE, GOOD_LINE, '{"question": "x", "answer": ', GOOD_LINE])
    overrides = [o.replace("BAD", str(bad)) for o in overrides]
    out_dir = tmp_path / "out"
    args = ["run", str(small_yaml), "--out", str(out_dir)]
    for o in overrides:
        args += ["--set", o]
    out = cli(*args)
    assert out.returncode == 2
    assert out.stderr.startswith("error: ") and expected in out.stderr
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert not out_dir.exists()


def test_an_out_directory_that_holds_files_is_refused(small_yaml, tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "metrics.jsonl").write_text("{}\n")
    out = cli("run", str(small_yaml), "--out", str(tmp_path / "out"))
    assert out.returncode == 2 and "already exists and is not empty" in out.stderr
    assert (tmp_path / "out" / "metrics.jsonl").read_text() == "{}\n"


def deterministic_rows(out_dir):
    from workers.reporting import is_deterministic_metric, read_metrics

    return [
        {k: v for k, v in row.items() if is_deterministic_metric(k)} for row in read_metrics(out_dir / "metrics.jsonl")
    ]


def test_resume_goes_on_from_the_last_checkpoint_and_each_step_is_stored_once(small_yaml, tmp_path):
    every = ["--set", "schedule.steps=6", "--set", "schedule.checkpoint_every=4", "--no-progress"]
    assert cli("run", str(small_yaml), "--out", str(tmp_path / "whole"), *every).returncode == 0
    assert cli("run", str(small_yaml), "--out", str(tmp_path / "again"), *every).returncode == 0
    assert sorted(p.name for p in (tmp_path / "again" / "resume").iterdir()) == ["step-00000004.pt"]
    out = cli("run", "--resume", "--out", str(tmp_path / "again"), "--no-progress")  # steps 5 and 6 once more
    assert out.returncode == 0, out.stderr
    assert deterministic_rows(tmp_path / "again") == deterministic_rows(tmp_path / "whole")
    assert "resumed from the checkpoint of step 4" in (tmp_path / "again" / "log.txt").read_text()
    empty = cli("run", "--resume", "--out", str(tmp_path / "nothing"))
    assert empty.returncode == 2 and "holds no run" in empty.stderr


def test_unknown_command_and_missing_out_exit_2(small_yaml):
    assert cli("fly").returncode == 2
    out = cli("run", str(small_yaml))
    assert out.returncode == 2 and "--out" in out.stderr


def test_a_stop_file_cancels_a_running_training(small_yaml, tmp_path):
    fresh = tmp_path / "run"
    command = [sys.executable, "-m", "workers", "run", str(small_yaml), "--out", str(fresh)]
    proc = subprocess.Popen([*command, "--set", "schedule.steps=100000"], cwd=REPO, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and not (fresh / "metrics.jsonl").exists():
        time.sleep(0.2)
    (fresh / "STOP").write_text("")
    proc.wait(timeout=60)
    assert proc.returncode == 130
    assert json.loads((fresh / "status.jsonl").read_text().splitlines()[-1])["state"] == "cancelled"
