"""`vllm`: sampling with an offline vLLM engine on the learner's CUDA GPU.

    pip install -e '.[gpu]'        # vLLM 0.26.0, whose torch pin (2.11) is the GPU image's
    rollout: {backend: vllm}

The policy's weights and tokenizer are written once (save_pretrained) to a temporary
directory the engine loads; after each update `sync_weights` pushes the learner's current
tensors into the engine in place, so nothing is written again. Prompts go in as token ids
(the engine runs no tokenizer). A group of n samples is one request with n outputs; a row
that continues a Prefix is a request of its own (prompt + prefix tokens) whose prefix is put
back in front of what it returns, as the hf backend does. Each request gets a seed drawn
from the caller's torch generator, so a run samples the same completions again.

Sharing the GPU with the learner, the engine sleeps through the update (`release_memory`:
its KV cache freed, its weights moved to CPU memory) and wakes in `sync_weights`, just
before the new weights are loaded.

Log-probabilities are those of the distribution the engine actually sampled from
(logprobs_mode="processed_logprobs": after temperature, top-k and top-p), where hf reports
the full softmax at the temperature. They agree unless top-k or top-p narrow the
distribution; where they do, the narrowed one is the behaviour policy mu that drew the
token, the probability an importance weight pi_old / mu must divide by (truncated IS,
off-policy corrections). pi_old itself is never taken from here: the trainer recomputes it
for every backend but hf (trainer.recomputes_old_logprobs).

`import vllm` happens in this module only, inside functions: importing workers never needs
it, and building this backend without it, or without a CUDA GPU, raises a ConfigError that
says what to install. tests/offline/engine/test_backend_conformance.py checks the adapter on the CPU
against a fake engine with vLLM's interface, and the real engine where vLLM and CUDA are.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass

import torch

from workers.errors import ConfigError
from workers.rollout import Generations, Prefix, SamplingParams, StopRule
from workers.rollout.hf import finish, len_of, prepend

NEEDS = (
    "rollout.backend 'vllm' needs vLLM and a CUDA GPU: install the extra with pip install -e '.[gpu]' "
    "on a machine with an NVIDIA GPU, or use rollout.backend: hf"
)

# the learner and its optimizer share the GPU: the engine's weights and KV cache take this share of its memory
GPU_MEMORY_SHARE = 0.4

ENGINE_OPTIONS = {
    "skip_tokenizer_init": True,  # token ids in, token ids out
    "logprobs_mode": "processed_logprobs",  # of the distribution sampled from (see the module docstring)
    "enable_sleep_mode": True,  # release_memory / sync_weights put it to sleep and wake it
    "gpu_memory_utilization": GPU_MEMORY_SHARE,
}


def load_vllm():
    """The vllm module, on a machine that can run it; a ConfigError that says what is missing otherwise."""
    try:
        import vllm
    except ImportError as error:
        raise missing(f"vllm is not installed ({error})") from None
    if not torch.cuda.is_available():
        raise missing("vllm is installed but no CUDA device is visible")
    # the engine in this process, not a child: sync_weights hands it the learner's tensors by reference
    # instead of serializing every weight to another process after each update
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    # FlashInfer's top-k/top-p sampler returns no log-probabilities after the narrowing, which
    # processed_logprobs reports; vLLM's own sampler does (and FlashInfer need not be installed)
    os.environ.setdefault("VLLM_USE_FLASHINFER_SAMPLER", "0")
    return vllm


def missing(why: str) -> ConfigError:
    return ConfigError(f"{NEEDS}; {why}", {"rollout.backend": NEEDS})


@dataclass(frozen=True)
class Request:
    """One engine request: the tokens it continues, how many completions it returns, how long each may grow."""

    tokens: list[int]  # the prompt, and the prefix a row continues
    samples: int  # rows it returns
    budget: int  # new tokens each row may add


class VLLMBackend:
    """Sampling with an offline vLLM engine on a CUDA GPU; the policy's weights are pushed in after each update.

    vllm: the vllm module (default: imported here), or anything with its `LLM` and
    `SamplingParams`; engine_options: more keyword arguments for `LLM` (e.g. enforce_eager=True).
    """

    def __init__(self, policy, vllm=None, **engine_options):
        self.policy = policy
        self.vllm = vllm or load_vllm()
        self.weights_dir = tempfile.TemporaryDirectory(prefix="rolloutlab-vllm-")  # removed with the backend
        policy.model.save_pretrained(self.weights_dir.name)
        policy.tokenizer.save_pretrained(self.weights_dir.name)
        dtype = str(next(policy.model.parameters()).dtype).removeprefix("torch.")  # vLLM's "auto" halves float32
        self.engine = self.vllm.LLM(model=self.weights_dir.name, dtype=dtype, **{**ENGINE_OPTIONS, **engine_options})
        self.asleep = False

    def release_memory(self) -> None:
        """Give the GPU to the learner's update: the engine drops its KV cache and moves its weights to CPU memory.

        Level 1 keeps that CPU copy, so the engine is whole again on waking even if no weights are pushed."""
        if not self.asleep:
            self.engine.sleep(level=1)
            self.asleep = True

    def wake(self) -> None:
        if self.asleep:
            self.engine.wake_up()
            self.asleep = False

    def sync_weights(self) -> None:
        """Wake the engine and load the policy's current weights into its model, in place."""
        self.wake()
        weights = [(name, param.detach()) for name, param in self.policy.model.named_parameters()]
        self.engine.collective_rpc(load_weights, args=(weights,))
        self.engine.reset_prefix_cache()  # its cached prompt states were computed with the old weights

    def generate(self, prompts, n, params: SamplingParams, generator, limits=None, prefixes=None, stop=None):
        if stop is not None:
            raise unsupported(stop)
        self.wake()
        sizes = [n] * len(prompts) if isinstance(n, int) else list(n)
        limits = list(limits) if limits is not None else [params.max_new_tokens] * len(prompts)
        if prefixes is None or not any(prefixes):
            groups = [Request(list(prompt), size, limit) for prompt, size, limit in zip(prompts, sizes, limits)]
            return self.sample(groups, params, generator)
        new = self.sample(continuations(prompts, sizes, limits, prefixes), params, generator)
        return prepend(prefixes, new, self.policy.pad_id)

    def sample(self, requests: list[Request], params: SamplingParams, generator) -> Generations:
        """Run the requests that can add a token; rows of the others (no budget left) come back empty and truncated."""
        seeds = torch.randint(2**31 - 1, (len(requests),), generator=generator, device=generator.device).tolist()
        live = [i for i, request in enumerate(requests) if request.samples > 0 and request.budget > 0]
        outputs = []
        if live:
            outputs = self.engine.generate(
                [{"prompt_token_ids": requests[i].tokens} for i in live],
                [self.sampling_params(requests[i], params, seeds[i]) for i in live],
                use_tqdm=False,
            )
        completions = dict(zip(live, outputs))
        rows = []
        for i, request in enumerate(requests):
            rows += rows_of(completions[i], request, params) if i in completions else [None] * request.samples
        return self.to_generations(rows)

    def sampling_params(self, request: Request, params: SamplingParams, seed: int):
        return self.vllm.SamplingParams(
            n=1 if params.temperature == 0 else request.samples,  # greedy: one completion, repeated by rows_of
            temperature=params.temperature,  # 0 is greedy in vLLM as here
            top_p=params.top_p,
            top_k=params.top_k,  # 0 keeps every token in vLLM as here
            max_tokens=request.budget,
            seed=seed,
            logprobs=0,  # the sampled token's own log-probability and no alternatives
            stop_token_ids=[self.policy.eos_id],
            detokenize=False,  # there is no tokenizer in the engine
        )

    def to_generations(self, rows: list) -> Generations:
        """Right-padded tensors from the engine's completions (None: a row that could add nothing)."""
        count, pad = len(rows), self.policy.pad_id
        ids = [list(row.token_ids) if row is not None else [] for row in rows]
        width = max([1] + [len(row) for row in ids])
        tokens = torch.full((count, width), pad, dtype=torch.long)
        logprobs = torch.zeros(count, width)
        for r, (row, row_ids) in enumerate(zip(rows, ids)):
            if row_ids:
                tokens[r, : len(row_ids)] = torch.tensor(row_ids)
                logprobs[r, : len(row_ids)] = torch.tensor(sampled_logprobs(row))
        lengths = torch.tensor([len(row) for row in ids])
        # the mask and `truncated` come from the tokens (no end-of-sequence token: truncated), as in hf, not from
        # finish_reason: an engine that checks the length before the stop token says "length" for a row whose
        # end token was the last one its limit allowed, which has ended
        out = finish(tokens, logprobs, self.policy.eos_id, lengths)
        on = lambda x: x.to(self.policy.device)  # noqa: E731  (where hf's come back: the policy's device)
        return Generations(on(out.tokens), on(out.logprobs), on(out.mask), on(out.truncated))


def continuations(prompts, sizes, limits, prefixes: list[Prefix | None]) -> list[Request]:
    """One request per row: its prompt and the prefix it continues, with what its limit leaves after that prefix."""
    owners = [g for g, size in enumerate(sizes) for _ in range(size)]
    done = len_of(prefixes, len(owners)).tolist()
    return [
        Request(list(prompts[g]) + list(prefix.tokens if prefix else ()), 1, limits[g] - already)
        for g, prefix, already in zip(owners, prefixes, done)
    ]


def rows_of(output, request: Request, params: SamplingParams) -> list:
    """A request's completions in the order of their index; a greedy one repeated for each of its rows."""
    completions = sorted(output.outputs, key=lambda completion: completion.index)
    return completions * request.samples if params.temperature == 0 else completions


def sampled_logprobs(completion) -> list[float]:
    """The log-probability of each sampled token (logprobs=0 returns it alone at each position)."""
    return [float(step[token].logprob) for token, step in zip(completion.token_ids, completion.logprobs)]


def load_weights(worker, weights) -> None:
    """Runs on each engine worker (collective_rpc passes the worker first): copy (name, tensor) pairs into its model."""
    worker.model_runner.model.load_weights(weights)


def unsupported(stop: StopRule) -> ConfigError:
    """An offline engine finishes every request it is given: nothing can cut its rows short while they grow."""
    message = (
        f"rollout.backend 'vllm' cannot stop rows early, and {stop.asked_by()} asked to (a StopRule); "
        "use rollout.backend: hf with a component that stops rows early"
    )
    return ConfigError(message, {"rollout.backend": message})
