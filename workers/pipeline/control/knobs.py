"""The control stage's components as RunConfig knows them: names, summaries, knobs and checks (no torch here).

A component whose knobs must fit other sections of the run declares a `check(cfg)`, which
RunConfig calls once the whole config has validated.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from workers.knobs import Knobs
from workers.registry import Registry

CONTROLLERS: Registry[type] = Registry("control component")


def check_mean_within_bounds(cfg, keeper: str) -> None:
    """rollout.group_size, the mean a fixed-total allocation keeps, must lie within control.min_group/max_group.

    A ValueError that names the bound crossed, so that the config's errors file it under that field."""
    c, size = cfg.control, cfg.rollout.group_size
    if not c.min_group <= size <= c.max_group:
        bound = "control.min_group" if size < c.min_group else "control.max_group"
        raise ValueError(
            f"{bound}: rollout.group_size {size} must lie within control.min_group {c.min_group} "
            f"and control.max_group {c.max_group}, the mean {keeper} keeps"
        )


CONTROLLERS.declare(
    "fixed",
    "workers.pipeline.control.base:FixedBudget",
    summary="The same budget every step: rollout.prompts_per_step x rollout.group_size, rollout.max_new_tokens.",
    knobs=Knobs,
)


class DARSKnobs(Knobs):
    schedule: Literal["equal-treatment", "hardness-weighted"] = Field(
        "equal-treatment",
        description="equal-treatment: each low-accuracy prompt gets the rollouts that bring its cumulative "
        "advantage up to that of a G-group at accuracy 0.5; hardness-weighted: that mass times 2 (1 - accuracy), "
        "so the harder the prompt, the more rollouts.",
    )
    threshold: float = Field(
        0.5, gt=0, le=0.5, description="Prompts whose accuracy so far is below this get extra rollouts."
    )
    max_extra: int = Field(12, ge=1, le=1024, description="Most extra rollouts one prompt gets in a step.")
    extra_budget: float = Field(
        1.0,
        gt=0,
        le=16,
        description="Most extra rollouts of a step, as a multiple of its base budget "
        "(rollout.prompts_per_step x rollout.group_size).",
    )
    stages: int = Field(
        3, ge=2, le=16, description="Rollout stages per round: the first, then up to stages - 1 of extras."
    )
    mass: Literal["without-std", "with-std"] = Field(
        "without-std",
        description="The cumulative advantage |A| summed over a group of n at accuracy a that the schedules "
        "balance: without-std, 2 n a (1 - a), the advantage r - mean (the authors' experiments, "
        "grpo_use_std=False); with-std, 2 n sqrt(a (1 - a)), GRPO's advantage divided by the group's std.",
    )


CONTROLLERS.declare(
    "dars",
    "workers.pipeline.control.dars:DifficultyAdaptiveRollouts",
    summary="Prompts below an accuracy threshold get extra rollouts in further stages, the harder the more (DARS).",
    knobs=DARSKnobs,
)


class DOTSKnobs(Knobs):
    candidates_per_prompt: int = Field(4, ge=1, le=64, description="Candidates drawn per prompt trained on.")
    target: float = Field(0.5, gt=0, lt=1, description="The adaptive difficulty (failure rate) aimed at.")
    temperature: float = Field(
        0.1, gt=0, le=10, description="Temperature of the attention over the reference set (cosine similarity)."
    )


CONTROLLERS.declare(
    "dots",
    "workers.pipeline.control.dots:DifficultyTargetedSelection",
    summary="Train on the prompts whose adaptive difficulty, estimated by attention over measured ones, is nearest "
    "0.5 (DOTS).",
    knobs=DOTSKnobs,
)


class DUETKnobs(Knobs):
    min_group: int = Field(2, ge=2, le=256, description="Fewest rollouts a prompt gets.")
    max_group: int = Field(16, ge=2, le=256, description="Most rollouts a prompt gets.")
    abort_after: float = Field(
        0.75,
        gt=0,
        le=1,
        description="Share of a rollout's length limit after which, without the marker, it is aborted.",
    )
    marker: str = Field(
        "", max_length=64, description="Text whose tokens show a rollout has begun its answer ('': no gate)."
    )
    min_survivors: int = Field(2, ge=1, le=256, description="Rollouts of a group never aborted (the last ones left).")


def check_duet(cfg) -> None:
    """DUET divides rollouts among prompts at a fixed mean, rollout.group_size: it must lie within the bounds."""
    check_mean_within_bounds(cfg, "DUET")


CONTROLLERS.declare(
    "duet",
    "workers.pipeline.control.duet:DualTokenAllocation",
    summary="A surrogate sets each prompt's rollouts at a fixed total; long rollouts without an answer marker "
    "abort (DUET).",
    knobs=DUETKnobs,
    check=check_duet,
)


class GDROKnobs(Knobs):
    classes: int = Field(
        4, ge=2, le=8, description="Difficulty classes of seen prompts, by pass rate (unseen: one more)."
    )
    prompt_game: bool = Field(
        True, description="Prompt-GDRO: draw the step's prompts by the classes' adversary weights."
    )
    rollout_game: bool = Field(
        True, description="Rollout-GDRO: move rollouts between classes at a fixed mean group size (rollout.group_size)."
    )
    candidates_per_prompt: int = Field(
        4, ge=1, le=64, description="Candidates drawn per prompt trained on, for the prompt game to choose from."
    )
    eta: float = Field(0.5, gt=0, le=10, description="Learning rate of the multiplicative weights.")
    ema: float = Field(0.9, ge=0, lt=1, description="Share of a class's running loss and pass rate kept per step.")
    explore: float = Field(0.1, ge=0, le=1, description="Uniform share mixed into the prompt game's class sampling.")
    pass_rate_clip: float = Field(
        0.2,
        ge=0.01,
        le=0.5,
        description="The rollout game's variance proxy p(1-p) uses the class's pass rate clipped to [clip, 1-clip], "
        "so a class that never succeeds keeps the variance of one that could: more rollouts are how it finds its "
        "first success.",
    )
    min_group: int = Field(2, ge=2, le=256, description="Fewest rollouts a prompt gets under the rollout game.")
    max_group: int = Field(16, ge=2, le=256, description="Most rollouts a prompt gets under the rollout game.")


def check_gdro(cfg) -> None:
    """The rollout game keeps a fixed mean group size, rollout.group_size: it must lie within the bounds."""
    if cfg.control.rollout_game:
        check_mean_within_bounds(cfg, "the rollout game")


CONTROLLERS.declare(
    "gdro",
    "workers.pipeline.control.gdro:GroupDRO",
    summary="Adversaries over online pass-rate classes pick prompts and move rollouts to hard classes at a fixed "
    "mean (GDRO).",
    knobs=GDROKnobs,
    check=check_gdro,
)


class MoPPSKnobs(Knobs):
    candidates_per_prompt: int = Field(
        8, ge=1, le=64, description="Candidates drawn per prompt rolled out (the authors' ts_ratio: 8)."
    )
    target: float = Field(0.5, gt=0, lt=1, description="The pass rate the selected prompts are predicted to have.")
    decay: float = Field(
        0.5,
        ge=0,
        le=1,
        description="Forgetting per visit: the share of a prompt's old posterior kept when new outcomes arrive "
        "(1 = never forget; the authors use 0.5).",
    )
    prior: float = Field(1.0, gt=0, le=1e6, description="alpha_0 = beta_0 of the Beta prior (1: uniform).")


CONTROLLERS.declare(
    "mopps",
    "workers.pipeline.control.mopps:ModelPredictivePromptSelection",
    summary="Roll out the prompts whose Thompson-sampled pass rate is nearest the target (MoPPS); no extra rollouts.",
    knobs=MoPPSKnobs,
)


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


CONTROLLERS.declare(
    "siri",
    "workers.pipeline.control.siri:InterleavedCompression",
    summary="The rollout length limit oscillates between control.short and control.long on a cosine (SIRI).",
    knobs=SIRIKnobs,
    check=check_siri,
)


class VADEKnobs(Knobs):
    candidates_per_prompt: int = Field(8, ge=1, le=64, description="Candidates drawn per prompt rolled out.")
    step_decay: float = Field(
        0.99,
        ge=0,
        le=1,
        description="Slow scale: the share of a prompt's evidence kept per training step since it was observed "
        "(1 = evidence never ages).",
    )
    visit_decay: float = Field(
        0.5,
        ge=0,
        le=1,
        description="Fast scale: the share of a prompt's earlier evidence kept when new outcomes of it arrive.",
    )
    prior: float = Field(1.0, gt=0, le=1e6, description="alpha_0 = beta_0 of the Beta prior (1: uniform).")


CONTROLLERS.declare(
    "vade",
    "workers.pipeline.control.vade:VarianceAwareDynamicSampling",
    summary="Roll out the prompts with the largest Thompson-sampled variance p(1-p), from a two-scale decayed Beta "
    "(VADE).",
    knobs=VADEKnobs,
)


class XRPOKnobs(Knobs):
    extra_budget: float = Field(
        1.0,
        gt=0,
        le=16,
        description="Most extra rollouts of a step, as a multiple of its base budget "
        "(rollout.prompts_per_step x rollout.group_size, the first stage of rollout.group_size per prompt).",
    )
    round_size: int = Field(
        0, ge=0, le=65536, description="Extra rollouts handed out per stage (0 = rollout.prompts_per_step)."
    )
    stages: int = Field(
        5, ge=2, le=64, description="Rollout stages per round: the first, then up to stages - 1 rounds of extras."
    )
    confidence: float = Field(
        0.95, gt=0.5, lt=1, description="1 - alpha: the level of the t confidence interval of a mean reward."
    )
    bonus: float = Field(
        0.05,
        ge=0,
        le=10,
        description="c of the exploration bonus c sqrt(ln N / n_q) for prompts sampled less often (0: none).",
    )


CONTROLLERS.declare(
    "xrpo",
    "workers.pipeline.control.xrpo:UncertaintyAllocation",
    summary="Rounds of extra rollouts go to the prompts whose t-interval of the mean reward shrinks most (XRPO).",
    knobs=XRPOKnobs,
)
