"""`d3s`: train on the rollouts that maximise the advantage variance, and on their highest |A| x entropy tokens.

D³S (Dynamic Dual-Level Down-Sampling, 2025; the seed list, "Learning More with Less"). GRPO's
group-normalised advantages are computed on the whole group; then

- sample level: in each group, the k = ceil(share x n) rollouts whose advantages have the largest
  variance stay in the loss (the rest stay in the baseline only). For values on a line the
  variance-maximising k-subset is always some of the lowest plus the rest of the highest values,
  so the k + 1 ways of splitting k between the two ends are tried and the best is kept: exact,
  in O(n log n + k) per group.
- token level: of the kept rollouts' tokens, the share with the largest |A_i| x H_i,t stays in
  the loss, where H_i,t is the entropy of the policy at token t. The batch holds the sampler's
  log-probability of each drawn token, whose negative (the surprisal) is an unbiased one-sample
  estimate of that entropy; it is used as H, so no extra forward pass is needed.

Both shares follow a schedule that starts aggressive and relaxes to keep everything
(curriculum-style): share(t) = start + (1 - start) x min(1, t / relax_steps), t counted in the
batches the estimator has scored.
"""

from __future__ import annotations

import math

import torch

from workers.pipeline.advantage.d3s import D3SKnobs
from workers.pipeline.advantage.group_mean.component import GroupMean
from workers.pipeline.batch import RolloutBatch
from workers.pipeline.stages import AdvantageOutput


def max_variance_subset(values: torch.Tensor, k: int) -> list[int]:
    """Indices of the k of `values` (n,) whose variance is largest: j lowest and k - j highest, best j."""
    n = len(values)
    if k >= n:
        return list(range(n))
    order = values.argsort(stable=True).tolist()
    best, best_var = None, -1.0
    for low in range(k + 1):
        picked = order[:low] + order[n - (k - low) :]
        var = float(values[picked].var(unbiased=False))
        if var > best_var + 1e-12:
            best, best_var = picked, var
    return sorted(best)


def relaxed(start: float, step: int, relax_steps: int) -> float:
    return start + (1 - start) * min(1.0, step / relax_steps)


class DualLevelDownSampling(GroupMean):
    """GRPO advantages; train only each group's max-variance rollouts and their top |A|·H tokens, relaxing (D³S).

    Knobs: advantage.sample_share, advantage.token_share, advantage.relax_steps (and GRPO's scale, eps).
    Reports pipeline/advantage/kept_samples and pipeline/advantage/kept_tokens (shares of the batch).
    """

    Knobs = D3SKnobs

    def __init__(self, cfg):
        super().__init__(cfg)
        a = cfg.advantage
        self.sample_share, self.token_share, self.relax_steps = a.sample_share, a.token_share, a.relax_steps
        self.scored = 0  # batches scored so far: the schedule's clock

    def __call__(self, batch: RolloutBatch) -> AdvantageOutput:
        out = super().__call__(batch)
        sample_share = relaxed(self.sample_share, self.scored, self.relax_steps)
        token_share = relaxed(self.token_share, self.scored, self.relax_steps)
        self.scored += 1
        in_loss = torch.zeros(batch.num_samples, dtype=torch.bool)
        for g in range(batch.num_groups):
            start, end = batch.offsets[g], batch.offsets[g + 1]
            k = max(2, math.ceil(sample_share * (end - start)))
            in_loss[[start + i for i in max_variance_subset(out.advantages[start:end], k)]] = True
        token_mask = self.top_tokens(batch, out.advantages, in_loss, token_share)
        tokens = batch.mask.cpu().bool()
        return AdvantageOutput(
            out.advantages,
            in_loss,
            stats={
                "pipeline/advantage/kept_samples": float(in_loss.float().mean()),
                "pipeline/advantage/kept_tokens": float((token_mask & tokens).sum() / tokens.sum().clamp(min=1)),
            },
            token_mask=token_mask,
            left_out="down-sampled (D³S)",
        )

    @staticmethod
    def top_tokens(batch: RolloutBatch, advantages: torch.Tensor, in_loss: torch.Tensor, share: float) -> torch.Tensor:
        """(N, T) bool: of the completion tokens of rows in the loss, the `share` with the largest |A| x H."""
        tokens = batch.mask.cpu().bool() & in_loss[:, None]  # (N, T)
        entropy = -batch.logprobs.detach().cpu().float()  # (N, T): the drawn token's surprisal
        score = (advantages.abs()[:, None] * entropy).masked_fill(~tokens, float("-inf"))
        keep = math.ceil(share * int(tokens.sum()))
        if keep >= int(tokens.sum()):
            return tokens
        chosen = torch.zeros_like(tokens)
        chosen.view(-1)[score.view(-1).topk(keep).indices] = True
        return chosen & tokens
