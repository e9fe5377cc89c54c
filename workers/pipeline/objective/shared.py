"""What the objective stage's declarations share (no torch here): the knobs every objective has."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from workers.knobs import Knobs


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
