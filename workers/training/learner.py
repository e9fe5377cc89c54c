"""The learning half of a step: replay.mix -> advantage -> update (objective) -> replay.store.

    trained = learner.learn(step, collected)   # Trained(metrics, batch, train_s)

The update is schedule.updates_per_batch passes of schedule.minibatches optimizer steps over the
samples in the loss; pi_old is the sampler's log-probabilities or the learner's own recompute
(objective.old_logprobs), and rows an older policy sampled take the decoupled form.
"""

from __future__ import annotations

import math
import time

import numpy as np
import torch

from workers import metrics as metric
from workers import stopping
from workers.pipeline.batch import RolloutBatch
from workers.pipeline.objective.base import KL_ESTIMATORS, aggregator, k3_kl, off_policy_stats
from workers.pipeline.stages import LossInputs
from workers.training.forwards import Forwards
from workers.training.inspector import Inspector, UpdateEntropies
from workers.training.microbatch import LossLeaves, token_parts
from workers.training.parts import Collected, Trained
from workers.training.report import advantage_metrics, batch_metrics
from workers.training.state import RunState

# a need a component may declare (Declaration.needs) -> the Learner method that fills it into the batch
PROVIDERS = {"ref_logprobs": "fill_ref_logprobs", "answer_counts": "fill_answer_counts"}


def declared_needs(cfg) -> set[str]:
    """What the config's components declare they read beyond a scored batch (Declaration.needs)."""
    from workers.pipeline import STAGES

    return {need for stage, registry in STAGES.items() for need in registry.declaration(getattr(cfg, stage).name).needs}


def recomputes_old_logprobs(cfg) -> bool:
    """objective.old_logprobs, with auto resolved: recompute unless a float32 policy samples itself (`hf`) without
    autocast (bf16 rounding makes the sampler's and the learner's forwards disagree)."""
    choice = cfg.objective.old_logprobs
    if choice == "auto":  # rollout actors sample from copies, whose log-probabilities show whether the sync worked
        full_precision = cfg.model.dtype == "float32" and getattr(cfg.model, "autocast", "none") == "none"
        return not full_precision or cfg.rollout.backend != "hf" or cfg.resources.executor != "local"
    return choice == "recompute"


class Learner:
    def __init__(self, cfg, policy, state: RunState, forwards: Forwards, inspector: Inspector, backends):
        self.cfg, self.policy, self.state, self.forwards, self.inspector = cfg, policy, state, forwards, inspector
        self.backends = backends  # a sampler sharing the GPU frees it for the update (training/backends.py)
        self.optimizer = torch.optim.AdamW(
            [p for p in policy.model.parameters() if p.requires_grad],  # with LoRA adapters, only they train
            lr=cfg.optimizer.lr,
            betas=(cfg.optimizer.beta1, cfg.optimizer.beta2),
            weight_decay=cfg.optimizer.weight_decay,
        )
        self.recompute_old_logprobs = recomputes_old_logprobs(cfg)
        self.needs = declared_needs(cfg)  # what the chosen components read that is computed only when asked
        needs_reference = cfg.objective.kl_coef > 0 or "ref_logprobs" in self.needs
        self.reference = policy.reference() if needs_reference else None

    @property
    def stages(self):
        return self.state.stages

    # ------------------------------------------------------------------ the half step
    def learn(self, step: int, collected: Collected, bound=None) -> Trained:
        """replay.mix -> advantage -> update -> replay.store, on a collected batch.

        `bound` (training.asynchronous.StalenessBound), in the asynchronous trainer, drops the groups too stale
        for the loss before the advantage stage and reports the staleness of what trains. The learner's version
        at step `step` is step - 1 (the RL steps it has completed).
        """
        batch = self.stages.replay.mix(collected.batch, step)
        metrics = batch_metrics(collected, self.stages)
        if bound is not None:
            batch = bound.admit(batch, step - 1)
        train_s = 0.0
        if batch.num_groups:
            advantage_stats = self.compute_advantages(batch)
            metrics.update({**advantage_metrics(batch), **advantage_stats})
            inspected = None
            if self.cfg.schedule.samples_per_step:  # described now, before the update; entropies from the update
                collected.described, inspected = self.inspector.inspect(batch, collected.generated, collected.dropped)
            stopping.checkpoint()
            self.backends.release_memory()
            began_update = time.perf_counter()
            metrics.update(self.update(batch, step, inspected))
            train_s = time.perf_counter() - began_update
            if inspected is not None:
                inspected.fill()
            self.stages.replay.store(batch, step)
        if bound is not None:
            metrics.update(bound.metrics(batch, step - 1))
        return Trained(metrics, batch, train_s)

    # ------------------------------------------------------------------ advantage
    def compute_advantages(self, batch: RolloutBatch) -> dict[str, float]:
        """Advantages of every sample; a sample is in the loss if both the filter and the estimator keep it.

        Returns what the estimator reports of its own (pipeline/advantage/...).
        """
        self.provide(batch)
        out = self.stages.advantage(batch)
        kept_by_filter = batch.in_loss if batch.in_loss is not None else torch.ones_like(out.in_loss)
        batch.advantages, batch.in_loss = out.advantages, out.in_loss & kept_by_filter
        batch.token_mask = out.token_mask
        if batch.weights is not None:  # importance weights of the samples' losses (e.g. survivors of an abort)
            weights = batch.weights.to(batch.advantages.device)
            batch.advantages = batch.advantages * (weights if batch.advantages.dim() == 1 else weights[:, None])
        for row, (value, estimator_keeps, filter_keeps) in enumerate(
            zip(batch.sample_advantages().tolist(), out.in_loss.tolist(), kept_by_filter.tolist())
        ):
            if not estimator_keeps:
                batch.notes[row]["advantage"] = f"{out.left_out}: left out of the loss"
            elif not filter_keeps:
                batch.notes[row]["advantage"] = f"{value:+.3f}, left out of the loss by the filter"
            else:
                batch.notes[row]["advantage"] = f"{value:+.3f}"
        return dict(out.stats)

    def provide(self, batch: RolloutBatch) -> None:
        """Fill, for every sample of the batch, what the chosen components declare they need (Declaration.needs)."""
        for need in sorted(self.needs):
            getattr(self, PROVIDERS[need])(batch)

    @torch.no_grad()
    def fill_ref_logprobs(self, batch: RolloutBatch) -> None:
        """batch.ref_logprobs (N, T): the frozen reference policy's log-probabilities of every completion token."""
        rows = torch.arange(batch.num_samples)
        inputs = self.forwards.inputs(batch, rows, batch.mask.to(self.forwards.device))
        batch.ref_logprobs = (self.forwards.logprobs(self.reference, inputs)[0] * inputs["mask"]).cpu()

    def fill_answer_counts(self, batch: RolloutBatch) -> None:
        """batch.answer_counts (N,): each sample's answer's count for its prompt in the prompt history, which
        already holds this step's groups (the collector commits them before the advantage stage)."""
        batch.answer_counts = self.state.history.answer_counts(batch)

    # ------------------------------------------------------------------ update
    def updates_per_step(self) -> int:
        """Optimizer steps the schedule plans per RL step: passes x minibatches."""
        return self.cfg.schedule.updates_per_batch * self.cfg.schedule.minibatches

    def lr_factor(self, update: int) -> float:
        o = self.cfg.optimizer
        total = self.cfg.schedule.steps * self.updates_per_step()
        if update < o.warmup_steps:
            return (update + 1) / o.warmup_steps
        if o.schedule == "cosine":
            progress = (update - o.warmup_steps) / max(1, total - o.warmup_steps)
            return 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))
        return 1.0

    def update(self, batch: RolloutBatch, step: int = 1, entropies: UpdateEntropies | None = None) -> dict[str, float]:
        """schedule.updates_per_batch passes of schedule.minibatches optimizer steps over the samples in the loss.

        Each pass is split into exactly schedule.minibatches parts whose sizes differ by at most
        one; a part left empty (fewer samples than minibatches) is skipped, and the learning-rate
        schedule still counts it, so the rate at every step is the one the schedule planned.
        `entropies`: rows whose per-token entropies under the policy before the update are recorded on the way
        (the inspector's), from recompute_old's forward or the first optimizer step's, and for the rows neither
        holds, a forward of their own (entropies_before_update).
        """
        model, schedule = self.policy.model, self.cfg.schedule
        rows = batch.in_loss.nonzero().flatten()  # samples left out of the loss cost no compute
        inputs = self.training_inputs(batch, rows)
        inputs["staleness"] = batch.staleness(learner_version=step - 1).cpu()[rows.cpu()]
        if entropies is not None:
            entropies.locate(rows)
        passes = [
            torch.randperm(len(rows), generator=self.state.shuffle_rng).tensor_split(schedule.minibatches)
            for _ in range(schedule.updates_per_batch)
        ]
        model.train()
        stats: dict[str, list[float]] = {}
        if self.recompute_old_logprobs and len(rows):
            stats[metric.SAMPLER_LOGPROB_DIFF] = [self.recompute_old(inputs, passes[0], entropies)]
        else:
            self.recompute_stale_old(inputs, passes[0])
            if entropies is not None:
                self.entropies_before_update(inputs, passes[0][0], entropies)
        first_update, done = (step - 1) * self.updates_per_step(), 0
        for i, chunk in enumerate(chunk for chunks in passes for chunk in chunks):
            stopping.checkpoint()
            if len(chunk) == 0:
                continue
            for name, value in self.optimizer_step(inputs, chunk, first_update + i, entropies).items():
                stats.setdefault(name, []).append(value)
            done += 1
        model.eval()
        return {metric.OPTIM_STEPS: float(done), **{name: float(np.mean(values)) for name, values in stats.items()}}

    @torch.no_grad()
    def recompute_old(self, inputs, chunks, entropies: UpdateEntropies | None = None) -> float:
        """Replace the sampler's log-probabilities by the learner's own, before any update; return their gap.

        The chunks are those of the first pass, so its first minibatch sees exactly the
        numbers it will compute itself: its ratio is 1, as an on-policy ratio must be.
        The gap (mean |difference| per completion token) is policy/sampler_logprob_diff:
        how far the sampler's numerics (dtype, KV cache, another engine) are from the learner's.
        """
        sampler = inputs["old_logprobs"]
        recomputed = sampler.clone()
        for chunk in chunks:
            if len(chunk):
                recomputed[chunk.to(sampler.device)] = self.forwards.logprobs(
                    self.policy.model, inputs, chunk, record=entropies
                )[0]
        mask = inputs["mask"]
        inputs["old_logprobs"] = recomputed * mask
        return float(((recomputed - sampler).abs() * mask).sum() / mask.sum().clamp(min=1))

    def recompute_stale_old(self, inputs, chunks) -> None:
        """pi_old of the rows an older policy sampled, recomputed by the learner before any update, where the
        sampler's numbers are otherwise carried: those rows take the decoupled form (objective.token_clip's
        TokenClip), whose clip is against this proximal policy and whose weight is pi_prox / pi_behaviour, so
        their weight is the one a recomputing run gives them. Fresh rows keep the sampler's numbers. Each chunk of
        the first pass keeps its own stale rows, so the forwards are the minibatches' size."""
        stale = inputs["staleness"] > 0  # (B,)
        if self.stages.objective.proximal is None and bool(stale.any()):
            self.recompute_old(inputs, [chunk[stale[chunk.to(stale.device)].cpu()] for chunk in chunks])

    @torch.no_grad()
    def entropies_before_update(self, inputs, first_chunk: torch.Tensor, entropies: UpdateEntropies) -> None:
        """Record the wanted rows that the first minibatch does not hold, from a forward over them alone, now: the
        first optimizer step records its own rows under the same policy, and later ones would see a newer one.

        With recompute_old (a forward over every row before any step) or one minibatch, no forward runs here.
        """
        later = sorted(set(entropies.wanted) - set(first_chunk.tolist()))
        if later:
            self.forwards.logprobs(self.policy.model, inputs, torch.tensor(later), record=entropies)

    def training_inputs(self, batch: RolloutBatch, rows: torch.Tensor) -> dict[str, torch.Tensor]:
        """Prompt (left-padded) + completion (right-padded) token matrices for the rows in the loss."""
        device = self.forwards.device
        take = lambda x: x[rows.to(x.device)].to(device)  # noqa: E731  (rewards live on the CPU, tokens may not)
        mask = take(batch.trained_tokens())  # (B, T) the policy's tokens: an episode's observations are not trained
        if batch.token_mask is not None:  # the advantage stage keeps only some tokens in the loss
            mask = mask * take(batch.token_mask).to(mask.dtype)
        inputs = self.forwards.inputs(batch, rows, mask)
        inputs["old_logprobs"] = take(batch.logprobs)
        inputs["sampler_logprobs"] = take(batch.logprobs)  # kept when old_logprobs is replaced by the recompute
        inputs["advantages"] = take(batch.advantages)
        inputs["group"] = take(batch.group_index)  # (B,) the group of every row
        if self.reference is not None and batch.ref_logprobs is not None and batch.token_mask is None:
            # already computed for a component that reads it (Declaration.needs), on the same tokens and
            # attention: one forward of the reference per step, not two
            inputs["ref_logprobs"] = take(batch.ref_logprobs)
        elif self.reference is not None:
            with torch.no_grad():
                inputs["ref_logprobs"] = self.forwards.logprobs(self.reference, inputs)[0]
        return inputs

    def optimizer_step(
        self, inputs, chunk: torch.Tensor, update: int, entropies: UpdateEntropies | None = None
    ) -> dict[str, float]:
        """One optimizer step on the rows `chunk`, at the learning rate the schedule gives optimizer step `update`."""
        cfg = self.cfg.objective
        mask = inputs["mask"][chunk]
        wants_entropy_grad = cfg.entropy_coef > 0
        parts = self.micro_batches(inputs, chunk)
        if parts is None:
            logprobs, entropy = self.forwards.logprobs(
                self.policy.model, inputs, chunk, with_entropy=wants_entropy_grad, record=entropies
            )
        else:  # the loss is taken of leaves; each part's forward is back-propagated on its own below
            leaves = self.logprobs_in_parts(inputs, chunk, parts, wants_entropy_grad, entropies)
            logprobs, entropy = leaves.logprobs, leaves.entropy
        aggregate = aggregator(cfg.aggregation, mask, self.cfg.rollout.max_new_tokens)
        old, proximal_stats = self.proximal_logprobs(inputs, chunk, logprobs)
        loss_inputs = LossInputs(
            logprobs,
            old,
            inputs["advantages"][chunk],
            mask,
            aggregate,
            sampler_logprobs=inputs["sampler_logprobs"][chunk],
            group=inputs["group"][chunk],
            staleness=inputs["staleness"][chunk.cpu()],
        )
        out = self.stages.objective(loss_inputs)
        loss = out.loss
        stats = {**off_policy_stats(loss_inputs), **out.stats, **proximal_stats}
        if self.reference is not None:
            kl = KL_ESTIMATORS[cfg.kl_estimator](logprobs, inputs["ref_logprobs"][chunk])  # (B, T)
            loss = loss + cfg.kl_coef * aggregate(kl)
            stats[metric.KL_REF] = float(aggregate(kl.detach()))
        if wants_entropy_grad:
            loss = loss - cfg.entropy_coef * aggregate(entropy)
            stats[metric.ENTROPY] = float(aggregate(entropy.detach()))
        loss.backward()
        if parts is not None:
            self.backward_in_parts(inputs, chunk, parts, leaves)
        limit = self.cfg.optimizer.grad_clip or float("inf")
        grad_norm = torch.nn.utils.clip_grad_norm_(self.policy.model.parameters(), limit)
        # the objective may scale this step (VCPO's ESS): the rate, not the loss, since Adam undoes a loss scale
        lr = self.cfg.optimizer.lr * self.lr_factor(update) * out.step_scale
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        stats[metric.LR] = lr
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        if self.stages.objective.proximal is not None:
            self.stages.objective.proximal.advance(self.policy.model)
        with torch.no_grad():
            log_ratio = old - logprobs.detach()
            stats[metric.APPROX_KL] = float(aggregate(torch.exp(-log_ratio) - 1 + log_ratio))
            if not wants_entropy_grad:
                stats[metric.ENTROPY] = float(aggregate(-logprobs.detach()))  # sampled-token estimate
        stats.update({metric.LOSS: float(loss.detach()), metric.GRAD_NORM: float(grad_norm)})
        return stats

    def micro_batches(self, inputs, chunk: torch.Tensor) -> list[torch.Tensor] | None:
        """schedule.micro_batch_tokens' parts of the rows `chunk` (positions into it); None: one forward does."""
        budget = self.cfg.schedule.micro_batch_tokens
        if not budget:
            return None
        parts = token_parts(self.forwards.extents(inputs, chunk), inputs["prompt_ids"].shape[1], budget)
        return parts if len(parts) > 1 else None

    def part_logprobs(self, inputs, chunk, part, with_entropy=False, record=None):
        """The log-probabilities (and entropies) of the rows at positions `part` of `chunk`, forwarded at the
        part's own width (its rows have similar lengths: token_parts sorts them)."""
        rows = chunk[part.to(chunk.device)]
        width = int(self.forwards.extents(inputs, rows).max())
        return self.forwards.padded_logprobs(self.policy.model, inputs, rows, width, with_entropy, record)

    @torch.no_grad()
    def logprobs_in_parts(self, inputs, chunk, parts, with_entropy, record) -> LossLeaves:
        """The chunk's log-probabilities (and entropies), computed part by part without gradient, as leaves."""
        shape = (len(chunk), inputs["completion"].shape[1])
        logprobs = torch.zeros(shape, device=self.forwards.device)
        entropy = torch.zeros(shape, device=self.forwards.device) if with_entropy else None
        for part in parts:
            at = part.to(logprobs.device)
            logprobs[at], part_entropy = self.part_logprobs(inputs, chunk, part, with_entropy, record)
            if entropy is not None:
                entropy[at] = part_entropy
        return LossLeaves(logprobs, entropy)

    def backward_in_parts(self, inputs, chunk, parts, leaves: LossLeaves) -> None:
        """Back-propagate the loss's gradient at the leaves through each part's forward, one part at a time."""
        for part in parts:
            logprobs, entropy = self.part_logprobs(inputs, chunk, part, with_entropy=leaves.entropy is not None)
            leaves.surrogate(part, logprobs, entropy).backward()

    @torch.no_grad()
    def proximal_logprobs(self, inputs, chunk: torch.Tensor, logprobs: torch.Tensor) -> tuple[torch.Tensor, dict]:
        """(B, T) pi_prox of the rows `chunk`: the objective's own proximal policy's (PPO-EWMA), from a forward of
        its network now; else pi_old as update() left it. And how far the proximal policy lags the current one."""
        proximal = self.stages.objective.proximal
        if proximal is None:
            return inputs["old_logprobs"][chunk], {}
        mask = inputs["mask"][chunk]
        network = proximal.network(self.policy.model)
        old = self.forwards.logprobs(network, inputs, chunk)[0] * mask
        lag = k3_kl(logprobs.detach(), old)  # (B, T) KL(pi || pi_prox)
        return old, {metric.PROXIMAL_LAG: float((lag * mask).sum() / mask.sum().clamp(min=1))}
