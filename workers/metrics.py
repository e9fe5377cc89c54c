"""Metric names, one constant each, imported by whatever writes or reads the metric.

The namespaces are the design's (docs: reward/, policy/, optim/, pipeline/<stage>/...). The
trainer's, the evaluation's, the prompt history's, the objectives' and the newer advantage
components' names live here; an older component's own pipeline/<stage>/... names stay beside it,
at their single writer.
"""

# the clipped surrogates (workers/pipeline/objective/token_clip, sequence_clip)
CLIP_RATIO_LOW = "policy/clip_ratio/low"  # share of loss tokens (sequences, for GSPO) clipped below, A < 0
CLIP_RATIO_HIGH = "policy/clip_ratio/high"  # share clipped above, A > 0
SEQUENCE_RATIO_MEAN = "policy/sequence_ratio_mean"  # GSPO: mean length-normalised sequence ratio

# truncated importance sampling: pi_old (the trainer's) / pi_sampler
IS_WEIGHT_MEAN = "policy/is_weight_mean"  # mean weight applied to a loss token, after truncation or masking
IS_OVER_BOUND = "policy/is_over_bound"  # share of loss tokens whose weight was over objective.is_bound

# MinPRO: the prefix-minimum ratio
PREFIX_MIN_RATIO_MEAN = "policy/prefix_min_ratio_mean"  # mean over loss tokens of min_{j<t} rho_j (1 at the first)
PREFIX_MIN_BELOW_TOKEN = "policy/prefix_min_below_token"  # share of loss tokens whose prefix minimum < own ratio

# how far off-policy an optimizer step is, written for every objective (workers/pipeline/objective/base.py:
# off_policy_stats); averaged over the step's optimizer steps like every policy/ metric
ESS = "policy/ess"  # (sum w)^2 / (n sum w^2) of the sequence weights w = pi / pi_behaviour, in (0, 1]: 1 on-policy
TOKEN_RATIO_MEAN = "policy/token_ratio/mean"  # mean over loss tokens of pi / pi_old
TOKEN_RATIO_MAX = "policy/token_ratio/max"  # the largest token ratio of the optimizer step
TOKEN_RATIO_MIN = "policy/token_ratio/min"  # the smallest
TOKEN_RATIO_OUTSIDE = "policy/token_ratio/outside_0.8_1.2"  # share of loss tokens whose ratio left [0.8, 1.2]

# the decoupled correction of rows an older policy sampled (replayed, continued, asynchronous; token_clip's TokenClip):
# the clip's ratio is pi / pi_prox, and min(pi_prox / pi_behaviour, C) weighs the row's tokens
STALE_ROWS = "policy/stale_rows"  # share of the optimizer step's loss rows sampled by an older policy version
STALE_IS_WEIGHT_MEAN = "policy/stale_is_weight_mean"  # mean weight over those rows' loss tokens, after the bound
STALE_IS_OVER_BOUND = "policy/stale_is_over_bound"  # share of those tokens whose weight was over the bound

# the proximal policy of PPO-EWMA (workers/pipeline/objective/ewma_proximal): the EWMA of the weights
PROXIMAL_LAG = "policy/proximal_lag_kl"  # k3 of the proximal policy against the current one, over loss tokens

# VCPO: what the ESS does to the step
STEP_SCALE = "policy/step_scale"  # the factor the learning rate of this optimizer step was multiplied by
OFF_POLICY_BASELINE = "policy/off_policy_baseline"  # mean |b| of the minimum-variance baseline subtracted

# the trainer's counters, cumulative over the run (workers/training/state.py)
ROLLOUT_TOKENS = "counters/rollout_tokens"  # completion tokens decoded so far
SAMPLES = "counters/samples"  # completions scored so far
WALL_S = "counters/wall_s"  # seconds spent in steps so far

# time and speed of a step: they measure the machine, not the computation (reporting.NONDETERMINISTIC_PREFIXES)
GENERATE_S = "timing/generate_s"
REWARD_S = "timing/reward_s"
TRAIN_S = "timing/train_s"
SYNC_S = "timing/sync_s"
STEP_S = "timing/step_s"
EVAL_S = "timing/eval_s"  # the held-out evaluation of the step, when one was due (not in step_s)
ROLLOUT_TOKENS_PER_S = "throughput/rollout_tokens_per_s"  # decoded tokens / generate seconds
RSS_GB = "system/rss_gb"  # resident memory of the worker (workers/system.py: sampled once a step)
PEAK_RSS_GB = "system/peak_rss_gb"  # the most resident memory the worker process has held so far
GPU_MEM_GB = "system/gpu_mem_gb"  # peak CUDA memory
CPU_UTIL = "system/cpu_util"  # the worker's CPU over the step, in percent of one core (200: two cores busy)
MEM_UTIL = "system/mem_util"  # the machine's memory in use, percent
GPU_UTIL = "system/gpu_util"  # the GPU's busy percentage (NVML), where there is one
# the run page's System charts, in order
SYSTEM_CHARTS = (CPU_UTIL, RSS_GB, PEAK_RSS_GB, MEM_UTIL, GPU_UTIL, GPU_MEM_GB)

# the update (workers/training/learner.py: Learner.update, optimizer_step); averaged over a step's optimizer steps
OPTIM_STEPS = "optim/steps"  # optimizer steps taken this RL step
LR = "optim/lr"  # the learning rate of the step, after the schedule and any step scale
GRAD_NORM = "optim/grad_norm"  # before clipping
LOSS = "policy/loss"
KL_REF = "policy/kl_ref"  # the KL estimate to the reference (objective.kl_estimator), when kl_coef > 0
APPROX_KL = "policy/approx_kl"  # k3 of pi_old against the policy after the step
ENTROPY = "policy/entropy"  # the entropy (or its sampled-token estimate when no entropy bonus asks for it)
SAMPLER_LOGPROB_DIFF = "policy/sampler_logprob_diff"  # mean |trainer - sampler| log-probability, when recomputed

# the asynchronous trainer (workers/training/asynchronous.py, schedule.max_staleness): versions are RL steps trained
ASYNC_STALENESS_MEAN = "pipeline/async/staleness_mean"  # learner version - sampler version, mean over loss rows
ASYNC_STALENESS_MAX = "pipeline/async/staleness_max"  # the largest, never above schedule.max_staleness
ASYNC_DROPPED_SAMPLES = "pipeline/async/dropped_samples"  # rows of the groups dropped as too stale this step

# rewards, groups and completions of everything generated in a step (training/report.py: batch_metrics)
REWARD_MEAN = "reward/mean"
REWARD_STD = "reward/std"
FRAC_ZERO_STD = "groups/frac_zero_std"  # groups whose rewards are all equal: no GRPO signal
FRAC_ALL_CORRECT = "groups/frac_all_correct"
FRAC_ALL_WRONG = "groups/frac_all_wrong"
DISTINCT_COMPLETIONS = "groups/distinct_completions"  # distinct texts / group size, mean over groups
MEAN_LENGTH = "completions/mean_length"  # tokens
MAX_LENGTH = "completions/max_length"  # tokens
CLIPPED_RATIO = "completions/clipped_ratio"  # share cut by max_new_tokens
SAMPLES_PER_PROMPT = "pipeline/generate/samples_per_prompt"
FILTER_ROUNDS = "pipeline/filter/rounds"
FILTER_MISSING_GROUPS = "pipeline/filter/missing_groups"
FILTER_DROPPED_GROUPS = "pipeline/filter/dropped_groups"
FILTER_KEPT_GROUPS = "pipeline/filter/kept_groups"
FILTER_LEFT_OUT_SAMPLES = "pipeline/filter/left_out_samples"
ADVANTAGE_MEAN = "advantage/mean"  # over the samples in the loss
ADVANTAGE_ABS_MEAN = "advantage/abs_mean"
ADVANTAGE_LEFT_OUT = "pipeline/advantage/left_out"  # samples the advantage stage left out of the loss

# multi-turn episodes (workers/environments): what the environment saw of a step's episodes
EPISODE_SUCCESS = "episodes/success"  # share of episodes the environment says were solved
EPISODE_TURNS = "episodes/turns_mean"  # policy turns per episode
EPISODE_WELL_FORMED = "episodes/well_formed_turns"  # share of turns in the environment's format
EPISODE_CALLED = "episodes/well_formed_call"  # share of episodes with a tool call (an action) the environment read
EPISODE_TRUNCATED = "episodes/truncated"  # share cut by a token limit
EPISODE_POLICY_TOKENS = "episodes/policy_tokens_mean"  # the policy's tokens per episode (all turns)
EPISODE_OBSERVATION_TOKENS = "episodes/observation_tokens_mean"  # the environment's tokens per episode

# held-out evaluation (workers/training/evaluation.py)
PASS_AT_1 = "eval/pass@1"  # greedy
PASS_AT_K = "eval/pass@k"  # unbiased estimator from eval.samples
MAJ_AT_K = "eval/maj@k"  # majority vote over disjoint blocks of k
# pass@k over the held-out problems that neither the greedy completion nor any sample solved at step 0 (what
# exploration methods claim to open up), and their share of the held-out split
PASS_AT_K_UNSOLVED = "eval/pass@k/unsolved_at_start"
UNSOLVED_AT_START = "eval/unsolved_at_start"

# the prompt history (workers/pipeline/history.py)
PROMPTS_DISTINCT = "prompts/distinct"
PROMPTS_REVISITED = "prompts/revisited"
PROMPTS_MEAN_PASS_RATE = "prompts/mean_pass_rate"  # last pass rate, mean over prompts
PROMPTS_FRAC_SOLVED = "prompts/frac_solved"
PROMPTS_FRAC_UNSOLVED = "prompts/frac_unsolved"


# namespaces, for code that maps or matches names by their first part (rolloutlab_client.integrations.trl)
REWARD_PREFIX = "reward/"
COMPLETIONS_PREFIX = "completions/"
EVAL_PREFIX = "eval/"


def reward_part(function: str) -> str:
    """reward/<function>/mean: the mean of one reward function of reward.weights over a step's completions."""
    return f"{REWARD_PREFIX}{function}/mean"


# advantage components that treat one reward function apart (workers/pipeline/advantage/grpo_lambda, drpo)
PENALTY_GATED_GROUPS = "pipeline/advantage/penalty_gated_groups"  # GRPO-lambda: share of groups the penalty applied to
GATED_PENALTY_MEAN = "pipeline/advantage/gated_penalty_mean"  # its weighted value, mean over those groups' samples
SOLVED_GROUPS = "pipeline/advantage/solved_groups"  # DRPO: share of groups with no wrong completion
POSITIVE_WEIGHT_MAX = "pipeline/advantage/positive_weight_max"  # DRPO: largest |P| w_i of a group, mean over groups
CORRECT_NEGATIVE = "pipeline/advantage/correct_negative"  # share of correct completions with an advantage < 0
# outcome-based exploration (workers/pipeline/advantage/outcome_explore): the bonuses added to the reward
OUTCOME_BONUS_MEAN = "pipeline/advantage/outcome_bonus_mean"  # mean over samples of the net bonus added to r
OUTCOME_HISTORY_BONUS_MEAN = "pipeline/advantage/outcome_history_bonus_mean"  # mean historical (UCB) bonus
OUTCOME_BATCH_PENALTY_MEAN = "pipeline/advantage/outcome_batch_penalty_mean"  # mean within-group repeat penalty
DISTINCT_ANSWERS = "pipeline/advantage/distinct_answers"  # distinct answers given per group, mean over groups
# FiberPO: the token clip's gate split into a sequence gate and a token-residual gate
SEQUENCE_GATED = "policy/sequence_gated"  # share of completions whose length-normalised ratio left its range (gated)
RESIDUAL_GATED = "policy/residual_gated"  # share of loss tokens whose ratio over their sequence's left its range
