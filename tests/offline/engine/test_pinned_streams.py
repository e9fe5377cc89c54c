"""The six original presets' metric streams, pinned: a change to a seam must leave them unchanged.

A short run of each preset, on-policy and with two passes of two minibatches, is compared
value for value with tests/offline/engine/data/preset_streams.json. Only the metrics in the file are
compared, so a new metric does not break the pin; a changed value does. When a change is *meant*
to move a preset's stream, regenerate the file and say why in the commit:

    python -m tests.offline.engine.test_pinned_streams --write

Float results on CPU depend on the kernels torch and MKL pick for the processor (AVX2 and
AVX-512 sum in different orders). The streams are therefore computed in a child process held
to the AVX2 kernels (ATEN_CPU_CAPABILITY, MKL_CBWR), which every x86-64 machine CI may land on
has. That is not quite enough: on a Xeon with AVX-512 and AMX, held to the same kernels, the
continuous metrics differed from the pin (relative 2.7e-3 at most: policy/loss, a difference of
nearly cancelling terms, after a second pass) while every sampled token, reward and count stayed
the same, and the code the pin was written from gave bit for bit what today's gives there. So
values are compared to a relative 1e-2 (absolute 1e-5 near 0): above the processors' rounding,
below what a changed seam moves (a different sample, reward or advantage changes whole percents).
"On-policy" is one pass of one minibatch whatever the preset's own schedule, so a preset that
brings its paper's schedule (dapo, gspo, dr-grpo) is still pinned on-policy. The child also gets
an empty model cache of its own: the tiny model's warm-started weights, cached earlier in the
run by a test process on the AVX-512 kernels, would otherwise leak into the pin (CI saw exactly
that: step 1's gradient norm 2.70999 against the pinned 2.71004, reproduced here by sharing the
cache).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
from functools import cache
from pathlib import Path

import pytest

from tests.conftest import small_config

PINNED = Path(__file__).with_name("data") / "preset_streams.json"
PRESETS = ["dapo", "dr-grpo", "grpo", "gspo", "mc-grpo", "rloo"]
SCHEDULES = {
    "on-policy": {"updates_per_batch": 1, "minibatches": 1},
    "two passes of two minibatches": {"updates_per_batch": 2, "minibatches": 2},
}
KERNELS = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2,STRICT", "ONEDNN_MAX_CPU_ISA": "AVX2"}


def stream(method: str, schedule: dict) -> list[dict[str, float]]:
    from workers.reporting import MemoryReporter, is_deterministic_metric
    from workers.training.trainer import Trainer

    cfg = small_config(method=method, schedule={"steps": 4, **schedule}, eval={"every": 2})
    reporter = MemoryReporter()
    Trainer(cfg, reporter).run()
    return [{k: v for k, v in row.items() if is_deterministic_metric(k)} for row in reporter.metric_rows]


def all_streams() -> dict:
    import torch

    streams = {f"{m} / {s}": stream(m, SCHEDULES[s]) for m in PRESETS for s in sorted(SCHEDULES)}
    return {"cpu_capability": torch.backends.cpu.get_cpu_capability(), "torch": torch.__version__, "streams": streams}


@cache
def computed() -> dict:
    """Every stream, from one child process on the AVX2 kernels with a model cache of its own."""
    with tempfile.TemporaryDirectory(prefix="pinned-cache-") as cache:
        out = subprocess.run(
            [sys.executable, "-m", "tests.offline.engine.test_pinned_streams", "--print"],
            env={**os.environ, **KERNELS, "ROLLOUTLAB_CACHE": cache},
            cwd=Path(__file__).parents[3],
            capture_output=True,
            text=True,
            check=True,
        )
    return json.loads(out.stdout)


def same(pinned: float | None, now: float | None) -> bool:
    if pinned is None or now is None:
        return pinned is now
    return math.isclose(pinned, now, rel_tol=1e-2, abs_tol=1e-5)


@pytest.mark.parametrize("schedule", sorted(SCHEDULES))
@pytest.mark.parametrize("method", PRESETS)
def test_the_preset_stream_is_the_pinned_one(method, schedule):
    data, now = json.loads(PINNED.read_text()), computed()
    assert now["cpu_capability"] == "AVX2", "the child process did not take the AVX2 kernels"
    expected, got = data["streams"][f"{method} / {schedule}"], now["streams"][f"{method} / {schedule}"]
    assert len(got) == len(expected)
    for step, (want, have) in enumerate(zip(expected, got)):
        changed = {k: (v, have.get(k)) for k, v in want.items() if not same(v, have.get(k))}
        assert not changed, f"row {step}: (pinned, now) {changed}"


if __name__ == "__main__" and "--print" in sys.argv:
    print(json.dumps(all_streams()))
elif __name__ == "__main__" and "--write" in sys.argv:
    PINNED.write_text(json.dumps(computed(), indent=0, sort_keys=True) + "\n")
