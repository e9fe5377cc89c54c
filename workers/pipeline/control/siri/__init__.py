"""The rollout length limit oscillates between control.short and control.long on a cosine (SIRI).

Paper: Wen et al. 2025, *SIRI: Scaling Iterative Reinforcement Learning with Interleaved
Compression* (arXiv 2509.25176), sec. 3.

The code: component.py (InterleavedCompression).
"""

from __future__ import annotations

from pydantic import Field

from workers.knobs import Knobs
from workers.registry import Checked, Component


class SIRIKnobs(Knobs):
    short: int = Field(
        0, ge=0, le=4096, description="The compressed limit, in tokens (the cosine's low point); 0 = half the expanded."
    )
    long: int = Field(
        0, ge=0, le=4096, description="The expanded limit, in tokens (the high point); 0 = rollout.max_new_tokens."
    )
    period: int = Field(100, ge=2, le=1_000_000, description="Steps of one compression-expansion cycle.")

    def limits(self, max_new_tokens: int) -> tuple[int, int]:
        """(compressed, expanded) in tokens, with the defaults resolved against rollout.max_new_tokens."""
        long = self.long or max_new_tokens
        return self.short or max(1, long // 2), long


def check_siri(cfg) -> None:
    """The compressed limit must lie below the expanded one, each resolved against rollout.max_new_tokens."""
    short, long = cfg.control.limits(cfg.rollout.max_new_tokens)
    if short >= long:
        raise ValueError(f"control.short: {short} must be below the expanded limit ({long})")


COMPONENT = Component(
    "siri",
    "component:InterleavedCompression",
    knobs=SIRIKnobs,
    check=check_siri,
    checked=Checked(
        presets="siri",
        paper="Wen et al. 2025 (SIRI), sec. 3",
        how="documented choice: the cycle starts at the expanded limit",
        card="siri.md",
        quote="the cycle starts at the expanded limit (the model's own",
    ),
)
