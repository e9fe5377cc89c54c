"""`spa-rl`: stepwise progress attribution (Wang et al. 2025) with a progress estimator trained online.

Each step, the estimator first takes `estimator_steps` Adam steps on the batch's episodes, with the paper's loss:
the squared error between the sum of an episode's predicted turn contributions and its outcome (the episode's
reward). It then attributes: turn k of episode i gets the reward r_ik = alpha * c_ik + beta * g_ik, c its
contribution, g 1 when the environment could execute the turn (TurnRecord.well_formed). The paper trains its
estimator on explored trajectories and annotates those same trajectories; here each batch is both.

The paper optimises these rewards with PPO and a learned critic; this engine has no critic, so the advantage is
GRPO's process-supervision form (Shao et al. 2024, sec. 4.1.3): each turn's reward is normalised over all the
turns of its group, and a turn's advantage is its normalised reward plus gamma times the next turn's advantage.

The estimator reads what the batch already holds about a turn, with no second forward of the policy: a bag of its
tokens (hashed into `token_buckets`), its position, whether it is the last, whether it was well formed, its length
and the sampler's mean log-probability of its tokens. It is part of the component, so a resume checkpoint (which
pickles the stage components) keeps its weights and Adam's moments.
"""

from __future__ import annotations

import copy
from collections import defaultdict

import torch

from workers.pipeline.advantage.spa_rl import SPAKnobs
from workers.pipeline.advantage.turns import discounted_returns, per_token, relative
from workers.pipeline.batch import RolloutBatch
from workers.pipeline.stages import AdvantageOutput, AdvantageStage

# what the estimator reads of a turn besides the bag of its tokens, in the order of its feature columns after the bag
SHAPE_FEATURES = ("position", "last", "well_formed", "length", "log_probability")


class ProgressEstimator:
    """A linear head on a turn's features, whose output is the turn's contribution (the paper's head is linear
    too, on its estimator's output at the turn's last token). Built at zero: no draw from the run's random
    streams, and every contribution 0 until it has trained."""

    def __init__(self, features: int, lr: float):
        self.weight = torch.nn.Parameter(torch.zeros(features))
        self.bias = torch.nn.Parameter(torch.zeros(()))
        self.optimizer = torch.optim.Adam([self.weight, self.bias], lr=lr)

    def contributions(self, features: torch.Tensor) -> torch.Tensor:
        """(M, F) turn features -> (M,) contributions."""
        return features @ self.weight + self.bias

    def loss(self, features: torch.Tensor, episode: torch.Tensor, outcomes: torch.Tensor) -> torch.Tensor:
        """The paper's loss: mean over episodes of (sum of the episode's contributions - its outcome)^2.

        features (M, F), episode (M,) long: the episode of each turn, outcomes (E,)."""
        sums = torch.zeros_like(outcomes).index_add(0, episode, self.contributions(features))  # (E,)
        return ((sums - outcomes) ** 2).mean()

    def fit(self, features, episode, outcomes, steps: int) -> tuple[float, float]:
        """`steps` Adam steps on the loss; returns the loss before and after them."""
        with torch.no_grad():
            before = float(self.loss(features, episode, outcomes))
        for _ in range(steps):
            loss = self.loss(features, episode, outcomes)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
        with torch.no_grad():
            return before, float(self.loss(features, episode, outcomes))

    def state_dict(self) -> dict:
        """A copy: the optimizer's own state_dict holds its moment tensors themselves, which its steps update in
        place, and an optimizer loading it would keep sharing them."""
        return copy.deepcopy({"weight": self.weight.detach(), "bias": self.bias.detach(),
                              "optimizer": self.optimizer.state_dict()})  # fmt: skip

    def load_state_dict(self, state: dict) -> None:
        with torch.no_grad():
            self.weight.copy_(state["weight"])
            self.bias.copy_(state["bias"])
        self.optimizer.load_state_dict(state["optimizer"])


class StepwiseProgressAttribution(AdvantageStage):
    """Turn rewards r = alpha * c + beta * g from a progress estimator trained online (its contributions c summed
    over an episode fit the episode's reward) and the turn's grounding g; each reward normalised over the turns of
    its group, and a turn's advantage the discounted sum of its episode's normalised rewards from it on. Every
    token of a turn gets the turn's advantage; observation tokens get 0.

    Shapes: episodes N, turns M -> features (M, buckets + 5), advantages (N, T). Knobs: advantage.
    contribution_weight (alpha), grounding_weight (beta), discount (gamma), estimator_lr, estimator_steps,
    token_buckets, scale, eps.
    """

    Knobs = SPAKnobs

    def __init__(self, cfg):
        knobs = cfg.advantage
        self.how, self.eps = knobs.scale, knobs.eps
        self.alpha, self.beta, self.discount = knobs.contribution_weight, knobs.grounding_weight, knobs.discount
        self.steps, self.buckets = knobs.estimator_steps, knobs.token_buckets
        self.max_turns = getattr(cfg.environment, "max_turns", 1)
        self.max_new_tokens = cfg.rollout.max_new_tokens
        self.estimator = ProgressEstimator(self.buckets + len(SHAPE_FEATURES), knobs.estimator_lr)

    def __call__(self, batch: RolloutBatch) -> AdvantageOutput:
        if batch.episodes is None:
            raise ValueError("advantage spa-rl needs multi-turn episodes: the batch has none")
        turns, features, episode = self.turn_features(batch)  # M (row, k), (M, F), (M,)
        outcomes = batch.rewards.float().cpu()  # (N,)
        before, after = self.estimator.fit(features, episode, outcomes, self.steps)
        with torch.no_grad():
            contributions = self.estimator.contributions(features)  # (M,)
        grounding = features[:, self.column("well_formed")]  # (M,) 1 where the turn was well formed
        rewards = self.alpha * contributions + self.beta * grounding  # (M,)
        value = self.turn_advantages(batch, turns, rewards.tolist())
        last = torch.tensor([k == len(batch.episodes[row].turns) - 1 for row, k in turns])  # (M,)
        stats = {
            "pipeline/advantage/estimator_loss_before": before,
            "pipeline/advantage/estimator_loss": after,
            "pipeline/advantage/contribution_before_last": float(contributions[~last].sum()) / batch.num_samples,
        }
        return AdvantageOutput(per_token(batch, value.__getitem__), torch.ones(batch.num_samples, dtype=torch.bool),
                               stats)  # fmt: skip

    def column(self, feature: str) -> int:
        """The estimator's feature column of one of SHAPE_FEATURES."""
        return self.buckets + SHAPE_FEATURES.index(feature)

    def turn_features(self, batch: RolloutBatch) -> tuple[list[tuple[int, int]], torch.Tensor, torch.Tensor]:
        """Every turn (row, k) of the batch, its features (M, buckets + 5) and its episode (M,) long."""
        tokens, logprobs = batch.tokens.cpu(), batch.logprobs.float().cpu()
        turns, rows = [], []
        for row, record in enumerate(batch.episodes):
            for k, turn in enumerate(record.turns):
                ids, length = tokens[row, turn.start : turn.end], turn.end - turn.start
                bag = torch.bincount(ids % self.buckets, minlength=self.buckets).float() / max(length, 1)
                shape = torch.tensor([
                    k / self.max_turns,
                    float(k == len(record.turns) - 1),
                    float(turn.well_formed),
                    length / self.max_new_tokens,
                    float(logprobs[row, turn.start : turn.end].mean()) if length else 0.0,
                ])  # fmt: skip
                turns.append((row, k))
                rows.append(torch.cat([bag, shape]))
        episode = torch.tensor([row for row, _ in turns], dtype=torch.long)
        return turns, torch.stack(rows), episode

    def turn_advantages(self, batch: RolloutBatch, turns, rewards: list[float]) -> dict[tuple[int, int], float]:
        """Each turn's reward normalised over its group's turns, then summed from the turn on (discounted)."""
        by_group: dict[int, list[int]] = defaultdict(list)
        for i, (row, _) in enumerate(turns):
            by_group[int(batch.group_index[row])].append(i)
        normalised = [0.0] * len(turns)
        for members in by_group.values():
            for i, value in zip(members, relative([rewards[i] for i in members], self.how, self.eps)):
                normalised[i] = value
        by_row: dict[int, list[int]] = defaultdict(list)
        for i, (row, _) in enumerate(turns):
            by_row[row].append(i)  # in turn order
        value = {}
        for members in by_row.values():
            for i, advantage in zip(members, discounted_returns([normalised[i] for i in members], self.discount)):
                value[turns[i]] = advantage
        return value
