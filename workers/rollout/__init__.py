"""Rollout backends: they turn prompts into sampled completions with per-token log-probabilities.

A backend implements `RolloutBackend`; the trainer knows nothing else about it.
`hf` samples on torch (CPU or CUDA) with a KV cache; `vllm` drives an offline
vLLM engine on a CUDA GPU, and is imported (with vllm) only when a run asks for it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import torch

from workers.registry import Registry


@dataclass(frozen=True)
class SamplingParams:
    max_new_tokens: int
    temperature: float  # 0 means greedy
    top_p: float = 1.0
    top_k: int = 0


@dataclass
class Generations:
    """Completions of N samples, prompt-major (the samples of prompt 0 come first), n per prompt.

    A row ends in one of three ways: the end-of-sequence token (its last masked token), its
    length limit (`truncated`), or a stop rule cutting it short (`stopped`: a partial
    completion that can be continued later from its tokens and log-probabilities).
    """

    tokens: torch.Tensor  # (N, T) long, pad after the end
    logprobs: torch.Tensor  # (N, T) float32: log pi_sampler(token) under temperature, 0 on padding
    mask: torch.Tensor  # (N, T) float32: 1 on generated tokens, the end-of-sequence token included
    truncated: torch.Tensor  # (N,) bool: the length limit reached before end-of-sequence
    stopped: torch.Tensor | None = None  # (N,) bool: cut short by a StopRule, unfinished

    def __post_init__(self):
        if self.stopped is None:
            self.stopped = torch.zeros_like(self.truncated)

    @property
    def lengths(self) -> torch.Tensor:  # (N,)
        return self.mask.sum(-1).long()


@dataclass(frozen=True)
class Prefix:
    """Completion tokens a row already has (from an earlier, interrupted generation) and their
    sampler log-probabilities; generation continues after them, and the limit counts them."""

    tokens: tuple[int, ...]
    logprobs: tuple[float, ...]


@dataclass
class Partial:
    """What a stop rule's predicate sees: the rows so far (new tokens only, and any prefix before them)."""

    tokens: torch.Tensor  # (N, t) long: the tokens generated in this call so far
    logprobs: torch.Tensor  # (N, t)
    finished: torch.Tensor  # (N,) bool: ended (end-of-sequence or limit) or stopped already
    hidden: torch.Tensor | None  # (N, C): the last layer's state at each row's latest token, if asked for


@dataclass
class StopRule:
    """When a generation may end before every row has.

    finished_rows: stop every unfinished row once this many rows have ended (APRIL's
    over-provisioning); abort: called every `every` tokens with a Partial, returns (N,) bool
    rows to stop now (prune-while-generating methods); wants_hidden: hand the predicate the
    policy's last hidden state (a learned head on it, as arrol's).
    """

    finished_rows: int | None = None
    abort: Callable[[Partial], torch.Tensor] | None = None
    every: int = 1
    wants_hidden: bool = False

    def asked_by(self) -> str:
        """Who asks to stop rows early, for an error of a backend that cannot."""
        if self.abort is not None:
            return f"{self.abort.__module__}.{self.abort.__qualname__}"
        return f"a rule that stops every row once {self.finished_rows} have finished"


class RolloutBackend(Protocol):
    def generate(
        self,
        prompts: list[list[int]],
        n: int | list[int],
        params: SamplingParams,
        generator: torch.Generator,
        limits: list[int] | None = None,
        prefixes: list[Prefix | None] | None = None,
        stop: StopRule | None = None,
    ) -> Generations:
        """Sample n completions for each prompt (token ids, special tokens included).

        n: one group size for every prompt, or one per prompt; limits: each prompt's
        completion-length limit (default params.max_new_tokens for all); prefixes: per row,
        completion tokens to continue from (their log-probabilities are returned unchanged in
        front of the new ones); stop: when rows may be cut short (`Generations.stopped`)."""
        ...

    def sync_weights(self) -> None:
        """Make the sampler use the policy's current weights (no-op when they share memory)."""
        ...

    def release_memory(self) -> None:
        """Called before the learner's update: free what the sampler holds on the device until sync_weights."""
        ...


BACKENDS: Registry[type] = Registry("rollout backend")
BACKENDS.declare(
    "vllm",
    "workers.rollout.vllm:VLLMBackend",  # imported by BACKENDS.get("vllm") only: vllm is an extra
    summary="Sampling with an offline vLLM engine on a CUDA GPU; the policy's weights are pushed in after each update.",
)


def build_backend(name: str, policy) -> RolloutBackend:
    from workers.rollout import hf  # noqa: F401  (registration)

    return BACKENDS.get(name)(policy)
