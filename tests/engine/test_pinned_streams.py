"""The six original presets' metric streams, pinned: a change to a seam must leave them bit-identical.

A short run of each preset, on-policy and with two passes of two minibatches, is compared
value for value with tests/engine/data/preset_streams.json. Only the metrics in the file are
compared, so a new metric does not break the pin; a changed value does. When a change is *meant*
to move a preset's stream, regenerate the file and say why in the commit:

    python -m tests.engine.test_pinned_streams --write

Float results on CPU depend on the kernels torch picks for the processor; the file records the
capability it was written on, and a mismatch on another one says so.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

from tests.conftest import small_config
from workers.reporting import MemoryReporter, is_deterministic_metric
from workers.trainer import Trainer

PINNED = Path(__file__).with_name("data") / "preset_streams.json"
PRESETS = ["dapo", "dr-grpo", "grpo", "gspo", "mc-grpo", "rloo"]
SCHEDULES = {"on-policy": {}, "two passes of two minibatches": {"updates_per_batch": 2, "minibatches": 2}}


def stream(method: str, schedule: dict) -> list[dict[str, float]]:
    cfg = small_config(method=method, schedule={"steps": 4, **schedule}, eval={"every": 2})
    reporter = MemoryReporter()
    Trainer(cfg, reporter).run()
    return [{k: v for k, v in row.items() if is_deterministic_metric(k)} for row in reporter.metric_rows]


def pinned() -> dict:
    return json.loads(PINNED.read_text())


@pytest.mark.parametrize("schedule", sorted(SCHEDULES))
@pytest.mark.parametrize("method", PRESETS)
def test_the_preset_stream_is_the_pinned_one(method, schedule):
    data = pinned()
    expected = data["streams"][f"{method} / {schedule}"]
    got = stream(method, SCHEDULES[schedule])
    where = f"pinned on a {data['cpu_capability']} CPU; this one is {torch.backends.cpu.get_cpu_capability()}"
    assert len(got) == len(expected), where
    for step, (want, have) in enumerate(zip(expected, got)):
        changed = {k: (v, have.get(k)) for k, v in want.items() if have.get(k) != v}
        assert not changed, f"row {step}: (pinned, now) {changed}; {where}"


def write() -> None:
    streams = {f"{m} / {s}": stream(m, SCHEDULES[s]) for m in PRESETS for s in sorted(SCHEDULES)}
    data = {"cpu_capability": torch.backends.cpu.get_cpu_capability(), "torch": torch.__version__, "streams": streams}
    PINNED.write_text(json.dumps(data, indent=0, sort_keys=True) + "\n")


if __name__ == "__main__" and "--write" in sys.argv:
    write()
