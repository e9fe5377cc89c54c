"""Advantage stage: the baseline each sample is compared with, and the scale.

The stage sees the whole RolloutBatch (rewards and their parts, lengths,
log-probabilities, groups of any size) and returns an AdvantageOutput: an
advantage per sample (N,) or per token (N, T), and which samples carry gradient.
Estimators that only need each group's rewards subclass `GroupEstimator` and
write `per_group(rewards (P, n))`; it runs once per group size, so they work on
ragged batches unchanged.

The estimators are declared, with their knobs, in knobs.py (torch-free: RunConfig reads it);
their code is in base.py and one module per method, imported when a worker builds the stage.
"""

from workers.pipeline.advantage.knobs import ADVANTAGES

__all__ = ["ADVANTAGES"]
