"""The trainer's determinism settings hold inside its own work and nowhere else in the process.

torch's deterministic mode and thread count are process-global; a peer trainer in a benchmark or a
notebook around a run must keep its own (under deterministic algorithms torch fills uninitialised
memory with NaN, which costs a peer that never asked for it).
"""

import torch

from tests.conftest import small_config
from workers.reporting import MemoryReporter
from workers.training.trainer import Trainer


class SettingsSpy(MemoryReporter):
    """Notes torch's global settings when the trainer hands over a step's samples (inside its step)."""

    seen: list[tuple[bool, int]]

    def samples(self, step, samples):
        self.seen.append((torch.are_deterministic_algorithms_enabled(), torch.get_num_threads()))
        super().samples(step, samples)


def test_deterministic_kernels_and_threads_are_set_for_the_trainer_and_restored_after():
    outer_threads = 3
    before = (torch.are_deterministic_algorithms_enabled(), torch.get_num_threads())
    torch.use_deterministic_algorithms(False)
    torch.set_num_threads(outer_threads)
    try:
        cfg = small_config(schedule={"steps": 2}, resources={"threads": 1})
        reporter = SettingsSpy()
        reporter.seen = []
        trainer = Trainer(cfg, reporter)
        assert (torch.are_deterministic_algorithms_enabled(), torch.get_num_threads()) == (False, outer_threads)
        trainer.step(1)  # a caller that drives single steps, as a peer's training loop does
        assert trainer.run() == "succeeded"
        assert reporter.seen == [(True, 1)] * 3, "inside each step: deterministic kernels, resources.threads"
        assert (torch.are_deterministic_algorithms_enabled(), torch.get_num_threads()) == (False, outer_threads)
        assert trainer.determinism["torch_threads"] == 1
    finally:
        torch.use_deterministic_algorithms(before[0])
        torch.set_num_threads(before[1])
