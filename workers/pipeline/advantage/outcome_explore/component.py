"""`outcome-explore`: GRPO on rewards shaped by exploration bonuses over final answers, not tokens.

"Outcome-based Exploration for LLM Reasoning" (2025, abstract): outcome-rewarded RL loses generation
diversity, and reasoning tasks admit few distinct answers, so exploration can be counted over answers.
Two bonuses, both added to the reward before GRPO's group normalisation:

    historical (UCB-style):  h_i = c_hist / sqrt(N_i)                  N_i >= 1
    batch (repetition):      b_i = c_batch * (m_i - 1) / (n - 1)        n > 1 (0 for a group of one)
    r_i' = r_i + h_i - b_i

a_i is completion i's answer (the task's answer_key; None when it gives none); N_i the completions of its
prompt that gave a_i over the whole run, this step's included (the prompt history, updated with the step's
groups before the advantage stage, so a never-seen answer given once has N = 1 and the largest bonus);
m_i the samples of i's group, of n, whose answer is a_i (itself included). A completion with no answer gets
no historical bonus, and the answerless completions of a group count as one repeated answer for the
penalty (so a group cannot dodge the penalty by giving no answer). With apply_to = incorrect only the
wrong completions are shaped. The advantage is GRPO's (r' - mean(r')) / (std(r') + eps) over each group.
The abstract fixes neither the UCB form nor the penalty's; these are this component's, see
docs/methods/outcome-explore.md.

Shapes: rewards, answer_counts (N,) -> advantages (N,). Knobs: advantage.history_bonus, batch_penalty,
apply_to, and GRPO's advantage.scale, eps, rescale_nonzero.
"""

from __future__ import annotations

from collections import Counter

import torch

from workers import metrics
from workers.pipeline.advantage.group_mean.component import GroupMean
from workers.pipeline.advantage.outcome_explore import OutcomeExplorationKnobs
from workers.pipeline.batch import RolloutBatch
from workers.pipeline.stages import AdvantageOutput


def repeats(batch: RolloutBatch) -> torch.Tensor:
    """(N,): m_i, the samples of each sample's group whose answer is its own (None answers are one answer)."""
    out = []
    for g in range(batch.num_groups):
        answers = batch.answers[batch.offsets[g] : batch.offsets[g + 1]]
        counts = Counter(answers)
        out += [counts[a] for a in answers]
    return torch.tensor(out, dtype=torch.float)


def history_bonus(batch: RolloutBatch, coef: float) -> torch.Tensor:
    """(N,): c_hist / sqrt(N_i) for a sample with an answer (N_i clamped to >= 1), 0 without one."""
    answered = torch.tensor([a is not None for a in batch.answers])
    return torch.where(answered, coef / batch.answer_counts.clamp(min=1).sqrt(), torch.zeros(batch.num_samples))


def batch_penalty(batch: RolloutBatch, coef: float) -> torch.Tensor:
    """(N,): c_batch (m_i - 1) / (n - 1), n the size of i's group; 0 in a group of one."""
    sizes = torch.tensor(batch.group_sizes, dtype=torch.float)[batch.group_index]  # (N,)
    return coef * (repeats(batch) - 1) / (sizes - 1).clamp(min=1)


class OutcomeExploration(GroupMean):
    """GRPO on r + c/sqrt(count of the answer for the prompt) - penalty for answers repeated in the group.

    Outcome-based exploration, historical and batch; see the module docstring for the formulas.

    Reports pipeline/advantage/outcome_bonus_mean (the net bonus h - b added to a reward, batch mean),
    .../outcome_history_bonus_mean, .../outcome_batch_penalty_mean (over the shaped samples) and
    .../distinct_answers (distinct answers given per group, mean).
    """

    Knobs = OutcomeExplorationKnobs

    def __init__(self, cfg):
        super().__init__(cfg)
        knobs = cfg.advantage
        self.history_coef, self.batch_coef, self.apply_to = knobs.history_bonus, knobs.batch_penalty, knobs.apply_to

    def shaped_rewards(self, batch: RolloutBatch) -> tuple[torch.Tensor, dict[str, float]]:
        """(N,) the rewards plus the bonuses, and the bonuses' statistics."""
        if batch.answer_counts is None or len(batch.answers) != batch.num_samples:
            raise ValueError(
                "outcome-explore needs the batch's answers and answer_counts; the trainer fills them for "
                'components that declare needs=("answer_counts",)'
            )
        shaped = torch.ones(batch.num_samples, dtype=torch.bool)
        if self.apply_to == "incorrect":
            shaped = ~batch.correct.bool().cpu()
        bonus = history_bonus(batch, self.history_coef) * shaped  # (N,)
        penalty = batch_penalty(batch, self.batch_coef) * shaped  # (N,)
        net = bonus - penalty
        distinct = [
            len({a for a in batch.answers[batch.offsets[g] : batch.offsets[g + 1]] if a is not None})
            for g in range(batch.num_groups)
        ]
        stats = {
            metrics.OUTCOME_BONUS_MEAN: float(net.mean()),
            metrics.OUTCOME_HISTORY_BONUS_MEAN: float(bonus[shaped].mean()) if shaped.any() else 0.0,
            metrics.OUTCOME_BATCH_PENALTY_MEAN: float(penalty[shaped].mean()) if shaped.any() else 0.0,
            metrics.DISTINCT_ANSWERS: sum(distinct) / max(len(distinct), 1),
        }
        return batch.rewards.float().cpu() + net, stats

    def __call__(self, batch: RolloutBatch) -> AdvantageOutput:
        rewards, stats = self.shaped_rewards(batch)
        out = self.estimate(batch, rewards)  # GRPO over the shaped rewards, every group size
        return AdvantageOutput(out.advantages, out.in_loss, stats)
