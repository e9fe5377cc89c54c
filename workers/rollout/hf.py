"""`hf`: batched sampling on torch with a KV cache; runs wherever torch runs.

The prompts are left-padded into one batch and prefilled once; the cache is
then repeated n times (or each prompt's own n) so a group's samples share their
prompt's prefill. Rows that continue an earlier completion (a Prefix) are
prefilled one by one with it instead. Each decoding step feeds one token per
row still going. Rows that have emitted the end-of-sequence token, reached
their length limit or been cut by a StopRule leave the batch once a quarter of
it has ended (their rows of the KV cache are dropped): with long-tailed
completion lengths the last tokens of the longest rows no longer pay for a full
batch. A finished row keeps its place in the sampler's draws, so every row's
tokens are those of decoding the whole batch to the end.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from workers import stopping
from workers.rollout import BACKENDS, Generations, Partial, SamplingParams, StopRule


@BACKENDS.register("hf")
class HFBackend:
    """Sampling with transformers models on torch (CPU or CUDA), sharing the policy's weights."""

    def __init__(self, policy):
        self.policy = policy

    def sync_weights(self) -> None:
        pass  # the sampler is the policy itself

    def release_memory(self) -> None:
        pass  # it holds nothing between calls: its KV cache lives only inside generate

    @torch.no_grad()
    def generate(self, prompts, n, params: SamplingParams, generator, limits=None, prefixes=None, stop=None):
        model = self.policy.model
        sizes = torch.tensor([n] * len(prompts) if isinstance(n, int) else list(n), dtype=torch.long)
        limits = torch.tensor(limits if limits is not None else [params.max_new_tokens] * len(prompts))
        was_training = model.training
        if was_training:  # a mode switch walks every module; the model is most often in eval() already
            model.eval()
        with self.policy.computing():  # model.autocast
            if prefixes is None or not any(prefixes):
                state = self.prefill_groups(prompts, sizes)
                prefixes = None
            else:
                state = self.prefill_rows(prompts, sizes, prefixes)
            done = len_of(prefixes, int(sizes.sum()))  # (N,) completion tokens each row already has
            budget = limits.repeat_interleave(sizes) - done  # (N,) tokens each row may still add
            new = self.decode(state, budget.to(state.logits.device), params, generator, stop)
        if was_training:
            model.train()
        return new if prefixes is None else prepend(prefixes, new, self.policy.pad_id)

    def prefill(self, rows: list[list[int]]):
        """One left-padded forward over the rows; its output (cache, last logits), attention mask and positions."""
        input_ids, attention = left_pad(rows, self.policy.pad_id, self.policy.device)  # (R, L)
        positions = (attention.cumsum(-1) - 1).clamp(min=0)
        out = self.policy.model(
            input_ids=input_ids, attention_mask=attention, position_ids=positions, use_cache=True, logits_to_keep=1
        )
        return out, attention, positions

    def prefill_groups(self, prompts, sizes) -> DecodeState:
        """One prefill per prompt; each group's rows share it (the cache is repeated, not recomputed)."""
        device = self.policy.device
        out, attention, positions = self.prefill(prompts)  # (P, L)
        cache = out.past_key_values
        repeats = int(sizes[0]) if bool((sizes == sizes[0]).all()) else sizes.to(device)
        if isinstance(repeats, int):
            if repeats > 1:
                cache.batch_repeat_interleave(repeats)
        else:
            cache.batch_select_indices(torch.arange(len(prompts), device=device).repeat_interleave(repeats))
        return DecodeState(
            cache=cache,
            logits=out.logits[:, -1].repeat_interleave(repeats, dim=0),  # (N, V)
            attention=attention.repeat_interleave(repeats, dim=0),  # (N, L)
            next_position=positions[:, -1:].repeat_interleave(repeats, dim=0) + 1,  # (N, 1)
            hidden=None,
        )

    def prefill_rows(self, prompts, sizes, prefixes) -> DecodeState:
        """One prefill per row of its prompt and its prefix: rows continuing a completion share nothing."""
        owners = torch.arange(len(prompts)).repeat_interleave(sizes).tolist()
        rows = [prompts[g] + list(prefix.tokens if prefix else ()) for g, prefix in zip(owners, prefixes)]
        out, attention, positions = self.prefill(rows)  # (N, L)
        return DecodeState(out.past_key_values, out.logits[:, -1], attention, positions[:, -1:] + 1, None)

    def decode(self, state: DecodeState, budget, params, generator, stop) -> Generations:
        """Sample one token per row per step until every row has ended, reached its budget or been stopped."""
        model, device, eos = self.policy.model, state.logits.device, self.policy.eos_id
        rows = state.logits.shape[0]
        tokens, logprobs = [], []
        finished = torch.zeros(rows, dtype=torch.bool, device=device)
        stopped = torch.zeros(rows, dtype=torch.bool, device=device)
        emitted = torch.zeros(rows, dtype=torch.long, device=device)  # tokens each row produced here
        wants_hidden = bool(stop and stop.wants_hidden)
        # a row that left the batch keeps the hidden state of its last token fed, as it keeps its logits: a stop rule
        # reading every row's state sees an ended row's last, and the rows that prune-while-generating methods cut
        # stop costing a forward at once (they were decoded to the end before)
        batch = ShrinkingBatch(rows)
        logits = state.logits  # (N, V): the next token's, for every row (a finished row's stay as they were)
        for t in range(max(int(budget.max()), 0)):
            stopping.checkpoint()  # a long generation obeys a cancel within the token
            finished |= budget <= t  # a row at its length limit stops here
            if bool(finished.all()):
                break
            token, logprob = sample(logits.float(), params, generator)  # (N,), (N,)
            token = token.masked_fill(finished, self.policy.pad_id)
            tokens.append(token)
            logprobs.append(logprob.masked_fill(finished, 0.0))
            emitted += (~finished).long()
            finished |= token == eos
            if stop is not None:
                cut = self.stop_rows(stop, tokens, logprobs, finished, stopped, state.hidden, t + 1)
                stopped |= cut & ~finished
                finished |= cut
            if batch.shrink(state, finished):
                break  # every row has ended
            out = state.feed(model, batch.of(token), wants_hidden)
            logits = batch.spread(logits, out.logits[:, -1])
            state.hidden = batch.spread_hidden(state.hidden, out.hidden_states[-1][:, -1]) if wants_hidden else None
        if not tokens:  # every row was at its limit already
            empty = torch.zeros(rows, 0, device=device)
            return Generations(empty.long(), empty, empty, budget <= 0, stopped)
        out = finish(torch.stack(tokens, 1), torch.stack(logprobs, 1), eos, emitted)
        out.truncated &= ~stopped
        out.stopped = stopped
        return out

    @staticmethod
    def stop_rows(stop: StopRule, tokens, logprobs, finished, stopped, hidden, count: int) -> torch.Tensor:
        """(N,) bool: the rows the stop rule cuts after `count` tokens (rows already finished stay as they are)."""
        cut = torch.zeros_like(finished)
        if stop.abort is not None and count % stop.every == 0:
            partial = Partial(torch.stack(tokens, 1), torch.stack(logprobs, 1), finished.clone(), hidden)
            cut |= stop.abort(partial).to(finished.device) & ~finished
        ended = finished & ~stopped  # by end-of-sequence or limit, not by an earlier cut
        if stop.finished_rows is not None and int(ended.sum()) >= stop.finished_rows:
            cut |= ~finished
        return cut


@dataclass
class DecodeState:
    """What the decoding loop carries from one token to the next."""

    cache: object  # the model's KV cache, one row per sample
    logits: torch.Tensor  # (N, V) for the next token
    attention: torch.Tensor  # (N, L + t)
    next_position: torch.Tensor  # (N, 1)
    hidden: torch.Tensor | None  # (N, C) last layer at the latest token, when a stop rule asks

    def select(self, rows: torch.Tensor) -> None:
        """Keep these rows (R',) of the batch, in this order, a row given twice copied: cache, attention, positions."""
        self.cache.batch_select_indices(rows)
        self.attention, self.next_position = self.attention[rows], self.next_position[rows]

    def feed(self, model, tokens: torch.Tensor, wants_hidden: bool = False):
        """One forward of each row's next token (R,) through the cache, which it extends; the model's output."""
        self.attention = torch.cat([self.attention, torch.ones_like(self.attention[:, :1])], dim=-1)  # (R, L + t + 1)
        out = model(
            input_ids=tokens[:, None],
            attention_mask=self.attention,
            position_ids=self.next_position,
            past_key_values=self.cache,
            use_cache=True,
            output_hidden_states=wants_hidden,
        )
        self.cache, self.next_position = out.past_key_values, self.next_position + 1
        return out


class ShrinkingBatch:
    """Which of a generation's N rows are still in the decoding batch (and its KV cache).

    Once the rows still going are at most SHRINK_AT of the batch, the ended ones leave it: the
    cache, attention and positions keep only the rows going on. Sampling still draws for all N
    rows (an ended row from its last logits, its token discarded), so the sampler's random
    stream, and every row's tokens, are those of decoding all N rows to the end.
    """

    SHRINK_AT = 0.75  # a shrink copies the cache once; each later token then costs less

    def __init__(self, rows: int):
        self.rows = None  # (R,) the rows of N in the batch, in order; None while it holds all N
        self.size, self.total = rows, rows

    def shrink(self, state: DecodeState, finished: torch.Tensor) -> bool:
        """Drop the ended rows from the batch when enough have ended; whether every row has."""
        going = int((~finished).sum())
        if going == 0:
            return True
        if going <= self.SHRINK_AT * self.size:
            in_batch = finished if self.rows is None else finished[self.rows]
            keep = (~in_batch).nonzero().flatten()  # (R',) positions in the present batch
            state.select(keep)
            self.rows = keep if self.rows is None else self.rows[keep]
            self.size = going
        return False

    def of(self, per_row: torch.Tensor) -> torch.Tensor:
        """The batch's entries of an (N, ...) tensor."""
        return per_row if self.rows is None else per_row[self.rows]

    def spread(self, every_row: torch.Tensor, batch_rows: torch.Tensor) -> torch.Tensor:
        """(N, ...): `every_row` with the batch's rows replaced by `batch_rows` (R, ...)."""
        if self.rows is None:
            return batch_rows
        return every_row.index_copy(0, self.rows, batch_rows.to(every_row.dtype))

    def spread_hidden(self, every_row: torch.Tensor | None, batch_rows: torch.Tensor) -> torch.Tensor:
        """(N, C) hidden states: `spread`, where a row that left the batch before any state was computed has NaN."""
        if every_row is None and self.rows is not None:
            every_row = batch_rows.new_full((self.total, batch_rows.shape[-1]), float("nan"))
        return self.spread(every_row, batch_rows)


def len_of(prefixes, rows: int) -> torch.Tensor:
    """(N,) completion tokens each row starts with."""
    if prefixes is None:
        return torch.zeros(rows, dtype=torch.long)
    return torch.tensor([len(p.tokens) if p else 0 for p in prefixes], dtype=torch.long)


def prepend(prefixes, new: Generations, pad_id: int) -> Generations:
    """Each row's prefix tokens and log-probabilities in front of what was generated after them."""
    rows = []
    for r, prefix in enumerate(prefixes):
        length = int(new.lengths[r])
        head_tokens = list(prefix.tokens) if prefix else []
        head_logprobs = list(prefix.logprobs) if prefix else []
        rows.append((head_tokens + new.tokens[r, :length].tolist(), head_logprobs + new.logprobs[r, :length].tolist()))
    width = max(1, max(len(t) for t, _ in rows))
    tokens = torch.full((len(rows), width), pad_id, dtype=torch.long)
    logprobs = torch.zeros(len(rows), width)
    mask = torch.zeros(len(rows), width)
    for r, (row_tokens, row_logprobs) in enumerate(rows):
        tokens[r, : len(row_tokens)] = torch.tensor(row_tokens, dtype=torch.long)
        logprobs[r, : len(row_logprobs)] = torch.tensor(row_logprobs)
        mask[r, : len(row_tokens)] = 1
    device = new.tokens.device
    return Generations(tokens.to(device), logprobs.to(device), mask.to(device), new.truncated, new.stopped)


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


def finish(tokens: torch.Tensor, logprobs: torch.Tensor, eos_id: int, row_limit=None) -> Generations:
    """Masks from the sampled tokens: everything up to and including the first end-of-sequence token,
    and no further than the row's length limit (N,) when rows have their own."""
    is_eos = tokens == eos_id  # (N, T)
    after_eos = (is_eos.cumsum(-1) - is_eos.long()) > 0
    keep = ~after_eos
    if row_limit is not None:
        keep &= torch.arange(tokens.shape[1], device=tokens.device) < row_limit[:, None]
    mask = keep.float()
    return Generations(tokens=tokens, logprobs=logprobs * mask, mask=mask, truncated=~(is_eos & keep).any(-1))
