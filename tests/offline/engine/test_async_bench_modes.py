"""bench/async_vs_sync.py's modes are configs the trainer accepts, on every machine the bench is meant for.

The bench is run by hand, often on a machine lent for a few minutes (a GPU, 16 cores): a mode whose
overrides no longer validate would be found there, at the cost of that machine's time. So every mode is
validated here, for this machine's CPU, a 16-core CPU and a GPU, with the overrides every mode shares.
"""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from workers.config import load_config

BENCH = Path(__file__).resolve().parents[3] / "bench" / "async_vs_sync.py"


def load_bench():
    spec = importlib.util.spec_from_file_location("async_vs_sync", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SHARED = ["schedule.steps=20", "schedule.length_buckets=4", "objective.old_logprobs=sampler"]


@pytest.mark.parametrize(("cores", "device"), [(2, "cpu"), (16, "cpu"), (16, "cuda")])
def test_every_mode_validates_and_each_side_runs_as_it_says(cores, device):
    bench = load_bench()
    ways = bench.modes(cores, device, "schedule.max_staleness=1")
    assert any(name.startswith("sync") for name in ways) and any(name.startswith("async") for name in ways)
    for name, overrides in ways.items():
        cfg = load_config(bench.TESTBED, [*SHARED, *overrides])
        assert (cfg.schedule.max_staleness == 1) == name.startswith("async"), name
        assert (cfg.resources.executor == "ray") == ("Ray" in name), name
        # a CPU mode names the CPU: resources.device=auto would take a GPU where one is present
        assert cfg.resources.device == device, name
        assert cfg.objective.old_logprobs == "sampler" and cfg.schedule.length_buckets == 4, name
    if cores >= 4 and device == "cpu":
        assert load_config(bench.TESTBED, [*SHARED, *ways["async, 8 threads each"]]).resources.threads == 8


def test_weights_and_save_weights_exclude_each_other(capsys, monkeypatch, tmp_path):
    bench = load_bench()
    monkeypatch.setattr("sys.argv", ["async_vs_sync.py", "--weights", str(tmp_path), "--save-weights", str(tmp_path)])
    with pytest.raises(SystemExit):
        bench.main()
    assert "not allowed with argument" in capsys.readouterr().err


def test_without_ray_the_in_process_modes_still_run_on_both_sides(monkeypatch):
    bench = load_bench()
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError, as where it is not installed
    assert bench.ray_or_none() is None
    ways = bench.runnable(bench.modes(16, "cuda", "schedule.max_staleness=1"), None)
    assert ways and not any("Ray" in name for name in ways)
    assert {name.split()[0] for name in ways} == {"sync", "async"}


def test_the_last_line_pairs_each_side_at_its_best_overall_and_within_each_round(capsys):
    bench = load_bench()
    seen = {"sync, 1 thread": [90.0, 100.0, 80.0], "sync, 2 threads": [100.0, 120.0, 90.0],
            "async, 1 thread each": [130.0, 120.0, 140.0], "async on Ray, 1 actor": [110.0, 150.0, 100.0]}  # fmt: skip
    timings = {mode: [{"timing/step_s": 0.5}] * 3 for mode in seen}
    bench.report(seen, timings)
    last = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    # medians: sync 90 / 100, async 130 / 110: each side's best median
    assert (last["ours"], last["peer"], last["ratio"]) == (130.0, 100.0, 1.3)
    # round by round: 130/100, 150/120, 140/90
    assert last["round_ratios"] == [1.3, 1.25, 1.556]
