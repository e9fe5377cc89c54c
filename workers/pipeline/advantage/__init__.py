"""Advantage stage: the baseline each sample is compared with, and the scale.

The stage sees the whole RolloutBatch (rewards and their parts, lengths,
log-probabilities, groups of any size) and returns an AdvantageOutput: an
advantage per sample (N,) or per token (N, T), and which samples carry gradient.
Estimators that only need each group's rewards subclass `GroupEstimator` and
write `per_group(rewards (P, n))`; it runs once per group size, so they work on
ragged batches unchanged.

Each estimator is one folder here, found by the registry (no list to edit): its __init__.py, torch-free,
declares it (summary, paper, knobs, cross-field check); its component.py holds the code, imported when
a worker builds the stage. base.py holds `GroupEstimator` and the normalisation helpers; shared.py
(torch-free) the knobs and check the declarations share. Most estimators extend group_mean's `GroupMean`.
"""

from workers.registry import Registry

ADVANTAGES: Registry[type] = Registry("advantage estimator").discover(__name__)

__all__ = ["ADVANTAGES"]
