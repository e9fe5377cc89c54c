"""The advantage stage's estimators as RunConfig knows them: names, summaries and knobs (no torch here)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from workers.knobs import Knobs
from workers.registry import Registry

ADVANTAGES: Registry[type] = Registry("advantage estimator")


class NormalizationKnobs(Knobs):
    """The group normalisation every estimator here shares: the spread divided by, and its eps."""

    scale: Literal["std", "mad", "none"] = Field(
        "std",
        description="std: divide by the group's standard deviation (GRPO); mad: by the median absolute "
        "deviation from the group median (MC-GRPO's code); none: do not divide (Dr. GRPO).",
    )
    eps: float = Field(1e-4, gt=0, le=1.0, description="Added to the standard deviation (or MAD) before dividing.")


class GroupEstimatorKnobs(NormalizationKnobs):
    rescale_nonzero: bool = Field(
        False,
        description="Multiply a group's non-zero advantages by n / (their count), so samples tied with the "
        "baseline do not thin the group's signal (MC-GRPO's code).",
    )


ADVANTAGES.declare(
    "group-mean",
    "workers.pipeline.advantage.base:GroupMean",
    summary="A_i = (r_i - mean(r)) / (std(r) + eps) over the group (GRPO: Shao et al. 2024, eq. 3).",
    knobs=GroupEstimatorKnobs,
)


ADVANTAGES.declare(
    "leave-one-out",
    "workers.pipeline.advantage.base:LeaveOneOut",
    summary="A_i = r_i - mean_{j != i} r_j: a sample never enters its own baseline.",
    knobs=GroupEstimatorKnobs,
)


ADVANTAGES.declare(
    "group-median",
    "workers.pipeline.advantage.base:GroupMedian",
    summary="A_i = (r_i - median(r)) / (spread + eps); the median sample (the pivot) is left out of the loss.",
    knobs=GroupEstimatorKnobs,
)


class D3SKnobs(GroupEstimatorKnobs):
    sample_share: float = Field(0.5, gt=0, le=1, description="Share of each group kept at the start of the schedule.")
    token_share: float = Field(
        0.5, gt=0, le=1, description="Share of the kept rollouts' tokens kept at the start of the schedule."
    )
    relax_steps: int = Field(
        200, ge=1, le=1_000_000, description="Steps over which both shares rise linearly to 1 (keep everything)."
    )


ADVANTAGES.declare(
    "d3s",
    "workers.pipeline.advantage.d3s:DualLevelDownSampling",
    summary="GRPO advantages; train only each group's max-variance rollouts and their top |A|·H tokens, "
    "relaxing (D³S).",
    knobs=D3SKnobs,
)


class NoveltySharpeningKnobs(GroupEstimatorKnobs):
    novelty: float = Field(
        1.0,
        ge=0,
        le=100,
        description="lambda: the amplification per nat of per-token log-likelihood below the group's mean (0: GRPO).",
    )
    cap: float = Field(
        0.5, ge=0, le=10, description="The most a positive advantage is amplified: by a factor of at most 1 + cap."
    )


ADVANTAGES.declare(
    "xrpo",
    "workers.pipeline.advantage.xrpo:NoveltySharpenedGroupMean",
    summary="GRPO's advantage, amplified for correct completions less likely than their group's mean (XRPO).",
    knobs=NoveltySharpeningKnobs,
)


class DecoupledKnobs(NormalizationKnobs):
    batch_norm: bool = Field(
        True,
        description="After summing the per-reward advantages, normalise the sum over the whole batch "
        "((A - mean) / (std + eps)), so its scale does not grow with the number of reward functions (GDPO).",
    )


ADVANTAGES.declare(
    "gdpo",
    "workers.pipeline.advantage.gdpo:DecoupledGroupNormalization",
    summary="Each reward normalised within its group on its own, then weighted, summed and batch-normalised (GDPO).",
    knobs=DecoupledKnobs,
)


class ConfidencePenaltyKnobs(GroupEstimatorKnobs):
    alpha: float = Field(
        1.0,
        ge=0,
        le=100,
        description="alpha: a negative advantage is multiplied by 1 + alpha x softplus(c), c the completion's "
        "log-likelihood under the policy minus under the reference policy (0: GRPO).",
    )


ADVANTAGES.declare(
    "ace",
    "workers.pipeline.advantage.ace:ConfidencePenalizedGroupMean",
    summary="GRPO's advantage; negative ones scaled by 1 + alpha·softplus(log pi/pi_ref) of the completion (ACE).",
    knobs=ConfidencePenaltyKnobs,
    needs=("ref_logprobs",),
)


def check_reward_part(cfg, knob: str, method: str) -> None:
    """A component that treats one reward function apart needs it in reward.weights, beside at least one other."""
    name = getattr(cfg.advantage, knob)
    weights = cfg.reward.weights
    if name not in weights:
        raise ValueError(
            f"advantage.{knob}: '{name}' is not a reward of this run; {method} needs it in reward.weights "
            f"(now {', '.join(weights)})"
        )
    if len(weights) < 2:
        raise ValueError(f"advantage.{knob}: {method} needs a reward besides '{name}' in reward.weights")


class AccuracyGatedKnobs(GroupEstimatorKnobs):
    accuracy_threshold: float = Field(
        0.5,
        ge=0,
        le=1,
        description="A group whose share of correct completions is at least this is scored with the penalty "
        "reward as well; below it, by the other rewards alone (0: every group, the plain length penalty; "
        "1: only groups that are all correct).",
    )
    penalty: str = Field(
        "length",
        max_length=64,
        description="The reward function (a name in reward.weights) that counts only in groups at or above "
        "the accuracy threshold, weighted as reward.weights says.",
    )


def check_grpo_lambda(cfg) -> None:
    """The gated reward must be one of the run's, and some other reward must score the groups below the gate."""
    check_reward_part(cfg, "penalty", "grpo-lambda")


ADVANTAGES.declare(
    "grpo-lambda",
    "workers.pipeline.advantage.grpo_lambda:AccuracyGatedPenalty",
    summary="GRPO's advantage with the length penalty only in groups whose pass rate reaches a threshold "
    "(GRPO-lambda).",
    knobs=AccuracyGatedKnobs,
    check=check_grpo_lambda,
)


class DecoupledLengthKnobs(GroupEstimatorKnobs):
    kl_lambda: float = Field(
        0.2,
        gt=0,
        le=100,
        description="lambda: the KL weight of the optimal positive distribution; a correct completion's weight "
        "among its group's correct ones is proportional to exp(preference reward / lambda), so smaller lambda "
        "favours the shortest more sharply (large: every correct one alike, GRPO).",
    )
    preference: str = Field(
        "length",
        max_length=64,
        description="The reward function (a name in reward.weights) that ranks correct completions among "
        "themselves, weighted as reward.weights says; it never enters the correctness advantage.",
    )
    solved_advantage: float = Field(
        1.0,
        ge=0,
        le=10,
        description="Mean advantage of the correct completions of a group with no wrong one, shared by the same "
        "weights (GRPO gives such a group 0; 0 here: such groups train nothing).",
    )


def check_drpo(cfg) -> None:
    """The preference reward must be one of the run's, and some other reward must give the correctness advantage."""
    check_reward_part(cfg, "preference", "drpo")


ADVANTAGES.declare(
    "drpo",
    "workers.pipeline.advantage.drpo:DecoupledLengthReward",
    summary="GRPO's correctness advantage; correct ones share theirs by exp(length reward / lambda) "
    "among themselves (DRPO).",
    knobs=DecoupledLengthKnobs,
    check=check_drpo,
)


class OutcomeExplorationKnobs(GroupEstimatorKnobs):
    history_bonus: float = Field(
        0.25,
        ge=0,
        le=1,
        description="c_hist: a completion's reward gains c_hist / sqrt(N), N the times its answer has been given "
        "to its prompt over the run, this step included (historical exploration; 0: off). Keep "
        "history_bonus + batch_penalty below the reward gap between a right and a wrong answer (1 with the "
        "correct reward alone) so that no bonus ranks a wrong answer above a right one.",
    )
    batch_penalty: float = Field(
        0.25,
        ge=0,
        le=1,
        description="c_batch: a completion's reward loses c_batch x (m - 1) / (n - 1), m the completions of its "
        "group (n of them) that gave the same answer, itself included (batch exploration; 0: off).",
    )
    apply_to: Literal["all", "incorrect"] = Field(
        "all",
        description="all: every completion gets the bonuses; incorrect: only the wrong ones (a right answer's "
        "reward is left as it is).",
    )


ADVANTAGES.declare(
    "outcome-explore",
    "workers.pipeline.advantage.outcome:OutcomeExploration",
    summary="GRPO on r + c/sqrt(count of the answer for the prompt) - penalty for answers repeated in the group.",
    knobs=OutcomeExplorationKnobs,
    needs=("answer_counts",),
)
