"""`dars`: after a first stage of G rollouts per prompt, low-accuracy prompts get more rollouts in further stages.

Difficulty Adaptive Rollout Sampling (Yang et al. 2025, "Depth-Breadth Synergy in RLVR:
Unlocking LLM Reasoning Gains with Adaptive Exploration", arXiv 2508.13755, the DARS
section, and the authors' code). The analysis: with binary rewards, a group of n samples at
accuracy a carries a cumulative advantage sum_i |A_i| = n S(a), with

    S(a) = 2 a (1 - a)          the advantage r - mean (control.mass = without-std; the
                                authors' experiments: grpo_use_std=False)
    S(a) = 2 sqrt(a (1 - a))    the advantage divided by the group's std (with-std)

which peaks at a = 0.5 and vanishes towards a = 0: the hard prompts that push the reasoning
boundary weigh least. DARS rebalances it with targeted multi-stage rollouts: a first stage of
G samples estimates each prompt's accuracy, and prompts below the threshold get extra
samples, so hard prompts gain positive rollouts. Two schedules give a prompt at estimated
accuracy a the total group size N(a) (G = rollout.group_size, peak = G S(0.5)):

    equal-treatment     N S(a) = peak: the mass of a G-group at a = 0.5
    hardness-weighted   N S(a) = 2 (1 - a) peak: that mass weighted by the hardness

An all-wrong prompt (a = 0) is taken at a = 0.5 / G, as the authors' code does; every prompt
is capped at G + control.max_extra, and a step's extras at control.extra_budget x (prompts x
G); when a stage asks for more than is left, each prompt's ask is scaled down alike and the
rounding remainder goes to the hardest first. Each further stage re-estimates a from all the
group's samples so far, so a prompt that turns out easier stops growing (at most
control.stages stages per round; the authors' code has one stage of extras, stages = 2).
After the merge the authors drop the groups whose accuracy is 0 or 1: that is the filter
stage's dynamic-sampling with one round, which the preset chooses.
"""

from __future__ import annotations

import math

from workers.pipeline.batch import RolloutBatch
from workers.pipeline.control.base import Controller
from workers.pipeline.control.dars import DARSKnobs
from workers.pipeline.stages import Budget, StageContext


def cumulative_advantage(accuracy: float, mass: str) -> float:
    """S(a): the mean |A| of a group at accuracy a, for the advantage without or with the std division."""
    spread = accuracy * (1 - accuracy)
    return 2 * spread if mass == "without-std" else 2 * math.sqrt(spread)


# how much of the peak mass G S(0.5) a prompt at accuracy a is brought up to
SCHEDULE_SHARE = {"equal-treatment": lambda accuracy: 1.0, "hardness-weighted": lambda accuracy: 2 * (1 - accuracy)}


def target_size(accuracy: float, group_size: int, schedule: str, mass: str = "with-std") -> float:
    """N(a) with N S(a) = share(a) x G S(0.5); an all-wrong prompt counts as accuracy 0.5 / G (the authors')."""
    if accuracy <= 1e-6:
        accuracy = 0.5 / group_size
    peak = group_size * cumulative_advantage(0.5, mass)
    return SCHEDULE_SHARE[schedule](accuracy) * peak / cumulative_advantage(accuracy, mass)


def wanted_extras(
    accuracies: list[float], sizes: list[int], group_size: int, schedule: str, threshold: float, max_extra: int,
    mass: str = "with-std",
) -> list[int]:  # fmt: skip
    """Per group: the extra rollouts its schedule asks for now, 0 unless it is below the threshold."""
    wanted = []
    for accuracy, size in zip(accuracies, sizes):
        if accuracy >= threshold:
            wanted.append(0)
            continue
        cap = group_size + max_extra
        target = min(target_size(accuracy, group_size, schedule, mass), cap)
        wanted.append(max(0, min(math.ceil(target - 1e-9), cap) - size))
    return wanted


def fit_to_budget(wanted: list[int], accuracies: list[float], left: int) -> list[int]:
    """Scale the asks down alike to fit `left`; the rounding remainder goes to the hardest prompts first."""
    if sum(wanted) <= left:
        return list(wanted)
    granted = [want * left // sum(wanted) for want in wanted]
    hardest_first = sorted(range(len(wanted)), key=lambda g: (accuracies[g], g))
    remainder = left - sum(granted)
    for g in hardest_first:
        if remainder == 0:
            break
        if granted[g] < wanted[g]:
            granted[g] += 1
            remainder -= 1
    return granted


class DifficultyAdaptiveRollouts(Controller):
    """Prompts below an accuracy threshold get extra rollouts in further stages, the harder the more (DARS).

    Knobs: control.schedule (equal-treatment | hardness-weighted), control.mass (without-std | with-std),
    control.threshold, control.max_extra (per prompt), control.extra_budget (x the step's base budget),
    control.stages.
    Breadth (DARS-B) is rollout.prompts_per_step. Reports pipeline/control/extra_rollouts (extras
    of the step) and pipeline/control/hard_prompts (prompts below the threshold after the first stage).
    """

    Knobs = DARSKnobs

    def __init__(self, cfg):
        super().__init__(cfg)
        c = cfg.control
        self.schedule, self.threshold, self.max_extra, self.mass = c.schedule, c.threshold, c.max_extra, c.mass
        self.max_stages = c.stages
        self.step_budget = math.floor(c.extra_budget * self.budget.prompts * self.budget.group_size)
        self.extra_left, self.extra_rollouts, self.hard_prompts = self.step_budget, 0, 0

    def plan(self, ctx: StageContext) -> Budget:
        self.extra_left, self.extra_rollouts, self.hard_prompts = self.step_budget, 0, 0
        return super().plan(ctx)

    def extend(self, ctx: StageContext, batch: RolloutBatch, stage: int) -> list[int]:
        accuracies = batch.group_reduce(batch.correct.float(), "mean").tolist()  # (P,)
        if stage == 1:
            self.hard_prompts += sum(a < self.threshold for a in accuracies)
        wanted = wanted_extras(accuracies, batch.group_sizes, self.budget.group_size, self.schedule, self.threshold,
                               self.max_extra, self.mass)  # fmt: skip
        granted = fit_to_budget(wanted, accuracies, self.extra_left)
        self.extra_left -= sum(granted)
        self.extra_rollouts += sum(granted)
        return granted

    def metrics(self) -> dict[str, float]:
        return {
            "pipeline/control/extra_rollouts": float(self.extra_rollouts),
            "pipeline/control/hard_prompts": float(self.hard_prompts),
        }
