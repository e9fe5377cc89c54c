"""`drpo`: the length signal of correct completions, normalised among the correct completions only.

DRPO ("DRPO: Efficient Reasoning via Decoupled Reward Policy Optimization", abstract): adding a
length reward to GRPO's correctness reward lets the group baseline give a correct but long
completion a negative advantage, which discourages valid reasoning. DRPO decouples the two: the
length-based signal of the correct rollouts is normalised within the correct ones alone. Its
positive distribution maximises the length reward under a KL regulariser to the policy, whose
closed form is q*(y) ∝ pi(y) exp(r(y) / lambda); on the policy's own correct samples that is the
self-normalised importance weight

    w_i = exp(r_i / lambda) / sum_{j in P_g} exp(r_j / lambda)          i in P_g, the correct ones of group g

Here it enters GRPO's advantage as a share of the correct completions' advantage:

    base_i = GRPO's group-normalised advantage of the rewards other than the preference one (correctness)
    A_i    = |P_g| w_i base_i              correct, in a group with a wrong completion
    A_i    = |P_g| w_i solved_advantage    correct, in a group with no wrong completion (GRPO: 0)
    A_i    = base_i                        wrong: GRPO's correctness advantage, its length ignored

|P_g| w_i has mean 1 over P_g, so a group's correct completions carry GRPO's total advantage,
redistributed towards the short ones, and a positive factor never turns a sign: a correct
completion is never pushed down for its length. The abstract does not fix how the weights enter
the loss, nor what a group with no wrong completion gets (the discriminative objective still
raises q*'s mass there); both are this module's reading (docs/methods/drpo.md). r is the
preference reward (advantage.preference, the `length` reward by default) times its reward.weights
weight. Shapes: reward parts (N,) each, correct (N,) -> advantages (N,).
"""

from __future__ import annotations

import torch

from workers import metrics
from workers.pipeline.advantage.base import weighted_parts
from workers.pipeline.advantage.drpo import DecoupledLengthKnobs
from workers.pipeline.advantage.group_mean.component import GroupMean
from workers.pipeline.batch import RolloutBatch
from workers.pipeline.stages import AdvantageOutput


def positive_weights(batch: RolloutBatch, preference: torch.Tensor, correct: torch.Tensor, lam: float) -> torch.Tensor:
    """(N,): |P_g| softmax_{P_g}(r / lambda) for a correct sample, 1 for a wrong one."""
    index = batch.group_index
    logits = torch.where(correct, preference / lam, torch.full_like(preference, -torch.inf))  # (N,)
    top = batch.group_reduce(logits, "amax")  # (P,) -inf for a group with no correct sample
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    exp = torch.where(correct, torch.exp(logits - top[index]), torch.zeros_like(logits))  # (N,) <= 1
    total = batch.group_reduce(exp, "sum")  # (P,) >= 1 where the group has a correct sample
    count = batch.group_reduce(correct.float(), "sum")  # (P,)
    return torch.where(correct, count[index] * exp / total[index].clamp(min=1e-30), torch.ones_like(exp))


class DecoupledLengthReward(GroupMean):
    """GRPO's correctness advantage; correct ones share theirs by exp(length reward / lambda) among themselves (DRPO).

    No correct completion turns negative for its length.

    Knobs: advantage.kl_lambda, advantage.preference (the reward that ranks correct completions),
    advantage.solved_advantage, and GRPO's advantage.scale, advantage.eps, advantage.rescale_nonzero.
    Reports pipeline/advantage/solved_groups (share of groups with no wrong completion),
    pipeline/advantage/positive_weight_max (the largest |P| w of a group with two or more correct
    completions, mean over those groups; 1 when none) and pipeline/advantage/correct_negative (share
    of correct completions with a negative advantage: 0 unless a reward other than correctness is
    in the base and pushes one down).
    """

    Knobs = DecoupledLengthKnobs

    def __init__(self, cfg):
        super().__init__(cfg)
        self.lam, self.preference = cfg.advantage.kl_lambda, cfg.advantage.preference
        self.solved_advantage = cfg.advantage.solved_advantage
        self.weights = dict(cfg.reward.weights)

    def __call__(self, batch: RolloutBatch) -> AdvantageOutput:
        rest, preference = weighted_parts(batch, self.weights, self.preference)  # (N,), (N,)
        correct = batch.correct.bool().cpu()  # (N,)
        base = self.estimate(batch, rest)  # GRPO on correctness (every reward but the preference)
        factor = positive_weights(batch, preference, correct, self.lam)  # (N,)
        solved = batch.group_reduce(correct.float(), "amin") == 1  # (P,)
        lead = torch.where(solved[batch.group_index], torch.full_like(factor, self.solved_advantage), base.advantages)
        advantages = torch.where(correct, factor * lead, base.advantages)
        return AdvantageOutput(advantages, base.in_loss, self.stats(batch, factor, correct, solved, advantages))

    @staticmethod
    def stats(batch, factor, correct, solved, advantages) -> dict[str, float]:
        several = batch.group_reduce(correct.float(), "sum") >= 2  # (P,)
        top = batch.group_reduce(torch.where(correct, factor, torch.zeros_like(factor)), "amax")  # (P,)
        return {
            metrics.SOLVED_GROUPS: float(solved.float().mean()),
            metrics.POSITIVE_WEIGHT_MAX: float(top[several].mean()) if several.any() else 1.0,
            metrics.CORRECT_NEGATIVE: float((advantages[correct] < 0).float().mean()) if correct.any() else 0.0,
        }
