"""The protocol of each pipeline stage, the context a stage is called with, and `build_stages`.

Every component of a stage takes the same arguments, so the trainer has one
call site per stage and never assembles arguments by method.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Protocol

import torch

from workers.pipeline import STAGES
from workers.pipeline.batch import RolloutBatch
from workers.pipeline.history import PromptHistory
from workers.tasks import Example


@dataclass(frozen=True)
class Budget:
    """What the control stage grants the next generation.

    `prompts`, `group_size` and `max_new_tokens` are the plan for a step; once the prompts
    are known, the control stage may give each its own group size and length limit
    (`group_sizes`, `max_new_tokens_per_prompt`, one entry per prompt), e.g. 16 rollouts to
    a hard prompt and 2 to an easy one.
    """

    prompts: int
    group_size: int
    max_new_tokens: int
    group_sizes: tuple[int, ...] = ()
    max_new_tokens_per_prompt: tuple[int, ...] = ()
    candidates: int = 0  # prompts drawn for the control stage to choose `prompts` from (0: just `prompts`)
    # when the generation may cut rows short (workers.rollout.StopRule); a cut row is aborted:
    # dropped from its group, whose remaining rows are reweighted (see generate.sample_groups)
    stop: object | None = None

    def candidates_for(self, prompts: int) -> int:
        """Candidates to draw when `prompts` prompts are still wanted: the same ratio as the plan's."""
        if not self.candidates:
            return prompts
        return -(-prompts * self.candidates // self.prompts)  # ceiling

    def sizes(self, prompts: int) -> list[int]:
        """The group size of each of `prompts` prompts."""
        return list(self.group_sizes) if self.group_sizes else [self.group_size] * prompts

    def limits(self, prompts: int) -> list[int]:
        """The completion-length limit of each of `prompts` prompts."""
        return (
            list(self.max_new_tokens_per_prompt) if self.max_new_tokens_per_prompt else [self.max_new_tokens] * prompts
        )

    def extra(self, prompts: int, groups: list[int], sizes: list[int]) -> Budget:
        """A later rollout stage of this budget's `prompts` prompts: `sizes[k]` more samples for prompt
        `groups[k]`, each at the length limit the prompt had in the first stage."""
        limits = self.limits(prompts)
        return replace(
            self,
            prompts=len(groups),
            group_sizes=tuple(sizes),
            max_new_tokens_per_prompt=tuple(limits[g] for g in groups),
            candidates=0,
        )


@dataclass
class StageContext:
    """What every stage may read while a step collects its rollouts; one per step, the same object
    for every round and every rollout stage of the step (`step` and `history` stay put until the
    step's groups are all scored: the history is updated once, after the collect phase)."""

    policy: object  # workers.models.Policy
    backend: object  # workers.rollout.RolloutBackend
    generator: torch.Generator  # the sampling RNG of this run
    temperature: float
    top_p: float
    top_k: int
    step: int
    history: PromptHistory  # per-prompt statistics across steps, read by control and filter components
    # draw(n): n more prompts of this step, chosen by the control stage, and their budget; for a generate
    # component that keeps more groups in flight than the step trains on (APRIL's over-provisioning)
    draw: Callable[[int], tuple[list[Example], Budget]] | None = None
    # the version of `policy` (RL steps it has been trained for): the trainer stamps it on every row generated;
    # the synchronous trainer samples at step - 1, the asynchronous one up to schedule.max_staleness older
    version: int = 0
    # the environment that answers each turn of a multi-turn episode (workers/environments), with its knobs;
    # None: a rollout is one completion
    environment: object | None = None


# The stage protocols stay typing.Protocol classes: a component inherits its stage's protocol explicitly
# (`class Controller(ControlStage)`), which Python allows and which hands it the defaults of the optional hooks
# below, while a stand-in that does not inherit still type-checks structurally. Components are plain classes
# (no dataclasses), so the protocol's metaclass (an ABCMeta) changes nothing in how they are built. Being
# protocols, they answer issubclass() only if runtime-checkable and method-only: test a component's lineage
# with `Stage in cls.__mro__`.


class StageHooks(Protocol):
    """The optional hooks every stage's component has, with the defaults a component inherits from its stage:
    the trainer calls them on every component, so one that does not learn or report leaves them be."""

    def observe(self, batch: RolloutBatch) -> None:
        """See every scored group of a step, kept or not (grown by every rollout stage), to plan the next."""

    def metrics(self) -> dict[str, float]:
        """pipeline/<stage>/...: what the component did this step, reported with the step's metrics."""
        return {}


class GenerateStage(StageHooks, Protocol):
    def __call__(self, ctx: StageContext, examples: list[Example], budget: Budget) -> RolloutBatch: ...


class FilterStage(StageHooks, Protocol):
    max_rounds: int  # generation rounds the trainer may run to fill a batch

    def __call__(self, batch: RolloutBatch, ctx: StageContext) -> list[int]:
        """Indices of the groups that go on to training; notes the fate of every sample.

        Also sets batch.in_loss (N,): the samples that may carry gradient (the advantage
        stage can only narrow it further)."""
        ...


class ControlStage(StageHooks, Protocol):
    def plan(self, ctx: StageContext) -> Budget:
        """How many prompts the step draws, and their default group size and length limit."""
        ...

    def select(self, ctx: StageContext, candidates: list[Example], count: int) -> list[Example]:
        """Which `count` of the drawn candidates the step rolls out."""
        ...

    def allocate(self, ctx: StageContext, examples: list[Example], budget: Budget) -> Budget:
        """The budget of these prompts: per-prompt group sizes and length limits, if the component sets them."""
        ...

    max_stages: int = 1  # rollout stages per round: 1 = the allocated groups only, `extend` is never asked

    def extend(self, ctx: StageContext, batch: RolloutBatch, stage: int) -> list[int]:
        """More rollouts for some prompts of a scored round, before the filter sees it.

        `batch` holds the round's groups after `stage` rollout stages, scored (rewards, correct;
        no advantages yet). The answer has one count per group (empty or all zeros: no more);
        the trainer samples that many more of each prompt through the generate stage, at the
        prompt's length limit, scores them, appends them to their groups (ragged groups) and asks
        again, until the answer is none or the round has `max_stages` stages.
        """
        ...


class ReplayStage(StageHooks, Protocol):
    def mix(self, batch: RolloutBatch, step: int) -> RolloutBatch:
        """The batch to train on: the fresh groups plus any replayed ones."""
        ...

    def store(self, batch: RolloutBatch, step: int) -> None:
        """Offer the trained batch to the buffer."""
        ...


@dataclass
class AdvantageOutput:
    advantages: torch.Tensor  # (N,) per sample, or (N, T) per token
    in_loss: torch.Tensor  # (N,) bool: the estimator lets the sample carry gradient
    stats: dict[str, float] = field(default_factory=dict)  # what the estimator did: pipeline/advantage/...
    token_mask: torch.Tensor | None = None  # (N, T) bool: the tokens that may carry gradient (None: all of them)
    left_out: str = "pivot"  # why the estimator leaves samples out of the loss, for the sample inspector


class AdvantageStage(StageHooks, Protocol):
    def __call__(self, batch: RolloutBatch) -> AdvantageOutput:
        """Advantages of every sample of a scored batch (rewards, reward parts, lengths, groups of any size)."""
        ...


@dataclass
class LossInputs:
    """What the objective sees of one minibatch. Three policies meet here (the decoupled form):

    - pi (`logprobs`): the policy being optimized;
    - pi_prox (`old_logprobs`): the proximal policy the clip anchors the step to: the sampler's own numbers for a
      fresh row of an `hf` float32 run, else the learner's weights before this RL step's first update
      (objective.old_logprobs; always, for a row an older policy sampled), or the objective's own proximal
      policy (PPO-EWMA's average of the weights);
    - pi_behaviour (`sampler_logprobs`): whatever sampled each token, as the rollout backend returned it, kept with
      the row through replay, continuation and the asynchronous pipeline.
    """

    logprobs: torch.Tensor  # (B, T) current policy, differentiable
    old_logprobs: torch.Tensor  # (B, T) pi_prox: the proximal policy
    advantages: torch.Tensor  # (B,) per sample, or (B, T) per token
    mask: torch.Tensor  # (B, T) 1 on completion tokens of samples in the loss
    aggregate: Callable[[torch.Tensor], torch.Tensor]  # (B, T) token values -> scalar, per objective.aggregation
    # (B, T) pi_behaviour: the rollout backend's log-probabilities; old_logprobs are these same numbers unless the
    # trainer recomputed them. None: the same as old_logprobs.
    sampler_logprobs: torch.Tensor | None = None
    group: torch.Tensor | None = None  # (B,) long: the group (prompt) of every row; None: one group
    # (B,) long: how many versions older than the learner the policy that sampled each row is (0: this step's;
    # a replayed row, an APRIL row continued from an older prefix, an asynchronous batch: more). None: all 0.
    staleness: torch.Tensor | None = None

    @property
    def behaviour_logprobs(self) -> torch.Tensor:
        """(B, T) log pi_behaviour: the sampler's numbers, or pi_prox's where none were kept apart."""
        return self.old_logprobs if self.sampler_logprobs is None else self.sampler_logprobs

    @property
    def stale(self) -> torch.Tensor:
        """(B,) bool: the rows an older policy version sampled."""
        if self.staleness is None:
            return torch.zeros(self.mask.shape[0], dtype=torch.bool, device=self.mask.device)
        return self.staleness.to(self.mask.device) > 0


@dataclass
class LossOutput:
    loss: torch.Tensor  # scalar
    stats: dict[str, float]  # e.g. policy/clip_ratio/low
    step_scale: float = 1.0  # the trainer multiplies this optimizer step's learning rate by it


class ProximalPolicy(Protocol):
    """An objective's own proximal policy (PPO-EWMA's): the network whose log-probabilities are pi_prox."""

    def network(self, current: torch.nn.Module) -> torch.nn.Module:
        """The proximal network, given the policy being optimized (built from it the first time)."""
        ...

    def advance(self, current: torch.nn.Module) -> None:
        """Follow the policy after one of its optimizer steps."""
        ...


class ObjectiveStage(StageHooks, Protocol):
    # None: pi_prox is the learner before the RL step's first update (or the sampler's numbers, see LossInputs)
    proximal: ProximalPolicy | None = None

    def __call__(self, inputs: LossInputs) -> LossOutput: ...


@dataclass
class Stages:
    generate: GenerateStage
    filter: FilterStage
    control: ControlStage
    replay: ReplayStage
    advantage: AdvantageStage
    objective: ObjectiveStage


def build_stages(cfg) -> Stages:
    """The config's component of every stage, built: `get` imports each component's code here, on the worker."""
    built = {stage: registry.get(getattr(cfg, stage).name)(cfg) for stage, registry in STAGES.items()}
    return Stages(**built)
