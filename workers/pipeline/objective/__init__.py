"""Objective stage: the policy loss built from new and old log-probabilities and advantages.

KL to the reference and the entropy bonus are added by the trainer for every
objective alike (objective.kl_coef, objective.entropy_coef), using the same
aggregation, so they are knobs of every method.

Each objective is one folder here, found by the registry (no list to edit): its __init__.py, torch-free,
declares it (summary, paper, knobs); its component.py holds the code, imported when a worker builds the
stage. base.py holds the KL estimates, the loss aggregations and the helpers the losses share; shared.py
(torch-free) the knobs every objective has. The off-policy corrections extend token_clip's `TokenClip`.
"""

from workers.registry import Registry

OBJECTIVES: Registry[type] = Registry("objective").discover(__name__)

__all__ = ["OBJECTIVES"]
