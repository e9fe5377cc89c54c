"""Micro-batches bounded by tokens (schedule.micro_batch_tokens): an optimizer step's rows forwarded and
back-propagated in parts, so that the memory a step's activations and logits take is bounded by tokens, not rows.

A real model's logits are the largest tensor of a step (rows x positions x a vocabulary of 49,152 for SmolLM2:
800 MB in float32 for 32 rows of 128 tokens), and rows of completions grow with their length; a bound in rows
(TRL's per-device batch size) has to be set for the longest. A bound in tokens fits as many short rows as fit.

The objective still sees the whole minibatch: its loss can couple rows (a token mean over the chunk, a group
statistic, VCPO's ESS), so it cannot be summed part by part. The chunk's log-probabilities are first computed
part by part without gradient; the loss is taken of them as leaves, and its gradient with respect to each row's
log-probabilities (and entropies) kept; then each part is forwarded again with gradient and back-propagated with
that gradient. By the chain rule the sum over parts is the gradient of the one-forward loss, for any objective
(up to the rounding of other batch shapes). The price is one forward without gradient per optimizer step.

    parts = token_parts(extents, prompt_width=L, budget=4096)   # [row positions, ...], each within the budget
"""

from __future__ import annotations

import torch


def token_parts(extents: torch.Tensor, prompt_width: int, budget: int) -> list[torch.Tensor]:
    """Positions into `extents` (B,) (each row's completion positions up to its last attended one), split into
    parts whose padded forward holds at most `budget` tokens: rows x (prompt width + the part's longest row).

    Rows go longest first, so each part pads to its first row and holds rows of similar length. A row longer
    than the budget on its own forms a part alone: a row cannot be split.
    """
    order = torch.argsort(extents.cpu(), descending=True, stable=True)
    parts, current, width = [], [], 0
    for row in order.tolist():
        if current and (len(current) + 1) * width > budget:
            parts.append(torch.tensor(current))
            current = []
        if not current:
            width = prompt_width + int(extents[row])
        current.append(row)
    if current:
        parts.append(torch.tensor(current))
    return parts


class LossLeaves:
    """The chunk's log-probabilities (and entropies) as leaves the loss is taken of, filled part by part."""

    def __init__(self, logprobs: torch.Tensor, entropy: torch.Tensor | None):
        self.logprobs = logprobs.requires_grad_(True)
        self.entropy = entropy.requires_grad_(True) if entropy is not None else None

    def surrogate(self, part: torch.Tensor, logprobs: torch.Tensor, entropy: torch.Tensor | None) -> torch.Tensor:
        """A scalar whose gradient through the part's forward is the loss's gradient through those rows."""
        at = part.to(self.logprobs.device)
        total = (logprobs * self.logprobs.grad[at]).sum()
        if self.entropy is not None and self.entropy.grad is not None:
            total = total + (entropy * self.entropy.grad[at]).sum()
        return total
