"""The generate stage's components as RunConfig knows them: names, summaries and knobs (no torch here)."""

from __future__ import annotations

from pydantic import Field

from workers.knobs import Knobs
from workers.registry import Registry

GENERATORS: Registry[type] = Registry("generate component")


GENERATORS.declare(
    "iid",
    "workers.pipeline.generate.base:IndependentGroups",
    summary="G independent samples per prompt (GRPO: Shao et al. 2024, DeepSeekMath, sec. 4.1).",
    knobs=Knobs,
)


GENERATORS.declare(
    "pivot",
    "workers.pipeline.generate.base:PivotGroups",
    summary="G+1 samples per prompt, so an odd group has one exact median (MC-GRPO: Kim 2026, sec. 3).",
    knobs=Knobs,
)


class APRILKnobs(Knobs):
    oversample: float = Field(
        2.0,
        ge=1,
        le=8,
        description="Groups in flight per group trained on: the pool is topped up with new prompts to "
        "ceil(oversample x prompts) groups (the paper's over-provisioned rollout batch).",
    )
    check_every: int = Field(1, ge=1, le=1024, description="Tokens between two checks of how many groups are finished.")


GENERATORS.declare(
    "april",
    "workers.pipeline.generate.april:ActivePartialRollouts",
    summary="Over-provision groups, stop when the step's groups are finished, continue unfinished completions "
    "later (APRIL).",
    knobs=APRILKnobs,
    reuses_samples=True,
)


class ArrolKnobs(Knobs):
    oversample: float = Field(2.0, ge=1, le=8, description="Rollouts started per rollout kept (of each group).")
    check_at: int = Field(
        2, ge=2, le=4096, description="Tokens after which the head judges the partial rollouts and the group is pruned."
    )
    head_lr: float = Field(0.05, gt=0, le=10, description="Learning rate of the quality head (Adam).")
    head_steps: int = Field(20, ge=1, le=1000, description="Gradient steps of the head after each scored step.")
    warmup_steps: int = Field(5, ge=0, le=10_000, description="Steps the head trains before its predictions prune.")


GENERATORS.declare(
    "arrol",
    "workers.pipeline.generate.arrol:OnlineRolloutPruning",
    summary="Over-sample, predict partial rollouts' success with a head trained online, prune groups to G "
    "balanced (arrol).",
    knobs=ArrolKnobs,
)


class LATRKnobs(Knobs):
    branch_threshold: float = Field(
        0.2, gt=0, le=1, description="Branch where the most likely other token has at least this probability."
    )
    lookahead: int = Field(2, ge=1, le=1024, description="Tokens a new branch is decoded before it is compared.")
    similarity: float = Field(
        1.0, gt=0, le=1, description="Prune a branch whose lookahead tokens match its sibling's at this share or more."
    )
    roots: int = Field(1, ge=1, le=256, description="Sequences each tree starts from (at most the group size).")


GENERATORS.declare(
    "latr",
    "workers.pipeline.generate.latr:LookaheadTreeRollouts",
    summary="Branch at uncertain tokens into other candidates, look ahead, prune branches that stay alike (LATR).",
    knobs=LATRKnobs,
)
