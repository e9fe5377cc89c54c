"""The knobs every multi-turn environment has (torch-free: the config reads them)."""

from __future__ import annotations

from pydantic import Field

from workers.knobs import Knobs


class EpisodeKnobs(Knobs):
    max_turns: int = Field(4, ge=1, le=64, description="Policy turns in an episode at most; the last one ends it.")
    max_episode_tokens: int = Field(
        256,
        ge=1,
        le=65_536,
        description="Tokens after the prompt in an episode at most, the policy's turns and the observations "
        "together; an episode that reaches it ends, truncated. Each turn is limited by rollout.max_new_tokens.",
    )
