"""`grpo-lambda`: a length penalty that counts only in groups whose accuracy is already high.

GRPO-lambda ("Stable Reinforcement Learning for Efficient Reasoning", abstract): a length-penalty
reward makes GRPO shorten completions until accuracy collapses. GRPO-lambda watches the share of
correct completions in each group: a low share switches the group to the length-agnostic 0/1
reward, a high share keeps the length penalty. Here, with p_g the pass rate of group g (the
verifier's verdicts, batch.correct) and the run's reward parts r_k,i weighted by reward.weights:

    r_i = sum_{k != penalty} w_k r_k,i + [p_g >= threshold] * w_penalty r_penalty,i
    A_i = (r_i - mean_g(r)) / (std_g(r) + eps)                       GRPO's normalisation, per group

so a group below the threshold is scored exactly as GRPO scores correctness alone (with the
preset's rewards, correct only), and a group at or above it as GRPO scores correct + length.
The abstract does not fix the threshold or the penalty's form: the penalty is the platform's
`length` reward (-length / max_new_tokens) at its reward.weights weight, and the threshold is
advantage.accuracy_threshold. Shapes: reward parts (N,) each, correct (N,) -> advantages (N,).
"""

from __future__ import annotations

from workers import metrics
from workers.pipeline.advantage.base import weighted_parts
from workers.pipeline.advantage.group_mean.component import GroupMean
from workers.pipeline.advantage.grpo_lambda import AccuracyGatedKnobs
from workers.pipeline.batch import RolloutBatch
from workers.pipeline.stages import AdvantageOutput


class AccuracyGatedPenalty(GroupMean):
    """GRPO's advantage with the length penalty only in groups whose pass rate reaches a threshold (GRPO-lambda).

    Groups below the threshold are scored by correctness alone.

    Knobs: advantage.accuracy_threshold, advantage.penalty (the gated reward function), and GRPO's
    advantage.scale, advantage.eps, advantage.rescale_nonzero. Reports
    pipeline/advantage/penalty_gated_groups (share of groups the penalty applied to) and
    pipeline/advantage/gated_penalty_mean (the weighted penalty, mean over those groups' samples; 0 when none).
    """

    Knobs = AccuracyGatedKnobs

    def __init__(self, cfg):
        super().__init__(cfg)
        self.threshold, self.penalty = cfg.advantage.accuracy_threshold, cfg.advantage.penalty
        self.weights = dict(cfg.reward.weights)

    def __call__(self, batch: RolloutBatch) -> AdvantageOutput:
        rest, penalty = weighted_parts(batch, self.weights, self.penalty)  # (N,), (N,)
        pass_rate = batch.group_reduce(batch.correct.float().cpu(), "mean")  # (P,)
        # a small tolerance, so that a pass rate equal to the threshold in exact arithmetic (3/4 vs 0.75) counts
        gated = pass_rate >= self.threshold - 1e-6  # (P,)
        on = gated[batch.group_index]  # (N,)
        out = self.estimate(batch, rest + on.float() * penalty)
        out.stats = {
            metrics.PENALTY_GATED_GROUPS: float(gated.float().mean()),
            metrics.GATED_PENALTY_MEAN: float(penalty[on].mean()) if on.any() else 0.0,
        }
        return out
