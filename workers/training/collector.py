"""The collecting half of a step: generate -> reward -> [more rollout stages] -> filter, until the batch is full.

    collected = collector.collect(step, policy, backend, version=step - 1)   # gather, then commit

Two parts, so that the asynchronous trainer (training/asynchronous.py) can gather in a rollout thread while the
learner trains and commit at its barrier: `gather` runs the rollout stages and writes none of the run's shared
state (its data and sampling streams aside); `commit` lets that state see the step.
"""

from __future__ import annotations

import time

import torch

from workers import metrics as metric
from workers import stopping
from workers.environments import build_environment
from workers.pipeline.batch import RolloutBatch
from workers.pipeline.stages import StageContext
from workers.reporting import Reporter
from workers.tasks.rewards import Completion
from workers.training.parts import COLLECT_STAGES, Collected, Gathered
from workers.training.report import stage_metrics
from workers.training.state import RunState


class Collector:
    def __init__(self, cfg, task, rewards: dict, state: RunState, reporter: Reporter):
        self.cfg, self.task, self.rewards, self.state, self.reporter = cfg, task, rewards, state, reporter
        self.environment = build_environment(cfg, task)

    def collect(self, step: int, policy, backend, version: int) -> Collected:
        """Step `step`'s batch, sampled by `policy` (of version `version`) through `backend`, and committed."""
        return self.commit(self.gather(step, policy, backend, version))

    def gather(self, step: int, policy, backend, version: int) -> Gathered:
        """The rollout stages of a step, sampled by `policy` (of version `version`) through `backend`.

        The control stage plans the step, then sets each round's prompts' budget, and may grow the
        round's scored groups in further rollout stages before the filter sees them. This part reads
        the prompt history and the components' state but writes none of the run's shared state (its
        data and sampling streams aside), so the asynchronous trainer runs it in its rollout thread
        while the learner trains; `commit` then records the step in the main thread.
        """
        stages, ctx = self.state.stages, self.stage_context(step, policy, backend, version)
        budget = stages.control.plan(ctx)

        def draw(count: int):
            """`count` prompts chosen by the control stage from the drawn candidates, and their budget."""
            candidates = self.task.train_batch(budget.candidates_for(count), self.state.data_rng)
            examples = stages.control.select(ctx, candidates, count)
            self.state.data_stream.add(examples)
            return examples, stages.control.allocate(ctx, examples, budget)

        ctx.draw = draw
        kept, generated, dropped, generate_s, reward_s, rounds = [], [], [], 0.0, 0.0, 0
        while rounds < stages.filter.max_rounds and sum(b.num_groups for b in kept) < budget.prompts:
            rounds += 1
            examples, granted = draw(budget.prompts - sum(b.num_groups for b in kept))
            batch, round_generate_s, round_reward_s = self.sample_scored(ctx, examples, granted)
            batch, more_generate_s, more_reward_s = self.extend(ctx, batch, granted)
            generate_s += round_generate_s + more_generate_s
            reward_s += round_reward_s + more_reward_s
            keep = stages.filter(batch, ctx)
            first = sum(b.num_groups for b in generated)  # this round's groups' place in the step's
            dropped += [first + g for g in sorted(set(range(batch.num_groups)) - set(keep))]
            kept.append(batch.select_groups(keep))
            generated.append(batch)
            stopping.checkpoint()
        everything = RolloutBatch.concat(generated)
        return Gathered(step, RolloutBatch.concat(kept), everything, dropped, budget.prompts, rounds, generate_s,
                        reward_s)  # fmt: skip

    def stage_context(self, step: int, policy, backend, version: int) -> StageContext:
        return StageContext(
            policy=policy,
            backend=backend,
            generator=self.state.sampling_rng,
            temperature=self.cfg.rollout.temperature,
            top_p=self.cfg.rollout.top_p,
            top_k=self.cfg.rollout.top_k,
            step=step,
            history=self.state.history,
            version=version,
            environment=self.environment,
        )

    def sample_scored(self, ctx: StageContext, examples, budget) -> tuple[RolloutBatch, float, float]:
        """The generate stage's groups of `examples`, scored; and the seconds generating and scoring took."""
        began = time.perf_counter()
        batch = self.generate(ctx, examples, budget)
        generated = time.perf_counter()
        self.score(batch)
        return batch, generated - began, time.perf_counter() - generated

    def generate(self, ctx: StageContext, examples, budget) -> RolloutBatch:
        """The generate stage's groups, each row stamped with the sampling policy's version unless it has one."""
        batch = self.state.stages.generate(ctx, examples, budget)
        if batch.versions is None:
            batch.versions = torch.full((batch.num_samples,), ctx.version, dtype=torch.long)
        return batch

    def commit(self, gathered: Gathered) -> Collected:
        """Record a gathered step in the run's shared state: every scored group, kept or not, goes into the
        prompt history, then every stage's component observes it; the counters count it."""
        everything, batch, step, state = gathered.generated, gathered.batch, gathered.step, self.state
        state.history.update(everything, step)
        for component in vars(state.stages).values():
            component.observe(everything)
        state.counters[metric.ROLLOUT_TOKENS] += everything.decoded
        state.counters[metric.SAMPLES] += everything.num_samples
        missing = gathered.wanted - batch.num_groups
        if missing > 0:
            self.reporter.log(
                f"step {step}: the filter kept {batch.num_groups} of {gathered.wanted} groups in {gathered.rounds} "
                f"rounds (filter.max_rounds); training on those, {missing} short"
            )
        observed = {**state.history.metrics(), **stage_metrics(state.stages, COLLECT_STAGES)}
        return Collected(batch, everything, gathered.dropped, gathered.rounds, missing, gathered.generate_s,
                         gathered.reward_s, observed)  # fmt: skip

    def extend(self, ctx: StageContext, batch: RolloutBatch, allocated) -> tuple[RolloutBatch, float, float]:
        """Further rollout stages of a scored round, as long as the control stage asks for more.

        Stage k's samples go through the generate stage and the rewards like the first stage's, and
        join their groups (which stay contiguous, so groups grow ragged); every sample's notes say
        the stage it came from. Returns the grown batch and the seconds spent generating and scoring.
        """
        control, generate_s, reward_s = self.state.stages.control, 0.0, 0.0
        for stage in range(2, control.max_stages + 1):
            extras = control.extend(ctx, batch, stage - 1)
            groups = [g for g, count in enumerate(extras) if count > 0]
            if not groups:
                break
            examples = [batch.examples[g] for g in groups]
            extra_budget = allocated.extra(batch.num_groups, groups, [extras[g] for g in groups])
            more, more_generate_s, more_reward_s = self.sample_scored(ctx, examples, extra_budget)
            generate_s, reward_s = generate_s + more_generate_s, reward_s + more_reward_s
            if stage == 2:
                batch.note("control", "rollout stage 1")
            more.note("control", f"rollout stage {stage}")
            batch = batch.add_to_groups(groups, more)
        return batch, generate_s, reward_s

    def score(self, batch: RolloutBatch) -> None:
        """Run every reward function on every completion; the reward is their weighted sum. An episode's reward is
        its environment's (the sum of its turns' parts), and it is correct when the environment says solved."""
        if batch.episodes is not None:
            self.score_episodes(batch)
            return
        lengths, truncated = batch.lengths.tolist(), batch.truncated.tolist()
        groups = batch.group_index.tolist()  # once, not once a row (batch.example_of builds the whole index)
        parts = {name: [] for name in self.rewards}
        correct, answers = [], []
        for row, text in enumerate(batch.texts):
            example = batch.examples[groups[row]]
            completion = Completion(text=text, length=int(lengths[row]), truncated=bool(truncated[row]))
            for name, (_, fn) in self.rewards.items():
                parts[name].append(fn(example, completion))
            correct.append(self.task.is_correct(example, text))
            # a completion cut off by max_new_tokens has committed to no answer: "12345678" cut at 8 tokens
            # parses as a number, and counting it would pay exploration bonuses for ever-new truncated strings
            answers.append(None if completion.truncated else self.task.answer_key(example, text))
        batch.reward_parts = {name: torch.tensor(values) for name, values in parts.items()}
        batch.rewards = sum(weight * batch.reward_parts[name] for name, (weight, _) in self.rewards.items())
        batch.correct = torch.tensor(correct)
        batch.answers = answers

    def score_episodes(self, batch: RolloutBatch) -> None:
        groups = batch.group_index.tolist()
        rewards = torch.tensor([episode.reward for episode in batch.episodes], dtype=torch.float32)
        batch.reward_parts = {ENVIRONMENT_REWARD: rewards}
        batch.rewards = rewards.clone()
        batch.correct = torch.tensor([episode.solved for episode in batch.episodes])
        batch.answers = [
            None if episode.truncated else self.task.answer_key(batch.examples[groups[row]], episode.final_turn)
            for row, episode in enumerate(batch.episodes)
        ]


ENVIRONMENT_REWARD = "environment"  # reward/environment/mean: an episode's reward, summed over its turns
