"""Audit on the engine side: stream comparison, record differences, bundles and their seals."""

import json
import os
import zipfile
from pathlib import Path

import pytest
import yaml

from tests.conftest import small_config
from tests.offline.engine.test_cli import SMALL, cli
from workers import repro
from workers.audit import compare_streams, diff_records
from workers.bundle import BundleError, read_bundle, write_bundle
from workers.reporting import MemoryReporter, is_deterministic_metric
from workers.training.trainer import Trainer


def test_identical_streams_are_identical_whatever_the_timings():
    a = [{"step": 1, "reward/mean": 0.5, "timing/step_s": 0.1}, {"step": 2, "reward/mean": 0.6}]
    b = [{"step": 1, "reward/mean": 0.5, "timing/step_s": 0.9}, {"step": 2, "reward/mean": 0.6}]
    assert compare_streams(a, b) == {"identical": True, "compared": 2}


def test_the_first_divergence_is_the_earliest_step_then_the_first_metric_by_name():
    a = [{"step": 1, "a": 1.0, "b": 2.0}, {"step": 2, "a": 1.0, "b": 2.0, "c": 3.0}]
    b = [{"step": 1, "a": 1.0, "b": 2.0}, {"step": 2, "a": 1.5, "b": 2.5, "c": 3.0}]
    verdict = compare_streams(a, b)
    assert (verdict["step"], verdict["metric"], verdict["original"], verdict["rerun"]) == (2, "a", 1.0, 1.5)
    assert verdict["delta"] == 0.5 and not verdict["identical"]


def test_a_missing_point_is_a_divergence():
    verdict = compare_streams([{"step": 1, "a": 1.0}, {"step": 2, "a": 2.0}], [{"step": 1, "a": 1.0}])
    assert (verdict["step"], verdict["rerun"], verdict["delta"]) == (2, None, None)


def test_record_differences_are_filed_under_their_heading():
    same = {"code": {"revision": "abc", "dirty": False}, "initial_weights_sha256": "w1"}
    a = {**same, "config": {"seed": 0, "optimizer": {"lr": 1e-3}}, "packages": {"tqdm": "4.66.0", "numpy": "2.0"},
         "gpu": {"devices": []}}  # fmt: skip
    b = {**same, "config": {"seed": 0, "optimizer": {"lr": 2e-3}}, "packages": {"tqdm": "4.67.1", "numpy": "2.0"},
         "gpu": {"devices": ["H100"]}}  # fmt: skip
    diff = diff_records(a, b)
    assert diff["config"] == [{"item": "config.optimizer.lr", "a": 1e-3, "b": 2e-3}]
    assert diff["packages"] == [{"item": "packages.tqdm", "a": "4.66.0", "b": "4.67.1"}]
    assert diff["hardware"] == [{"item": "gpu.devices", "a": [], "b": ["H100"]}]
    assert diff["code"] == [] and diff["weights"] == [] and diff["data"] == []


def test_taking_the_record_does_not_change_the_run(monkeypatch):
    def streams():
        reporter = MemoryReporter()
        Trainer(small_config(schedule={"steps": 3}, eval={"every": 3}), reporter).run()
        return [{k: v for k, v in r.items() if is_deterministic_metric(k)} for r in reporter.metric_rows]

    with_record = streams()
    monkeypatch.setattr(repro, "capture_environment", lambda cfg, **kw: {"skipped": True})
    assert streams() == with_record


def test_the_record_holds_what_produced_the_run(tmp_path):
    reporter = MemoryReporter()
    trainer = Trainer(small_config(schedule={"steps": 2}), reporter, artifacts_dir=tmp_path)
    trainer.run()
    record = trainer.environment
    # the record says what it cost; the 2-second target is bench/audit_capture.py's (a timed assertion here failed
    # only when the machine was loaded)
    assert 0 < record["capture_seconds"] < 60
    assert {"code", "packages", "torch", "gpu", "cpu", "host", "env", "seeds", "config", "config_hash",
            "dataset_fingerprint", "initial_weights_sha256", "determinism"} <= set(record)  # fmt: skip
    stream = json.loads((tmp_path / "data_stream.json").read_text())
    assert stream["examples"] == 8 and len(stream["sha256"]) == 64  # 2 steps x 4 prompts
    assert [kind for _, kind in reporter.artifacts] == ["environment", "data-stream"]


def test_the_record_names_the_processors_generation_not_only_its_model(monkeypatch):
    """The model name "AMD EPYC" names parts years apart whose step times differ twofold: the record adds family,
    model and the widest vector unit, so a card compares speeds only between runs on one generation."""
    first = Path("/proc/cpuinfo").read_text().split("\n\n", 1)[0]
    family = next(line.split(":", 1)[1].strip() for line in first.splitlines() if line.startswith("cpu family"))
    assert repro.cpu_generation().startswith(f"family {family} model ")
    monkeypatch.setattr(repro, "cpu_fields", lambda: {"cpu family": "25", "model": "17", "flags": "fpu avx2 avx512f"})
    assert repro.cpu_generation() == "family 25 model 17, avx512"
    monkeypatch.setattr(repro, "cpu_fields", lambda: {"cpu family": "23", "model": "1", "flags": "fpu avx avx2"})
    assert repro.cpu_generation() == "family 23 model 1, avx2"
    monkeypatch.setattr(repro, "cpu_fields", lambda: {})  # no /proc/cpuinfo: the model only, as before
    assert repro.cpu_generation() is None


def test_the_packages_are_read_again_once_a_folder_on_the_path_changes(tmp_path, monkeypatch):
    """The list is kept between runs of one process, but an install into a folder on the path shows in the next."""
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "rl-probe-package" not in repro.packages()
    info = tmp_path / "rl_probe_package-1.2.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: rl_probe_package\nVersion: 1.2.3\n")
    later = tmp_path.stat().st_mtime_ns + 1_000_000_000  # a second later, as an install would be on a coarse clock
    os.utime(tmp_path, ns=(later, later))
    assert repro.packages()["rl-probe-package"] == "1.2.3"


@pytest.fixture
def finished_run(tmp_path):
    config = tmp_path / "small.yaml"
    config.write_text(yaml.safe_dump({**SMALL, "schedule": {"steps": 3}}))
    assert cli("run", str(config), "--out", str(tmp_path / "run"), "--no-progress").returncode == 0
    return tmp_path / "run"


def test_a_bundle_round_trips_and_reproduces_its_run(finished_run, tmp_path):
    bundle = tmp_path / "run.zip"
    out = cli("bundle", str(finished_run), "--out", str(bundle))
    assert out.returncode == 0, out.stderr
    seal = out.stdout.split()[-1]
    assert cli("verify-bundle", str(bundle)).stdout.startswith("intact")
    opened = read_bundle(bundle)
    assert opened.sha256 == seal and opened.config["schedule"]["steps"] == 3
    assert opened.record["config_hash"] and opened.record["data_stream"]["examples"] == 12
    again = cli("run", "--from-bundle", str(bundle), "--out", str(tmp_path / "again"), "--no-progress")
    assert again.returncode == 0, again.stderr
    verdict = cli("compare-runs", str(finished_run), str(tmp_path / "again"))
    assert verdict.returncode == 0 and verdict.stdout.startswith("identical")


def test_one_changed_byte_of_the_config_is_reported_as_altered(finished_run, tmp_path):
    bundle, edited = tmp_path / "run.zip", tmp_path / "edited.zip"
    cli("bundle", str(finished_run), "--out", str(bundle))
    with zipfile.ZipFile(bundle) as source, zipfile.ZipFile(edited, "w") as target:
        for item in source.infolist():
            data = source.read(item)
            if item.filename == "config.yaml":
                data = data.replace(b"seed: 0", b"seed: 1", 1)  # one byte
            target.writestr(item, data)
    out = cli("verify-bundle", str(edited))
    assert out.returncode == 2 and "altered: config.yaml does not match its sha256" in out.stderr
    run = cli("run", "--from-bundle", str(edited), "--out", str(tmp_path / "x"))
    assert run.returncode == 2 and "altered" in run.stderr and not (tmp_path / "x").exists()


def test_bundles_are_byte_for_byte_reproducible(tmp_path):
    args = dict(config={"seed": 1}, record={"a": 1}, metrics=[{"step": 1, "metric": "m", "value": 0.5}],
                samples=[{"prompt": "p"}], artifacts=[])  # fmt: skip
    assert write_bundle(tmp_path / "a.zip", **args) == write_bundle(tmp_path / "b.zip", **args)
    assert (tmp_path / "a.zip").read_bytes() == (tmp_path / "b.zip").read_bytes()


def test_something_that_is_not_a_bundle_is_named(tmp_path):
    (tmp_path / "x.zip").write_bytes(b"not a zip")
    with pytest.raises(BundleError, match="x.zip: not a Rollout Lab bundle"):
        read_bundle(tmp_path / "x.zip")
