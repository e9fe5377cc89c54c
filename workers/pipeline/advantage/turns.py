"""What the multi-turn estimators share (gigpo, hgpo, salt): each turn's discounted return and the states it was
taken from, the episode-level GRPO advantage, and the spreading of each turn's value over the turn's tokens.

A turn is named (row, k): the k-th turn of the row's episode (batch.episodes[row].turns[k]).
"""

from __future__ import annotations

import torch

from workers.environments.episodes import EpisodeRecord
from workers.pipeline.advantage.base import scale
from workers.pipeline.batch import RolloutBatch

Turn = tuple[int, int]  # (row, k)


def discounted_returns(rewards: list[float], gamma: float) -> list[float]:
    """Each turn's return: its reward part plus gamma times the next turn's return."""
    out, following = [], 0.0
    for reward in reversed(rewards):
        following = reward + gamma * following
        out.append(following)
    return out[::-1]


def anchor_states(record: EpisodeRecord) -> list[str]:
    """The state each turn was taken from: the episode's start for the first, else the state after the turn before."""
    return [record.start_state] + [turn.state for turn in record.turns[:-1]]


def episode_advantages(batch: RolloutBatch, how: str, eps: float) -> torch.Tensor:
    """(N,): GRPO's advantage of each episode's reward over its group (the group's spread as `how` says)."""
    advantages = torch.zeros(batch.num_samples)
    for _, rows in batch.by_size():  # rows (P_k, n_k)
        rewards = batch.rewards[rows].float().cpu()
        advantages[rows] = scale(rewards - rewards.mean(-1, keepdim=True), rewards, how, eps)
    return advantages


def relative(returns: list[float], how: str, eps: float) -> list[float]:
    """The returns of a step group, each relative to the group's (mean, spread); a turn alone gets 0."""
    if len(returns) < 2:
        return [0.0] * len(returns)
    values = torch.tensor(returns)
    return scale(values - values.mean(), values, how, eps).tolist()


def per_token(batch: RolloutBatch, value_of_turn) -> torch.Tensor:
    """(N, T): every token of turn (row, k) gets value_of_turn((row, k)); the observations between turns get 0
    (they carry no gradient whatever their advantage, and 0 keeps the sample means honest)."""
    advantages = torch.zeros_like(batch.mask, dtype=torch.float32)  # (N, T)
    for row, record in enumerate(batch.episodes):
        for k, turn in enumerate(record.turns):
            advantages[row, turn.start : turn.end] = value_of_turn((row, k))
    return advantages
