"""Every example config loads, and every sweep's variants apply to its base (a sweep file is rerunnable)."""

import importlib
import sys
from pathlib import Path

import pytest

from workers.config import load_config

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
SWEEPS = sorted(p.stem for p in EXAMPLES.glob("sweep_*.py"))


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_every_example_config_loads(path):
    assert load_config(path, []).schedule.steps > 0


@pytest.fixture(scope="module", autouse=True)
def examples_importable():
    sys.path.insert(0, str(EXAMPLES))
    yield
    sys.path.remove(str(EXAMPLES))


@pytest.mark.parametrize("name", SWEEPS)
def test_every_sweep_variant_is_a_valid_config(name):
    module = importlib.import_module(name)
    for label, (overrides, observable) in module.VARIANTS.items():
        cfg = load_config(module.BASE, [*overrides, "seed=2"])
        assert cfg.seed == 2, label
        assert "/" in observable, f"{label}: the observable is a metric name"
