"""The objective stage's components as RunConfig knows them: names, summaries and knobs (no torch here)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from workers.knobs import Knobs
from workers.registry import Registry

OBJECTIVES: Registry[type] = Registry("objective")


class ObjectiveKnobs(Knobs):
    """The knobs every objective shares: the clip range, the loss aggregation, KL, entropy and pi_old."""

    # acts_when: the schedule condition (workers/schedule_checks.py) without which the knob changes nothing
    clip_low: float = Field(
        0.2,
        gt=0,
        lt=1,
        description="Ratio clipped below at 1 - clip_low.",
        json_schema_extra={"acts_when": "off-policy"},
    )
    clip_high: float = Field(
        0.2,
        gt=0,
        le=100.0,  # 100: in effect no upper clip
        description="Ratio clipped above at 1 + clip_high (DAPO's clip-higher raises it).",
        json_schema_extra={"acts_when": "off-policy"},
    )
    aggregation: Literal["sequence-mean", "sequence-sum", "token-mean", "constant"] = Field(
        "sequence-mean",
        description="How token losses become one number: sequence-mean averages each completion's tokens "
        "then the completions (GRPO); sequence-sum sums each completion's tokens, then averages the "
        "completions (RLOO: one action per completion); token-mean averages all tokens of the batch (DAPO); "
        "constant sums tokens and divides by completions x max_new_tokens (Dr. GRPO).",
    )
    kl_coef: float = Field(
        0.0,
        ge=0,
        le=100.0,
        description="Weight of the KL penalty to the frozen initial policy (k3 estimator; the log-gap is "
        "clamped to +-20 and the per-token value to 10, so one runaway token cannot make the loss inf).",
    )
    kl_estimator: Literal["k3", "k2", "k1"] = Field(
        "k3",
        description="The per-token estimate of KL(pi || pi_ref) in the loss, with d = log pi - log pi_ref: "
        "k3 = exp(-d) + d - 1 (unbiased, never negative); k2 = d^2 / 2 (its gradient is the reverse KL's "
        "on-policy); k1 = d (unbiased in value, but its expected gradient on-policy is 0).",
        json_schema_extra={"acts_when": "kl-on"},
    )
    entropy_coef: float = Field(0.0, ge=0, le=10.0, description="Weight of the entropy bonus.")
    old_logprobs: Literal["auto", "sampler", "recompute"] = Field(
        "auto",
        description="Where pi_old of the ratio comes from. sampler: the log-probabilities the rollout "
        "backend returned; recompute: one forward of the trainer's own before the first update (the "
        "sampler's kept for policy/sampler_logprob_diff and truncated-is's weight); auto: recompute unless "
        "the policy is float32 and sampled in the learner's process by `hf`, where the two agree to rounding. "
        "A row an older policy sampled (replayed, continued, asynchronous) is always recomputed: its pi_old is "
        "the proximal policy of the decoupled form (behaviour_is_bound).",
    )
    behaviour_is_bound: float = Field(
        5.0,
        ge=1,
        le=1e6,
        description="C: a row an older policy sampled (a replayed or continued row, an asynchronous batch) is "
        "clipped against the learner's policy before this step's update (pi_prox) and weighted by "
        "min(pi_prox / pi_behaviour, C), the decoupled form of Hilton et al. 2021 and AReaL, so its staleness "
        "is corrected however pi_old was obtained. Fresh rows are unweighted.",
        json_schema_extra={"acts_when": "stale-rows"},
    )


OBJECTIVES.declare(
    "token-clip",
    "workers.pipeline.objective.base:TokenClip",
    summary="PPO's clipped surrogate per token (Schulman et al. 2017, eq. 7; GRPO: Shao et al. 2024, eq. 3).",
    knobs=ObjectiveKnobs,
)


OBJECTIVES.declare(
    "sequence-clip",
    "workers.pipeline.objective.base:SequenceClip",
    summary="GSPO's sequence-level ratio, clipped per sequence (Zheng et al. 2025, eq. 5-7).",
    knobs=ObjectiveKnobs,
    acts_when="off-policy",
)


class TruncatedISKnobs(ObjectiveKnobs):
    """The token clip's knobs, and how the sampler/learner mismatch weight is bounded."""

    is_bound: float = Field(
        2.0,
        ge=1,
        le=1e6,
        description="C: the bound of the importance weight pi_old / pi_sampler (pi_old the trainer's own "
        "recomputed log-probabilities, pi_sampler the rollout backend's); 2 in Yao et al. 2025.",
    )
    is_mode: Literal["truncate", "mask"] = Field(
        "truncate",
        description="truncate: a weight over the bound becomes the bound, min(w, C) (TIS); mask: a token "
        "whose weight is over the bound gets weight 0 and the others keep theirs, w 1[w <= C] (MIS).",
    )
    is_level: Literal["token", "sequence"] = Field(
        "token",
        description="token: each token's own weight; sequence: the product of a completion's token weights "
        "(its sequence likelihood ratio, no length normalisation), bounded once and shared by its tokens.",
    )


def check_recomputed_old_logprobs(cfg) -> None:
    """The weight compares the trainer's pi_old with the sampler's: with the sampler's as pi_old it is always 1.

    auto is fine: it keeps the sampler's numbers only where the two agree to rounding (a float32 `hf` policy).
    """
    if cfg.objective.old_logprobs == "sampler":
        raise ValueError(
            "objective.old_logprobs: truncated-is weighs the trainer's recomputed pi_old against the sampler's; "
            "with the sampler's log-probabilities as pi_old every weight is 1: use auto or recompute"
        )


OBJECTIVES.declare(
    "truncated-is",
    "workers.pipeline.objective.offpolicy:TruncatedIS",
    summary="The token clip weighted by the truncated or masked ratio pi_old / pi_sampler (TIS, Yao et al. 2025).",
    knobs=TruncatedISKnobs,
    check=check_recomputed_old_logprobs,
)


class MinPrefixKnobs(ObjectiveKnobs):
    """The token clip's knobs, and which prefix the minimum is taken over."""

    prefix: Literal["preceding", "inclusive"] = Field(
        "preceding",
        description="preceding: token t's ratio is min_{j<t} rho_j x rho_t, the smallest ratio of the tokens "
        "before it (no gradient) times its own (the paper's form); inclusive: min_{j<=t} rho_j in place of "
        "rho_t, this component's earlier form, kept to compare: once one token's ratio is below 1 - clip_low, "
        "no later token of a negative-advantage completion gets a gradient.",
        json_schema_extra={"acts_when": "off-policy"},
    )


OBJECTIVES.declare(
    "min-prefix-ratio",
    "workers.pipeline.objective.offpolicy:MinPrefixRatio",
    summary="The token clip on rho_t times the smallest ratio of the tokens before it (MinPRO, Lei et al. 2026).",
    knobs=MinPrefixKnobs,
    acts_when="off-policy",
)


class VarianceControlledKnobs(ObjectiveKnobs):
    """The token clip's knobs, and how the effective sample size scales the step."""

    ess_power: float = Field(
        1.0,
        ge=0,
        le=10.0,
        description="The learning rate of an optimizer step is multiplied by ESS^ess_power, ESS = (sum w)^2 / "
        "(n sum w^2) of the minibatch's sequence importance weights w = pi / pi_old (1 on-policy, 1/n when one "
        "sequence dominates); 0 leaves the step alone.",
    )
    baseline: bool = Field(
        True,
        description="Subtract from each advantage the minimum-variance off-policy baseline of its group, "
        "b = sum w^2 A / sum w^2 over the group's sequences in the minibatch (0 on-policy for a group-centred "
        "advantage; a group with one sequence in the minibatch keeps its advantage).",
    )


OBJECTIVES.declare(
    "variance-controlled",
    "workers.pipeline.objective.offpolicy:VarianceControlled",
    summary="The token clip with a minimum-variance off-policy baseline and an ESS-scaled step "
    "(VCPO, Huang et al. 2026).",
    knobs=VarianceControlledKnobs,
    acts_when="off-policy",
)


class FiberGateKnobs(ObjectiveKnobs):
    """The token clip's knobs, its range now the token residual's, and the range of the sequence gate."""

    clip_low: float = Field(
        0.2,
        gt=0,
        lt=1,
        description="Token level: the gradient of a token with A < 0 is gated once its residual ratio r_t = "
        "rho_t / s_i (its ratio over its sequence's length-normalised ratio s_i) falls below 1 - clip_low.",
        json_schema_extra={"acts_when": "off-policy"},
    )
    clip_high: float = Field(
        0.2,
        gt=0,
        le=10,
        description="Token level: the gradient of a token with A > 0 is gated once its residual ratio r_t "
        "rises above 1 + clip_high.",
        json_schema_extra={"acts_when": "off-policy"},
    )
    sequence_clip_low: float = Field(
        3e-4,
        gt=0,
        lt=1,
        description="Sequence level: every token of a completion with A < 0 is gated once the completion's "
        "length-normalised ratio s_i = exp(mean_t log rho_t) falls below 1 - sequence_clip_low (GSPO's 3e-4).",
        json_schema_extra={"acts_when": "off-policy"},
    )
    sequence_clip_high: float = Field(
        4e-4,
        gt=0,
        le=1,
        description="Sequence level: every token of a completion with A > 0 is gated once s_i rises above "
        "1 + sequence_clip_high (GSPO's 4e-4).",
        json_schema_extra={"acts_when": "off-policy"},
    )


OBJECTIVES.declare(
    "fiber-gate",
    "workers.pipeline.objective.fiberpo:FiberGate",
    summary="Two gates for the token clip: on each sequence's length-normalised ratio and on each token's "
    "residual (FiberPO).",
    knobs=FiberGateKnobs,
    acts_when="off-policy",
)


class EwmaProximalKnobs(ObjectiveKnobs):
    """The token clip's knobs, and how far the averaged proximal policy lags the policy."""

    ewma_decay: float = Field(
        0.9,
        ge=0,
        lt=1,
        description="beta of the proximal policy's average of the weights: after each optimizer step it keeps beta "
        "of itself and takes the rest from the policy (bias-corrected), so it lags the policy by about "
        "beta / (1 - beta) optimizer steps (9 at 0.9); 0 makes it the policy as it was before each step.",
    )


OBJECTIVES.declare(
    "ewma-proximal",
    "workers.pipeline.objective.proximal:EwmaProximal",
    summary="The decoupled token clip with an EWMA of the policy's weights as the proximal policy (PPO-EWMA).",
    knobs=EwmaProximalKnobs,
)
