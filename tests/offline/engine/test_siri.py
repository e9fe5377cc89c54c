"""SIRI: the rollout length limit follows its cosine schedule, and generation keeps to it."""

import math

import pytest

from tests.conftest import small_config
from workers.config import resolve
from workers.errors import ConfigError
from workers.pipeline.control import CONTROLLERS
from workers.reporting import MemoryReporter
from workers.training.trainer import Trainer


def test_the_limit_follows_the_cosine_from_long_to_short_and_back():
    cfg = resolve({"method": "siri", "rollout": {"max_new_tokens": 12}, "control": {"short": 4, "period": 8}})
    siri = CONTROLLERS.get("siri")(cfg)
    limits = [siri.limit_at(step) for step in range(1, 18)]
    expected = [round(4 + 8 * (1 + math.cos(2 * math.pi * ((s - 1) % 8) / 8)) / 2) for s in range(1, 18)]
    assert limits == expected
    assert limits[0] == 12 and limits[4] == 4 and limits[8] == 12 and limits[12] == 4  # long, short, long, short
    assert min(limits) == 4 and max(limits) == 12


def test_every_completion_of_a_step_keeps_to_that_steps_limit():
    cfg = small_config(
        method="siri",
        model={"warmup_steps": 0},  # random weights: completions run to whatever limit they are given
        rollout={"max_new_tokens": 8},
        control={"short": 2, "period": 4},
        schedule={"steps": 4},
    )
    trainer = Trainer(cfg, MemoryReporter())
    seen = []
    original = trainer.collector.collect

    def spy(step, policy, backend, version):
        collected = original(step, policy, backend, version)
        seen.append((trainer.stages.control.limit, int(collected.generated.lengths.max())))
        return collected

    trainer.collector.collect = spy
    assert trainer.run() == "succeeded"
    assert [limit for limit, _ in seen] == [8, 5, 2, 5]
    assert all(longest <= limit for limit, longest in seen) and seen[2][1] == 2
    reported = [v for _, v in trainer.reporter.series("pipeline/control/max_new_tokens")]
    assert reported == [8.0, 5.0, 2.0, 5.0]


def test_a_compressed_limit_above_the_expanded_one_is_refused():
    with pytest.raises(ConfigError, match=r"control.short: 9 must be below the expanded limit \(8\)"):
        resolve({"method": "siri", "rollout": {"max_new_tokens": 8}, "control": {"short": 9}})


def test_by_default_the_compressed_limit_is_half_the_expanded_one():
    cfg = resolve({"method": "siri", "rollout": {"max_new_tokens": 12}})
    assert cfg.control.limits(cfg.rollout.max_new_tokens) == (6, 12)
    assert CONTROLLERS.get("siri")(cfg).limit_at(51) == 6  # half a period in
