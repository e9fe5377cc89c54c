"""The learner's forwards: a batch's rows as model inputs, and the log-probability of every completion token.

    forwards = Forwards(device, pad_id=policy.pad_id, temperature=1.0, length_buckets=1)
    inputs = forwards.inputs(batch, rows, mask)                  # prompts once per group, completions per row
    logprobs, entropy = forwards.logprobs(model, inputs, chunk)  # (B, T) each

The update, the reference policy, the proximal policy and the sample inspector all score completions
through this one path, so their numbers agree to the last bit.
"""

from __future__ import annotations

import contextlib
from typing import Protocol

import torch
import torch.nn.functional as F

from workers.models.policy import autocast_context
from workers.pipeline.batch import RolloutBatch
from workers.rollout.hf import left_pad
from workers.training.packing import length_buckets


class ForwardObserver(Protocol):
    """Sees, without gradient, the log-probabilities of every forward it is passed to (the sample inspector's
    UpdateEntropies): what it reads costs no forward of its own."""

    def take(self, chunk: torch.Tensor | None, logp_all: torch.Tensor, entropy: torch.Tensor | None) -> None:
        """One forward over the rows `chunk` (None: all): `logp_all` (B, T, V), `entropy` (B, T) if computed."""


def token_entropy(logp_all: torch.Tensor) -> torch.Tensor:
    """The entropy (nats) of each position's next-token distribution, from its log-probabilities: (..., V) -> (...)."""
    return -(logp_all.exp() * logp_all).sum(-1)


class Forwards:
    def __init__(
        self,
        device: torch.device,
        pad_id: int,
        temperature: float,
        length_buckets: int,
        one_forward: bool = False,
        autocast: torch.dtype | None = None,
    ):
        self.device, self.pad_id = device, pad_id
        self.autocast = autocast  # model.autocast: the networks run under torch.autocast of this dtype (None: off)
        self.temperature = temperature  # the sampling temperature: log-probabilities are those the sampler drew from
        self.length_buckets = length_buckets  # schedule.length_buckets: 1 forwards every row at full width
        # model.gradient_checkpointing: a checkpointed network keeps no cache in training mode, so the prompt is
        # not forwarded once per group; each row forwards its prompt and completion together
        self.one_forward = one_forward

    def inputs(self, batch: RolloutBatch, rows: torch.Tensor, mask: torch.Tensor) -> dict[str, torch.Tensor]:
        """The rows' prompts (left-padded, each distinct prompt once) and completions (right-padded), every
        completion token attended; `mask` (B, T), kept as inputs["mask"], says which of them the loss reads.

        The two differ when a component keeps only some tokens in the loss (an advantage's token_mask): a token
        left out of the loss is still in the context of the tokens after it, as it was when they were sampled.
        A group's rows share their prompt, so the prompts are kept once per group (P rows) and `prompt_of` (B,)
        says which one each row continues: `logprobs` runs the network over each prompt once, not once per row.
        """
        device = self.device
        groups, prompt_of = torch.unique(batch.group_index[rows.cpu()], return_inverse=True)  # (P,), (B,)
        prompt_ids, prompt_mask = left_pad([batch.prompt_ids[g] for g in groups.tolist()], self.pad_id, device)
        completion = batch.tokens[rows.to(batch.tokens.device)].to(device)  # (B, T)
        attended = batch.mask[rows.to(batch.mask.device)].to(device)  # (B, T) every sampled token
        prompt_of = prompt_of.to(device)
        attention = torch.cat([prompt_mask[prompt_of], attended.long()], dim=1)  # (B, L+T)
        return {
            "prompt_ids": prompt_ids,  # (P, L)
            "prompt_mask": prompt_mask,  # (P, L)
            "prompt_of": prompt_of,  # (B,) the row of prompt_ids each row continues
            "attention_mask": attention,
            "position_ids": (attention.cumsum(-1) - 1).clamp(min=0),  # (B, L+T)
            "completion": completion,  # (B, T)
            "mask": mask,
        }

    def logprobs(self, model, inputs, chunk=None, with_entropy=False, record: ForwardObserver | None = None):
        """log pi(o_t) of the completion tokens (B, T), at the sampling temperature; and the entropy (B, T) if asked.

        With schedule.length_buckets > 1, the rows go in buckets of similar length (training/packing.py), each
        forwarded padded to its own longest attended token; the positions past it are 0 in both results.
        """
        if self.length_buckets == 1:
            return self.bucket_logprobs(model, inputs, chunk, with_entropy, record)
        rows = chunk if chunk is not None else torch.arange(len(inputs["completion"]))
        parts, order = [], []
        for at, bucket_width in length_buckets(self.extents(inputs, rows), self.length_buckets):
            parts.append(self.padded_logprobs(model, inputs, rows[at.to(rows.device)], bucket_width, with_entropy,
                                              record))  # fmt: skip
            order.append(at)
        back = torch.argsort(torch.cat(order).to(parts[0][0].device))  # bucket order -> the rows' own order
        logprobs = torch.cat([p for p, _ in parts])[back]
        entropy = torch.cat([e for _, e in parts])[back] if with_entropy else None
        return logprobs, entropy

    def extents(self, inputs, rows: torch.Tensor) -> torch.Tensor:
        """(B,) each row's completion positions up to its last attended one (its forward's width unpadded)."""
        width = inputs["prompt_ids"].shape[1]
        attended = inputs["attention_mask"][rows.to(inputs["attention_mask"].device), width:]  # (B, T)
        positions = torch.arange(1, attended.shape[1] + 1, device=attended.device)
        return (attended * positions).amax(1) if attended.shape[1] else attended.sum(1)

    def padded_logprobs(self, model, inputs, rows: torch.Tensor, width: int, with_entropy=False, record=None):
        """`bucket_logprobs` of `rows` forwarded at `width` completion positions, padded back to the full width
        with 0: for rows none of which attends past `width`, the numbers of a forward at full width."""
        logprobs, entropy = self.bucket_logprobs(model, inputs, rows, with_entropy, record, max(width, 1))
        pad = (0, inputs["completion"].shape[1] - logprobs.shape[1])
        return F.pad(logprobs, pad), F.pad(entropy, pad) if entropy is not None else None

    def bucket_logprobs(
        self, model, inputs, chunk=None, with_entropy=False, record: ForwardObserver | None = None, length=None
    ):
        """`logprobs` of the rows `chunk` (None: every row), over their first `length` completion positions
        (None: all of them).

        Two forwards: the chunk's distinct prompts (P rows), then its completions (B rows) attending to their
        prompt's keys and values, gathered from the first's cache (the gradient flows back through them). Causal
        attention makes a prompt's states the same in every row that continues it, so this is the one-forward
        result over (B, L+T) without computing the prompt B/P times; the last completion token predicts
        nothing the loss reads, so it is not fed. `record` (the update's) takes, without gradient, the entropies
        of the rows it wants from the same log-probabilities.
        """
        pick = (lambda x: x) if chunk is None else (lambda x: x[chunk])
        width = inputs["prompt_ids"].shape[1]
        completion = pick(inputs["completion"])[:, :length]
        length, span = completion.shape[1], width + completion.shape[1]
        attention, positions = inputs["attention_mask"][:, :span], inputs["position_ids"][:, :span]
        with self.computing():
            if self.one_forward:
                logits = self.one_forward_logits(model, inputs, pick, completion, pick(attention), pick(positions))
            else:
                logits = self.shared_prompt_logits(model, inputs, pick, completion, attention, positions)
        return self.scored(logits, completion, chunk, with_entropy, record)

    def computing(self) -> contextlib.AbstractContextManager:
        return autocast_context(self.device, self.autocast)

    def shared_prompt_logits(self, model, inputs, pick, completion, attention, positions) -> torch.Tensor:
        """(B, T, V): the chunk's distinct prompts forwarded once, then each row's completion (but its last token)
        attending to its prompt's cached keys and values."""
        width, length = inputs["prompt_ids"].shape[1], completion.shape[1]
        used, owner = torch.unique(pick(inputs["prompt_of"]), return_inverse=True)  # (P,), (B,)
        prompt_mask = inputs["prompt_mask"][used]  # (P, L)
        prefix = model(
            input_ids=inputs["prompt_ids"][used],
            attention_mask=prompt_mask,
            position_ids=(prompt_mask.cumsum(-1) - 1).clamp(min=0),
            use_cache=True,
            logits_to_keep=1,
        )
        logits = prefix.logits[:, -1][owner, None]  # (B, 1, V): the prompt's last position predicts token 0
        if length > 1:
            cache = prefix.past_key_values
            cache.batch_select_indices(owner)
            rest = model(
                input_ids=completion[:, :-1],
                attention_mask=pick(attention)[:, :-1],
                position_ids=pick(positions)[:, width:-1],
                past_key_values=cache,
                use_cache=True,
            ).logits  # (B, T-1, V): completion position t predicts token t+1
            logits = torch.cat([logits, rest], dim=1)  # (B, T, V)
        return logits[:, :length]  # (B, T, V) when T is 0 too: rows with no completion token have nothing to score

    def one_forward_logits(self, model, inputs, pick, completion, attention, positions) -> torch.Tensor:
        """(B, T, V): each row's prompt and completion (but its last token) in one forward, the logits kept only
        where they predict a completion token (the prompt's last position onwards)."""
        length = completion.shape[1]
        prompts = inputs["prompt_ids"][pick(inputs["prompt_of"])]  # (B, L)
        fed = prompts.shape[1] + max(length - 1, 0)
        logits = model(
            input_ids=torch.cat([prompts, completion[:, : max(length - 1, 0)]], dim=1),
            attention_mask=attention[:, :fed],
            position_ids=positions[:, :fed],
            use_cache=False,
            logits_to_keep=max(length, 1),
        ).logits
        return logits[:, :length]

    def scored(self, logits, completion, chunk, with_entropy, record):
        """The completion tokens' log-probabilities (B, T) at the sampling temperature, and the entropies if asked."""
        logp_all = torch.log_softmax(logits.float() / self.temperature, dim=-1)
        logprobs = logp_all.gather(-1, completion[..., None])[..., 0]  # (B, T)
        entropy = token_entropy(logp_all) if with_entropy else None  # (B, T)
        if record is not None:
            record.take(chunk, logp_all, entropy)
        return logprobs, entropy
