"""`trace`: the step's rollout budget allocated to prompt roots and turn prefixes by predicted reward contrast (TRACE).

TRACE (Zou et al. 2026) treats each turn of a multi-turn rollout as a node from which more rollouts can continue,
so a fixed budget can go not only to prompts (as prompt-level allocation does) but to the turn prefixes where the
outcome is still open, and the rollouts form trees. A step here:

1. every prompt starts `roots` episodes, played to their end turn by turn; at every turn boundary of an episode
   still going, a copy of its prefix and episode state is kept (workers/environments/episodes.Forest.fork);
2. the anchors are the prompts (a continuation is a fresh episode) and those prefixes (a continuation plays on
   from the copy); a shared predictor gives each its success probability p from the prefix's history;
3. the rest of the budget (the sum of the prompts' group sizes, minus the roots) is given out one continuation at
   a time, each to the anchor whose chance of holding mixed outcomes it raises most. With n rollouts through an
   anchor, P(mixed) = 1 - p^n - (1-p)^n, so one more adds p^n (1-p) + (1-p)^n p: 2p(1-p) for a prefix (n = 1),
   largest at p = 1/2, smaller for each one it already got. These gains shrink with n, so the greedy choice
   maximises the expected number of anchors with mixed outcomes. Ties go to the prompt given least so far;
4. the continuations play to their end. Every rollout, root or continuation, is a row of its prompt's group
   (groups become ragged; the step's rows are exactly the budget), holding its whole episode from the prompt.

The predictor is a logistic model of success on features every environment's prefixes have (`prefix_features`):
the prompt's record in the run's history, the turns taken, their format, the reward so far, the tokens used. After
a step is scored it takes `predictor_steps` gradient steps on every (anchor, outcome) pair of the step's rows. Its
weights are the component's state: saved whole with a resume checkpoint (and by state_dict).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

import numpy as np
import torch

from workers.environments.episodes import EpisodeRecord, Forest, Sampler
from workers.pipeline.batch import RolloutBatch
from workers.pipeline.generate.base import episode_batch
from workers.pipeline.generate.trace import TraceKnobs
from workers.pipeline.stages import Budget, GenerateStage, StageContext
from workers.rollout import SamplingParams
from workers.tasks import Example

PROMPT_LOGIT = "trace/prompt_logit"  # (N,) the prompt's history feature of each row, as it was when it was sampled
FEATURES = ("bias", "prompt_logit", "turns", "well_formed_share", "last_well_formed", "reward_so_far", "tokens")


def prefix_features(prompt_logit: float, record: EpisodeRecord | None, k: int, max_turns: int,
                    max_tokens: int) -> list[float]:  # fmt: skip
    """The predictor's view of an anchor: the prefix of `record` before its turn k + 1 (k = 0: the prompt)."""
    turns = record.turns[:k] if record is not None else []
    formed = [t.well_formed for t in turns]
    return [
        1.0,
        prompt_logit,
        k / max_turns,
        float(np.mean(formed)) if formed else 1.0,
        float(formed[-1]) if formed else 1.0,
        float(sum(t.reward for t in turns)),
        (turns[-1].observation_end if turns else 0) / max_tokens,
    ]


def history_logit(stats) -> float:
    """The log-odds of a prompt's Beta posterior mean pass rate in the run's history (0 for one never seen)."""
    if stats is None:
        return 0.0
    return math.log(stats.alpha / stats.beta)


def mixed_gain(p: float, held: int) -> float:
    """What one more rollout through an anchor of success probability p, already holding `held`, adds to the
    chance that its rollouts' outcomes are mixed: P(mixed | n) = 1 - p^n - (1-p)^n, so P(n+1) - P(n)."""
    return p**held * (1 - p) + (1 - p) ** held * p


def allocate(probabilities: list[float], held: list[int], groups: list[int], budget: int) -> list[int]:
    """Continuations for each anchor: `budget` of them, one at a time to the anchor of largest mixed_gain (ties:
    the anchor whose group was given least so far, then the first)."""
    given, per_group = [0] * len(probabilities), Counter()
    for _ in range(budget if probabilities else 0):
        best = max(
            range(len(probabilities)),
            key=lambda a: (mixed_gain(probabilities[a], held[a] + given[a]), -per_group[groups[a]], -a),
        )
        given[best] += 1
        per_group[groups[best]] += 1
    return given


@dataclass
class Anchor:
    """Where continuations may start: a prompt (snapshot None: a fresh episode) or a root's turn prefix."""

    group: int
    features: list[float]
    held: int  # rollouts through it already: the prompt's roots, or 1 (the root the prefix is of)
    snapshot: int | None = None  # the forest's row holding the prefix and its episode state, never played on
    source: int | None = None  # the root it is a prefix of


class TreeRolloutAllocation(GenerateStage):
    """The budget to prompt roots and turn prefixes most likely to yield mixed outcomes (TRACE, Zou et al. 2026).

    Knobs: generate.roots, predictor_lr, predictor_steps, predictor_l2; the budget is the sum of the prompts'
    group sizes (rollout.group_size each, unless the control stage set them). Reports
    pipeline/generate/prefix_share (continuations from turn prefixes, of all continuations),
    pipeline/generate/chosen_p (mean predicted success of the anchors given one),
    pipeline/generate/predictor_accuracy and predictor_loss (on a step's anchors, before it trains on them).
    """

    Knobs = TraceKnobs

    def __init__(self, cfg):
        g = cfg.generate
        self.roots, self.lr, self.steps, self.l2 = g.roots, g.predictor_lr, g.predictor_steps, g.predictor_l2
        self.max_turns, self.max_tokens = cfg.environment.max_turns, cfg.environment.max_episode_tokens
        self.weights = np.zeros(len(FEATURES))  # the predictor: logistic regression, p = sigmoid(w . x)
        self.trained = 0  # steps it has trained on
        self.last: dict[str, float] = {}

    def __call__(self, ctx: StageContext, examples: list[Example], budget: Budget) -> RolloutBatch:
        sizes, limits = budget.sizes(len(examples)), budget.limits(len(examples))
        prompt_ids = [ctx.policy.encode_prompt(e.prompt) for e in examples]
        params = SamplingParams(budget.max_new_tokens, ctx.temperature, ctx.top_p, ctx.top_k)
        forest = Forest(Sampler(ctx.policy, ctx.backend, ctx.generator), ctx.environment, examples, prompt_ids,
                        params, limits)  # fmt: skip
        priors = [history_logit(ctx.history.get(e)) for e in examples]
        roots = [[forest.root(g) for _ in range(min(self.roots, size))] for g, size in enumerate(sizes)]
        anchors = self.play_roots(forest, roots, priors)
        p = self.predict(np.array([a.features for a in anchors]))
        given = allocate(p.tolist(), [a.held for a in anchors], [a.group for a in anchors],
                         sum(sizes) - sum(map(len, roots)))  # fmt: skip
        groups = self.continue_anchors(forest, roots, anchors, given)
        episodes = forest.episodes([r for rows in groups for r in rows])
        # decoded_tokens: a shared prefix was generated once
        batch = episode_batch(ctx, examples, [len(rows) for rows in groups], prompt_ids, episodes)
        batch.attached[PROMPT_LOGIT] = torch.tensor([priors[g] for g, rows in enumerate(groups) for _ in rows],
                                                    dtype=torch.float64)  # fmt: skip
        for g, rows in enumerate(groups):
            batch.note("generate", f"one of {len(rows)} rollouts given to this prompt and its prefixes", [g])
        chosen = [p[a] for a, n in enumerate(given) if n]
        self.last = {
            "pipeline/generate/prefix_share": sum(n for a, n in zip(anchors, given) if a.snapshot is not None)
            / max(sum(given), 1),
            "pipeline/generate/chosen_p": float(np.mean(chosen)) if chosen else 0.5,
        }
        return batch

    def play_roots(self, forest: Forest, roots: list[list[int]], priors: list[float]) -> list[Anchor]:
        """Play every root to its end, keeping a copy of each at every turn boundary it passes still going; the
        anchors: each prompt, then those prefixes."""
        anchors = [Anchor(g, self.features(priors[g], None, 0), len(rows)) for g, rows in enumerate(roots)]
        every = [r for rows in roots for r in rows]
        for k in range(1, self.max_turns):
            forest.advance(every, turns=k)
            for g, rows in enumerate(roots):
                for r in rows:
                    if not forest.done(r) and len(forest.record(r).turns) == k:
                        features = self.features(priors[g], forest.record(r), k)
                        anchors.append(Anchor(g, features, 1, snapshot=forest.fork(r), source=r))
        forest.advance(every)
        return anchors

    @staticmethod
    def continue_anchors(forest: Forest, roots: list[list[int]], anchors: list[Anchor], given: list[int]):
        """Each group's rows: every root followed by the continuations of its prefixes, then its fresh episodes;
        the continuations played to their end."""
        after = {r: [] for rows in roots for r in rows}
        fresh = [[] for _ in roots]
        for anchor, n in zip(anchors, given):
            if anchor.snapshot is None:
                fresh[anchor.group] += [forest.root(anchor.group) for _ in range(n)]
            else:
                after[anchor.source] += [forest.fork(anchor.snapshot) for _ in range(n)]
        forest.advance([r for rows in after.values() for r in rows] + [r for rows in fresh for r in rows])
        return [[x for r in rows for x in (r, *after[r])] + fresh[g] for g, rows in enumerate(roots)]

    def features(self, prompt_logit: float, record: EpisodeRecord | None, k: int) -> list[float]:
        return prefix_features(prompt_logit, record, k, self.max_turns, self.max_tokens)

    def predict(self, x: np.ndarray) -> np.ndarray:
        """(A,) predicted success of each anchor, from its features (A, F)."""
        return 1.0 / (1.0 + np.exp(-(x @ self.weights)))

    def observe(self, batch: RolloutBatch) -> None:
        """Train the predictor on every anchor of the step's rows (the prompt, each turn prefix before the last
        turn) and the row's outcome: a prefix shared by several rows is a pair per row, its Monte Carlo value."""
        x, y = self.training_pairs(batch)
        if not len(y):
            return
        p = self.predict(x)
        self.last["pipeline/generate/predictor_accuracy"] = float(((p > 0.5) == (y > 0.5)).mean())
        self.last["pipeline/generate/predictor_loss"] = float(log_loss(p, y))
        penalty = np.ones_like(self.weights)
        penalty[0] = 0.0  # the bias is not pulled to 0
        for _ in range(self.steps):
            gradient = x.T @ (self.predict(x) - y) / len(y) + self.l2 * penalty * self.weights  # (F,)
            self.weights = self.weights - self.lr * gradient
        self.trained += 1

    def training_pairs(self, batch: RolloutBatch) -> tuple[np.ndarray, np.ndarray]:
        """(M, F) the anchors of the rows this component sampled, and (M,) each one's row's success."""
        priors = batch.attached.get(PROMPT_LOGIT)
        if priors is None or batch.episodes is None:
            return np.zeros((0, len(FEATURES))), np.zeros(0)
        x, y = [], []
        for row, (prior, record) in enumerate(zip(priors.tolist(), batch.episodes)):
            if math.isnan(prior):  # a row another component made
                continue
            for k in range(len(record.turns)):
                x.append(self.features(prior, record, k))
                y.append(float(batch.correct[row]))
        return np.array(x).reshape(-1, len(FEATURES)), np.array(y)

    def state_dict(self) -> dict:
        return {"weights": self.weights.tolist(), "trained": self.trained}

    def load_state_dict(self, state: dict) -> None:
        self.weights, self.trained = np.array(state["weights"], dtype=np.float64), int(state["trained"])

    def metrics(self) -> dict[str, float]:
        return dict(self.last)


def log_loss(p: np.ndarray, y: np.ndarray) -> float:
    p = np.clip(p, 1e-7, 1 - 1e-7)
    return float(-(y * np.log(p) + (1 - y) * np.log(1 - p)).mean())
