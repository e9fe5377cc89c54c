"""FiberPO's two-level gate of the token clip: on each sequence's ratio and on each token's residual.

Declared, with its knobs, in this folder's __init__.py ("fiber-gate"); preset `fiberpo` (docs/methods/fiberpo.md).
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from workers import metrics
from workers.pipeline.objective.base import masked_mean, token_advantages
from workers.pipeline.objective.fiber_gate import FiberGateKnobs
from workers.pipeline.objective.token_clip.component import TokenClip
from workers.pipeline.stages import LossInputs


class Gates(NamedTuple):
    """Each loss token's two ratio factors and which of its two gates are closed; no gradient."""

    sequence: torch.Tensor  # (B, 1) s_i = exp(mean over the loss tokens of log rho_t)
    residual: torch.Tensor  # (B, T) r_t = rho_t / s_i
    sequence_closed: torch.Tensor  # (B, T) bool: s_i out of its range on the side token t's advantage pushes to
    residual_closed: torch.Tensor  # (B, T) bool: r_t out of its range on that side


class FiberGate(TokenClip):
    """Two gates for the token clip: on each sequence's length-normalised ratio and on each token's residual (FiberPO).

    *Fibration Policy Optimization* (abstract): ratio gating decomposed into a base-level gate on
    trajectory aggregates and a fiber-level gate on per-token residuals. Here the token ratio is
    factored as rho_t = s_i r_t, with s_i = exp(mean_t log rho_t) over completion i's loss tokens
    (GSPO's length-normalised ratio) and r_t = rho_t / s_i (the residual; its geometric mean over the
    completion is 1). Each factor is gated as PPO gates its ratio: for A_t > 0 once it rises above
    its range, for A_t < 0 once it falls below. A token's gradient flows only while both of its gates
    are open, and is then exactly the token clip's (rho_t A_t d log pi(o_t)): a completion whose s_i
    leaves [1 - sequence_clip_low, 1 + sequence_clip_high] is gated as a whole; a token whose r_t leaves
    [1 - clip_low, 1 + clip_high] is gated alone, its siblings untouched. A gated token's value in the
    surrogate is its ratio with the offending factor(s) set to their bound, as PPO's clip does.
    On-policy every factor is 1 and this is the token clip. The sign is each token's own advantage,
    so with a per-sequence advantage the sequence gate closes for the whole completion at once.
    Shapes: logprobs (B, T), advantages (B,) or (B, T). Knobs: objective.sequence_clip_low,
    sequence_clip_high (the sequence range), clip_low, clip_high (the residual range), and the rest
    of the token clip's.
    """

    Knobs = FiberGateKnobs

    def __init__(self, cfg):
        super().__init__(cfg)
        self.sequence_low, self.sequence_high = cfg.objective.sequence_clip_low, cfg.objective.sequence_clip_high

    @torch.no_grad()
    def gates(self, x: LossInputs) -> Gates:
        log_ratio = (x.logprobs - x.old_logprobs) * x.mask  # (B, T); tokens outside the loss count nowhere
        log_sequence = log_ratio.sum(-1, keepdim=True) / x.mask.sum(-1, keepdim=True).clamp(min=1)  # (B, 1)
        sequence, residual = torch.exp(log_sequence), torch.exp(log_ratio - log_sequence)
        advantage = token_advantages(x)  # (B, 1) or (B, T)
        up, down = advantage > 0, advantage < 0
        sequence_closed = (up & (sequence > 1 + self.sequence_high)) | (down & (sequence < 1 - self.sequence_low))
        residual_closed = (up & (residual > 1 + self.high)) | (down & (residual < 1 - self.low))
        return Gates(sequence, residual, sequence_closed.expand_as(residual), residual_closed)

    def clipped(self, x: LossInputs, ratio: torch.Tensor) -> torch.Tensor:
        g = self.gates(x)
        sequence = torch.where(g.sequence_closed, g.sequence.clamp(1 - self.sequence_low, 1 + self.sequence_high),
                               g.sequence)  # fmt: skip
        residual = torch.where(g.residual_closed, g.residual.clamp(1 - self.low, 1 + self.high), g.residual)
        # open: the ratio itself, so the min keeps its gradient; closed: a constant strictly on the
        # pessimistic side of rho_t (a factor moved back to its bound), so the min takes it and the gradient is 0
        return torch.where(g.sequence_closed | g.residual_closed, sequence * residual, ratio)

    @torch.no_grad()
    def weights(self, x: LossInputs) -> tuple[None, dict[str, float]]:
        g = self.gates(x)
        lengths = x.mask.sum(-1)  # (B,)
        in_loss = (lengths > 0).float()
        per_sequence = (g.sequence_closed * x.mask).sum(-1) / lengths.clamp(min=1)  # (B,) share of its tokens
        return None, {
            metrics.SEQUENCE_GATED: masked_mean(per_sequence, in_loss),
            metrics.RESIDUAL_GATED: masked_mean(g.residual_closed.float(), x.mask),
            metrics.SEQUENCE_RATIO_MEAN: masked_mean(g.sequence.squeeze(-1), in_loss),
        }
