"""Rollout backends: they turn prompts into sampled completions with per-token log-probabilities.

A backend implements `RolloutBackend`; the trainer knows nothing else about it.
`hf` samples on torch (CPU or CUDA) with a KV cache. A vLLM backend will
implement the same protocol; it must import vllm lazily, inside its own module.
"""

from __future__ import annotations

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
    """Completions of N = prompts x n samples, prompt-major (the n samples of prompt 0 come first)."""

    tokens: torch.Tensor  # (N, T) long, pad after the end
    logprobs: torch.Tensor  # (N, T) float32: log pi_sampler(token) under temperature, 0 on padding
    mask: torch.Tensor  # (N, T) float32: 1 on generated tokens, the end-of-sequence token included
    truncated: torch.Tensor  # (N,) bool: max_new_tokens reached before end-of-sequence

    @property
    def lengths(self) -> torch.Tensor:  # (N,)
        return self.mask.sum(-1).long()


class RolloutBackend(Protocol):
    def generate(
        self, prompts: list[list[int]], n: int, params: SamplingParams, generator: torch.Generator
    ) -> Generations:
        """Sample n completions for each prompt (token ids, special tokens included)."""
        ...

    def sync_weights(self) -> None:
        """Make the sampler use the policy's current weights (no-op when they share memory)."""
        ...


BACKENDS: Registry[type] = Registry("rollout backend")


def build_backend(name: str, policy) -> RolloutBackend:
    from workers.rollout import hf  # noqa: F401  (registration)

    return BACKENDS.get(name)(policy)
