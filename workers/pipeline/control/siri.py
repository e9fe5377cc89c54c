"""`siri`: the longest completion allowed follows a cosine between a compressed and an expanded length.

SIRI (Wen et al. 2025, "SIRI: Scaling Iterative Reinforcement Learning with Interleaved
Compression", sec. 3): training alternates between compressing the rollout length limit,
which forces dense reasoning, and expanding it, which leaves room to explore; the authors'
scheduler is a cosine. Here the limit at step t is

    L(t) = short + (long - short) * (1 + cos(2 pi (t - 1) / period)) / 2,

rounded to a whole token: `long` at the first step, `short` half a period later, back to
`long` at the end of each period; every prompt of a step gets L(t).
"""

from __future__ import annotations

import math
from dataclasses import replace

from pydantic import Field

from workers.knobs import Knobs
from workers.pipeline.control import CONTROLLERS, Controller
from workers.pipeline.stages import Budget, StageContext


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


@CONTROLLERS.register("siri")
class InterleavedCompression(Controller):
    """The rollout length limit oscillates between control.short and control.long on a cosine (SIRI).

    Knobs: control.short (0: half the expanded), control.long (0: rollout.max_new_tokens), control.period.
    Reports pipeline/control/max_new_tokens, the limit of the step.
    """

    Knobs = SIRIKnobs

    def __init__(self, cfg):
        super().__init__(cfg)
        self.short, self.long = cfg.control.limits(cfg.rollout.max_new_tokens)
        self.period = cfg.control.period
        self.limit = self.long

    @staticmethod
    def check_config(cfg) -> None:
        short, long = cfg.control.limits(cfg.rollout.max_new_tokens)
        if short >= long:
            raise ValueError(f"control.short: {short} must be below the expanded limit ({long})")

    def limit_at(self, step: int) -> int:
        phase = 2 * math.pi * ((step - 1) % self.period) / self.period
        return round(self.short + (self.long - self.short) * (1 + math.cos(phase)) / 2)

    def plan(self, ctx: StageContext) -> Budget:
        self.limit = self.limit_at(ctx.step)
        return replace(self.budget, max_new_tokens=self.limit)

    def metrics(self) -> dict[str, float]:
        return {"pipeline/control/max_new_tokens": float(self.limit)}
