"""`hf`: batched sampling on torch with a KV cache; runs wherever torch runs.

The prompts are left-padded into one batch and prefilled once; the cache is
then repeated n times so a group's samples share their prompt's prefill. Each
decoding step feeds one token per row. Rows that have emitted the
end-of-sequence token keep decoding padding until every row is done or
max_new_tokens is reached.
"""

from __future__ import annotations

import torch

from workers.rollout import BACKENDS, Generations, SamplingParams


@BACKENDS.register("hf")
class HFBackend:
    """Sampling with transformers models on torch (CPU or CUDA), sharing the policy's weights."""

    def __init__(self, policy):
        self.policy = policy

    def sync_weights(self) -> None:
        pass  # the sampler is the policy itself

    @torch.no_grad()
    def generate(self, prompts, n, params: SamplingParams, generator) -> Generations:
        model, device = self.policy.model, self.policy.device
        was_training = model.training
        model.eval()
        input_ids, attention = left_pad(prompts, self.policy.pad_id, device)  # (P, L)
        positions = (attention.cumsum(-1) - 1).clamp(min=0)
        out = model(
            input_ids=input_ids, attention_mask=attention, position_ids=positions, use_cache=True, logits_to_keep=1
        )
        cache = out.past_key_values
        if n > 1:
            cache.batch_repeat_interleave(n)
        logits = out.logits[:, -1].repeat_interleave(n, dim=0)  # (N, V)
        attention = attention.repeat_interleave(n, dim=0)  # (N, L)
        next_position = positions[:, -1:].repeat_interleave(n, dim=0) + 1  # (N, 1)

        rows = logits.shape[0]
        tokens, logprobs = [], []
        finished = torch.zeros(rows, dtype=torch.bool, device=device)
        for _ in range(params.max_new_tokens):
            token, logprob = sample(logits.float(), params, generator)  # (N,), (N,)
            token = token.masked_fill(finished, self.policy.pad_id)
            tokens.append(token)
            logprobs.append(logprob.masked_fill(finished, 0.0))
            finished |= token == self.policy.eos_id
            if bool(finished.all()):
                break
            attention = torch.cat([attention, torch.ones_like(attention[:, :1])], dim=-1)
            out = model(
                input_ids=token[:, None],
                attention_mask=attention,
                position_ids=next_position,
                past_key_values=cache,
                use_cache=True,
            )
            cache, logits, next_position = out.past_key_values, out.logits[:, -1], next_position + 1
        model.train(was_training)
        return finish(torch.stack(tokens, 1), torch.stack(logprobs, 1), self.policy.eos_id)


def left_pad(prompts: list[list[int]], pad_id: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(prompts), width), dtype=torch.long)
    for i, prompt in enumerate(prompts):
        ids[i, width - len(prompt) :] = torch.tensor(prompt)
        attention[i, width - len(prompt) :] = 1
    return ids.to(device), attention.to(device)


def sample(logits: torch.Tensor, params: SamplingParams, generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Draw one token per row; return it and its log-probability under the temperature-scaled policy.

    The log-probability is that of the full softmax at the sampling temperature,
    the same quantity the trainer recomputes, so their ratio is 1 on-policy;
    top-k/top-p only narrow which tokens can be drawn.
    """
    if params.temperature == 0:
        token = logits.argmax(-1)
        return token, torch.log_softmax(logits, -1).gather(-1, token[:, None])[:, 0]
    scaled = logits / params.temperature  # (N, V)
    logp = torch.log_softmax(scaled, -1)
    narrowed = restrict(scaled, params.top_k, params.top_p)
    token = torch.multinomial(torch.softmax(narrowed, -1), 1, generator=generator)[:, 0]
    return token, logp.gather(-1, token[:, None])[:, 0]


def restrict(scaled: torch.Tensor, top_k: int, top_p: float) -> torch.Tensor:
    """Set logits outside the top-k and outside the top-p nucleus to -inf."""
    if top_k and top_k < scaled.shape[-1]:
        kth = scaled.topk(top_k, dim=-1).values[:, -1:]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    if top_p < 1.0:
        ordered, order = scaled.sort(dim=-1, descending=True)
        mass_before = ordered.softmax(-1).cumsum(-1) - ordered.softmax(-1)
        drop = mass_before >= top_p  # keeps the token that crosses top_p
        scaled = scaled.masked_fill(drop.scatter(-1, order, drop), float("-inf"))
    return scaled


def finish(tokens: torch.Tensor, logprobs: torch.Tensor, eos_id: int) -> Generations:
    """Masks from the sampled tokens: everything up to and including the first end-of-sequence token."""
    is_eos = tokens == eos_id  # (N, T)
    after_eos = (is_eos.cumsum(-1) - is_eos.long()) > 0
    mask = (~after_eos).float()
    return Generations(tokens=tokens, logprobs=logprobs * mask, mask=mask, truncated=~is_eos.any(-1))
