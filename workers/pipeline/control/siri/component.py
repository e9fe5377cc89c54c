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

from workers.pipeline.control.base import Controller
from workers.pipeline.control.siri import SIRIKnobs
from workers.pipeline.stages import Budget, StageContext


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

    def limit_at(self, step: int) -> int:
        phase = 2 * math.pi * ((step - 1) % self.period) / self.period
        return round(self.short + (self.long - self.short) * (1 + math.cos(phase)) / 2)

    def plan(self, ctx: StageContext) -> Budget:
        self.limit = self.limit_at(ctx.step)
        return replace(self.budget, max_new_tokens=self.limit)

    def metrics(self) -> dict[str, float]:
        return {"pipeline/control/max_new_tokens": float(self.limit)}
