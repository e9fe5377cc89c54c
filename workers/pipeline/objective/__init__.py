"""Objective stage: the policy loss built from new and old log-probabilities and advantages.

KL to the reference and the entropy bonus are added by the trainer for every
objective alike (objective.kl_coef, objective.entropy_coef), using the same
aggregation, so they are knobs of every method.

The components are declared, with their knobs, in knobs.py (torch-free: RunConfig reads it);
their code, the KL estimate and the loss aggregation are in base.py.
"""

from workers.pipeline.objective.knobs import OBJECTIVES

__all__ = ["OBJECTIVES"]
