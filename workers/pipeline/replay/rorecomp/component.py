"""`rorecomp`: train first on the short-correct and long-incorrect completions; the rest later, from a buffer.

RoRecomp (Rollout Response Recomposition, 2025; the seed list). Outcome rewards do not care how
long a completion is, and in a small group the length noise swamps any preference for brevity.
RoRecomp recomposes the training data into two kinds of batches:

- priority: from each fresh group, its short correct completions and its long incorrect ones —
  a clean signal that right-and-brief is better than wrong-and-long;
- compensation: the group's other completions (long correct, short incorrect), kept in a replay
  buffer and trained on every `compensation_every` steps, so the policy still sees the whole
  distribution and does not collapse towards short answers.

Groups are kept whole, so each completion's advantage is always computed against its full
group (the advantage stage recomputes it from the group's rewards, which do not change); which
completions train is set by `in_loss`. A group's priority rows train the step it is sampled; its
remaining rows train in a later compensation step, sampled by an older policy: they keep their sampler's
log-probabilities and version, and the objective gives them the decoupled correction (clipped against
the learner's policy before the step, weighted by its ratio to the sampler's; objective/token_clip).
"""

from __future__ import annotations

from collections import deque

import torch

from workers.pipeline.batch import RolloutBatch
from workers.pipeline.replay.rorecomp import RoRecompKnobs
from workers.pipeline.stages import ReplayStage


def priority_rows(batch: RolloutBatch) -> torch.Tensor:
    """(N,) bool: per group, the shorter half of its correct completions and the longer half of its incorrect ones.

    The shorter half is every correct completion no longer than their lower median, the longer half every
    incorrect one no shorter than their upper median: of an even count of distinct lengths exactly half is
    kept on either side (of two, one), of an odd count the middle one too. (The upper median of the
    incorrect ones is what makes the two sides alike: their lower median kept one more than half.)
    """
    lengths, correct = batch.lengths.cpu().float(), batch.correct.cpu()
    keep = torch.zeros(batch.num_samples, dtype=torch.bool)
    for g in range(batch.num_groups):
        rows = torch.arange(batch.offsets[g], batch.offsets[g + 1])
        right, wrong = rows[correct[rows]], rows[~correct[rows]]
        if len(right):
            keep[right] = lengths[right] <= lengths[right].median()  # torch's median is the lower one
        if len(wrong):
            keep[wrong] = lengths[wrong] >= -(-lengths[wrong]).median()  # the upper median
    return keep


class RolloutRecomposition(ReplayStage):
    """Priority batches of short-correct and long-incorrect completions; the rest replayed as compensation (RoRecomp).

    Knobs: replay.compensation_every, replay.capacity. Reports pipeline/replay/priority_samples,
    pipeline/replay/compensation_samples, pipeline/replay/buffer (groups waiting).
    """

    Knobs = RoRecompKnobs

    def __init__(self, cfg):
        self.every, self.capacity = cfg.replay.compensation_every, cfg.replay.capacity
        self.buffer: deque[RolloutBatch] = deque()  # one group each, in_loss = its rows still to train
        self.fresh = 0  # groups of the last mixed batch that were sampled this step
        self.pending: RolloutBatch | None = None  # the fresh groups, with their remaining rows
        self.last: dict[str, float] = {}

    def mix(self, batch: RolloutBatch, step: int) -> RolloutBatch:
        allowed = batch.in_loss if batch.in_loss is not None else torch.ones(batch.num_samples, dtype=torch.bool)
        priority = priority_rows(batch) & allowed
        remaining = ~priority & allowed
        self.pending = batch.select_groups(list(range(batch.num_groups)))
        self.pending.in_loss = remaining
        batch.in_loss = priority
        for row, first in enumerate(priority.tolist()):
            batch.notes[row]["replay"] = "priority" if first else "kept for compensation"
        parts = [batch]
        compensating = step % self.every == 0 and self.buffer
        if compensating:
            parts += list(self.buffer)
            for group in self.buffer:
                group.note("replay", f"compensation (sampled at step {group.born_step})")
            self.buffer.clear()
        mixed = RolloutBatch.concat(parts)
        self.last = {
            "pipeline/replay/priority_samples": float(priority.sum()),
            "pipeline/replay/compensation_samples": float(sum(int(p.in_loss.sum()) for p in parts[1:])),
        }
        return mixed

    def store(self, batch: RolloutBatch, step: int) -> None:
        """Buffer each fresh group that still has completions to train."""
        pending, self.pending = self.pending, None
        if pending is None:
            return
        for g in range(pending.num_groups):
            group = pending.select_groups([g])
            if group.in_loss.any():
                self.buffer.append(group)
        while len(self.buffer) > self.capacity:
            self.buffer.popleft()
        self.last["pipeline/replay/buffer"] = float(len(self.buffer))

    def metrics(self) -> dict[str, float]:
        return dict(self.last)
