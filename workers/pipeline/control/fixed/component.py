"""`fixed`: the control stage's default: the rollout section's budget every step (`Controller`'s defaults)."""

from __future__ import annotations

from workers.pipeline.control.base import Controller


class FixedBudget(Controller):
    """The same budget every step: rollout.prompts_per_step x rollout.group_size, rollout.max_new_tokens."""
