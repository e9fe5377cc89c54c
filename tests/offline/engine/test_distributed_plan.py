"""What a Ray run decides without a cluster (workers/training/distributed.py): placement bundles, the split of a
call between rollout actors and the join of their completions, the driver's replay of the learner's records, and
the config checks. The runs on a real cluster are tests/live/engine/test_distributed.py."""

from __future__ import annotations

import sys

import pytest
import torch

from tests.conftest import small_config
from workers.config import resolve
from workers.errors import ConfigError
from workers.reporting import MemoryReporter
from workers.rollout import Generations, StopRule
from workers.training.distributed import ArtifactOutOfReach, bundles, join, replay, run_on_ray, share_of, split

RAY = {"device": "cpu", "executor": "ray", "rollout_actors": 2, "threads": 1, "actor_cpus": 0.5}


def on_ray(**sections):
    """tests.conftest.small_config on the Ray cluster, training until stopped unless `schedule` says otherwise."""
    return small_config(**{"schedule": {"steps": 10_000}, "resources": RAY, **sections})


def test_a_missing_ray_is_a_config_error_naming_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # what `import ray` finds where the extra is not installed
    with pytest.raises(ConfigError, match=r"rolloutlab\[ray\]"):
        run_on_ray(on_ray(), MemoryReporter())


def test_several_machines_need_the_ray_executor():
    with pytest.raises(ConfigError, match=r"resources\.executor: 'local' runs on one machine, and nodes is 2: use ray"):
        resolve({"resources": {"nodes": 2}})
    assert resolve({"resources": {"nodes": 2, "executor": "ray"}}).resources.nodes == 2


def test_ray_routes_the_run_to_the_ray_queue():
    assert on_ray().queue() == "ray"
    assert small_config(resources={"gpus": 1}).queue() == "gpu"


def test_the_learner_and_its_rollout_actors_can_share_one_gpu():
    one_gpu = resolve(
        {"resources": {"executor": "ray", "gpus": 1, "learner_gpus": 0.5, "rollout_actors": 2, "actor_gpus": 0.25}}
    )
    assert bundles(one_gpu) == [{"CPU": 2.0, "GPU": 0.5}, {"CPU": 1.0, "GPU": 0.25}, {"CPU": 1.0, "GPU": 0.25}]
    cpu_run = on_ray(resources={**RAY, "learner_gpus": 0.5})
    assert bundles(cpu_run)[0] == {"CPU": RAY["threads"]}  # a CPU run's learner asks for no GPU, whatever its share
    assert one_gpu.config_hash() == resolve({"resources": {"executor": "ray", "gpus": 1}}).config_hash()  # placement


@pytest.mark.parametrize(
    "counts, actors, shares",
    [
        ([4, 4, 4, 4], 2, [(0, 2), (2, 4)]),
        ([4, 4, 4, 4], 4, [(0, 1), (1, 2), (2, 3), (3, 4)]),
        ([4, 4], 3, [(0, 1), (1, 2)]),  # fewer prompts than actors: no empty share
        ([1, 1, 1, 9], 2, [(0, 3), (3, 4)]),  # balanced by rows, not prompts
        ([9, 1, 1, 1], 2, [(0, 1), (1, 4)]),
        ([3], 2, [(0, 1)]),
    ],
)
def test_a_call_is_split_into_contiguous_shares_balanced_by_rows(counts, actors, shares):
    assert split(counts, actors) == shares


def test_a_finished_rows_rule_is_scaled_to_each_share():
    rule = StopRule(finished_rows=12)
    assert share_of(rule, rows=8, total=16).finished_rows == 6
    assert share_of(rule, rows=1, total=16).finished_rows == 1
    assert share_of(None, 8, 16) is None


def test_an_artifact_the_driver_cannot_read_names_the_shared_storage_it_needs(tmp_path):
    """A learner on another machine writes its records there: without shared storage the driver says so."""
    written = tmp_path / "environment.json"
    written.write_text("{}")
    reporter = MemoryReporter()
    replay([("log", ("a line",)), ("artifact", (str(written), "environment"))], reporter)
    assert reporter.lines == ["a line"] and reporter.artifacts == [(str(written), "environment")]
    with pytest.raises(ArtifactOutOfReach, match="STORAGE_ROOT .* must be one directory shared by every machine"):
        replay([("artifact", (str(tmp_path / "on-another-machine.json"), "environment"))], reporter)


def test_joined_completions_are_padded_to_the_longest_in_share_order():
    short = Generations(torch.tensor([[5, 2]]), torch.tensor([[-1.0, -2.0]]), torch.ones(1, 2), torch.tensor([False]))
    long = Generations(torch.tensor([[7, 8, 9]]), torch.full((1, 3), -0.5), torch.ones(1, 3), torch.tensor([True]))
    joined = join([short, long], pad_id=0)
    assert joined.tokens.tolist() == [[5, 2, 0], [7, 8, 9]]
    assert joined.mask.tolist() == [[1, 1, 0], [1, 1, 1]]
    assert joined.logprobs[0].tolist() == [-1.0, -2.0, 0.0] and joined.truncated.tolist() == [False, True]
