"""Metric names, one constant each, imported by whatever writes or reads the metric.

The namespaces are the design's (docs: reward/, policy/, optim/, pipeline/<stage>/...). So far
the objective stage's policy/ names live here; the trainer's other names are still literals at
their single writer and move here as those modules are next touched.
"""

# the clipped surrogates (workers/pipeline/objective/base.py)
CLIP_RATIO_LOW = "policy/clip_ratio/low"  # share of loss tokens (sequences, for GSPO) clipped below, A < 0
CLIP_RATIO_HIGH = "policy/clip_ratio/high"  # share clipped above, A > 0
SEQUENCE_RATIO_MEAN = "policy/sequence_ratio_mean"  # GSPO: mean length-normalised sequence ratio

# truncated importance sampling: pi_old (the trainer's) / pi_sampler
IS_WEIGHT_MEAN = "policy/is_weight_mean"  # mean weight applied to a loss token, after truncation or masking
IS_OVER_BOUND = "policy/is_over_bound"  # share of loss tokens whose weight was over objective.is_bound

# MinPRO: the prefix-minimum ratio
PREFIX_MIN_RATIO_MEAN = "policy/prefix_min_ratio_mean"  # mean over loss tokens of min_{j<=t} rho_j
PREFIX_MIN_BELOW_TOKEN = "policy/prefix_min_below_token"  # share of loss tokens whose prefix minimum < own ratio

# how far off-policy an optimizer step is, written for every objective (workers/pipeline/objective/base.py:
# off_policy_stats); averaged over the step's optimizer steps like every policy/ metric
ESS = "policy/ess"  # (sum w)^2 / (n sum w^2) of the sequence weights w = pi / pi_old, in (0, 1]: 1 on-policy
TOKEN_RATIO_MEAN = "policy/token_ratio/mean"  # mean over loss tokens of pi / pi_old
TOKEN_RATIO_MAX = "policy/token_ratio/max"  # the largest token ratio of the optimizer step
TOKEN_RATIO_MIN = "policy/token_ratio/min"  # the smallest
TOKEN_RATIO_OUTSIDE = "policy/token_ratio/outside_0.8_1.2"  # share of loss tokens whose ratio left [0.8, 1.2]

# VCPO: what the ESS does to the step
STEP_SCALE = "policy/step_scale"  # the factor the learning rate of this optimizer step was multiplied by
OFF_POLICY_BASELINE = "policy/off_policy_baseline"  # mean |b| of the minimum-variance baseline subtracted

# FiberPO: the token clip's gate split into a sequence gate and a token-residual gate
SEQUENCE_GATED = "policy/sequence_gated"  # share of completions whose length-normalised ratio left its range (gated)
RESIDUAL_GATED = "policy/residual_gated"  # share of loss tokens whose ratio over their sequence's left its range
