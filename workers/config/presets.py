"""The method presets: a method is a partial RunConfig, only the knobs its paper changes.

Everything else stays at the schema's defaults, so two methods differ exactly where their papers say they do.
Each preset also carries the words of its row in docs/methods/README.md's table, which `methods_table()`
writes in place (`python -m workers methods --write-table docs/methods/README.md`;
tests/offline/engine/test_method_docs.py checks that the README holds it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

from workers.doc_tables import real_model_verdict


class Preset(NamedTuple):
    summary: str  # one sentence naming the paper: the launch form's and `methods`' description
    overrides: dict[str, Any]  # the partial RunConfig laid over the defaults
    changes: str  # the methods table's "changes" column: what the preset sets, in a few words


METHODS: dict[str, Preset] = {
    "grpo": Preset(
        "Group mean/std-normalised advantage, PPO token clip, per-sequence length normalisation (DeepSeekMath).",
        {},
        "the reference",
    ),
    "dr-grpo": Preset(
        "GRPO without the std scaling and without per-sequence length normalisation, each batch in 8 minibatch "
        "updates (Understanding R1-Zero).",
        # Liu et al. 2025, sec. 3.2; the schedule is the authors' released recipe (128 prompts x 8 samples per
        # rollout batch, optimizer batches of 128, one epoch: 8 updates per batch, beta = 0). Both corrections act
        # on-policy too; the schedule is theirs so that the card compares like with like.
        {"advantage": {"scale": "none"}, "objective": {"aggregation": "constant"}, "schedule": {"minibatches": 8}},
        "advantage scale, loss aggregation",
    ),
    "dapo": Preset(
        "Clip-higher, dynamic sampling of non-degenerate groups, token-level loss, soft overlong penalty, each "
        "batch in 16 minibatch updates (DAPO).",
        # Yu et al. 2025, sec. 4.1 (training details): 512 prompts x 16 samples per rollout step, mini-batches of
        # 512, "16 gradient updates for each rollout step". The clip (eq. 10) acts only on updates after the
        # first of a batch, so without the schedule clip-higher cannot act.
        {
            "objective": {"clip_low": 0.2, "clip_high": 0.28, "aggregation": "token-mean"},
            "schedule": {"minibatches": 16},
            "filter": {"name": "dynamic-sampling", "signal": "correct"},
            "reward": {"weights": {"correct": 1.0, "overlong": 1.0}},
        },
        "clip-higher, dynamic sampling, token-level loss, overlong penalty",
    ),
    "rloo": Preset(
        "Leave-one-out baseline: each sample is compared with the mean of the others (Back to Basics, RLOO).",
        {"advantage": {"name": "leave-one-out", "scale": "none"}, "objective": {"aggregation": "sequence-sum"}},
        "leave-one-out baseline, sequence-summed loss",
    ),
    "mc-grpo": Preset(
        "G+1 samples, median baseline scaled by the MAD; the median (pivot) sample is left out of the loss (MC-GRPO).",
        {
            "generate": {"name": "pivot"},
            "advantage": {"name": "group-median", "scale": "mad", "eps": 1e-3, "rescale_nonzero": True},
        },
        "G+1 samples, median baseline and MAD scale, pivot left out",
    ),
    "mopps": Preset(
        "GRPO on the prompts whose Thompson-sampled pass rate is nearest 0.5, from 8x as many candidates (MoPPS).",
        {"control": {"name": "mopps"}},
        "prompt selection: Beta posterior per prompt, Thompson sampling towards pass rate 0.5",
    ),
    "april": Preset(
        "GRPO whose rollouts are over-provisioned 2x; the step stops once its groups are finished and the unfinished "
        "completions continue in later steps (APRIL).",
        {"generate": {"name": "april"}},
        "partial rollouts: 2x groups in flight, stop when B are finished, continue the rest later",
    ),
    "gdro": Preset(
        "GRPO whose prompts are drawn by adversary weights over online pass-rate classes, and whose rollouts move "
        "to the hard classes at a fixed mean group size (Prompt- and Rollout-GDRO).",
        {"control": {"name": "gdro"}},
        "adversary weights over pass-rate classes pick prompts and move rollouts to hard classes at a fixed mean",
    ),
    "d3s": Preset(
        "GRPO trained on each group's max-advantage-variance rollouts and their highest |A| x entropy tokens, "
        "a share that relaxes to everything over 200 steps (D3S).",
        {"advantage": {"name": "d3s"}},
        "only each group's max-variance rollouts and their top \\|A\\|·entropy tokens train; relaxes to all",
    ),
    "rorecomp": Preset(
        "GRPO that trains each group's short-correct and long-incorrect completions first and replays the rest "
        "every second step (RoRecomp).",
        {"replay": {"name": "rorecomp"}},
        "short-correct and long-incorrect completions train first; the rest replayed every second step",
    ),
    "dots": Preset(
        "GRPO on the prompts of moderate adaptive difficulty, estimated by attention over last step's measured "
        "prompts, with 48 fresh and 16 replayed recent groups a step (DOTS + rollout replay).",
        {
            "control": {"name": "dots"},
            "replay": {"name": "rollout-replay", "groups": 16},
            "rollout": {"prompts_per_step": 48},
        },
        "prompts of moderate difficulty estimated by attention over measured ones; 48 fresh + 16 replayed groups",
    ),
    "duet": Preset(
        "GRPO whose rollouts per prompt follow a posterior surrogate of its reward spread at a fixed total, and "
        "whose rollouts still running at 75% of the length limit are aborted, survivors reweighted (DUET).",
        {"control": {"name": "duet"}},
        "rollouts per prompt from a posterior surrogate at a fixed total; marker-gated abort, survivors reweighted",
    ),
    "arrol": Preset(
        "GRPO that starts 2x the rollouts, and after 2 tokens prunes each group to G correctness-balanced "
        "ones by a success head trained online on the policy's hidden states (arrol).",
        {"generate": {"name": "arrol"}},
        "2x rollouts started; after 2 tokens a success head trained online prunes each group to G balanced",
    ),
    "latr": Preset(
        "GRPO whose groups grow as trees: branch where another token is likely, look 2 tokens ahead, prune "
        "branches that stay alike (LATR).",
        {"generate": {"name": "latr"}},
        "groups grown as trees: branch at uncertain tokens, look ahead, prune look-alikes",
    ),
    "vade": Preset(
        "GRPO on the prompts with the largest Thompson-sampled reward variance, from a Beta posterior decayed per step "
        "and per visit (VADE).",
        {"control": {"name": "vade"}},
        "prompt selection: Thompson-sampled reward variance from a two-scale decayed Beta posterior",
    ),
    "siri": Preset(
        "GRPO with DAPO's clip-higher whose rollout length limit oscillates on a cosine, compress then expand (SIRI).",
        {"control": {"name": "siri"}, "objective": {"clip_low": 0.2, "clip_high": 0.28}},
        "rollout length limit on a cosine: compress, then expand; DAPO's clip-higher",
    ),
    "dars": Preset(
        "GRPO without the std division whose low-accuracy prompts get one stage of extra rollouts, up to the "
        "cumulative advantage of a prompt at accuracy 0.5; merged groups all right or all wrong are dropped "
        "(DARS, equal-treatment schedule).",
        # Yang et al. 2025 and the authors' code (yangzhch6/DARS, ray_dars_trainer.py): one second stage of
        # rollouts, the merged groups whose accuracy is 0 or 1 dropped (dynamic sampling, one round), and every
        # experiment with grpo_use_std=False, which sets both the advantage and the schedule's mass.
        {
            "control": {"name": "dars", "mass": "without-std", "stages": 2},
            "filter": {"name": "dynamic-sampling", "max_rounds": 1},
            "advantage": {"scale": "none"},
        },
        "one stage of extra rollouts for low-accuracy prompts, up to the cumulative advantage of accuracy 0.5 (no "
        "std, as the authors ran it); merged groups all right or all wrong dropped",
    ),
    "xrpo": Preset(
        "Rounds of extra rollouts to the prompts whose mean reward is most uncertain, and GRPO's advantage "
        "amplified for correct but unlikely completions (XRPO, without in-context seeding).",
        {"control": {"name": "xrpo"}, "advantage": {"name": "xrpo"}},
        "extra rollouts in rounds to the most uncertain prompts; advantage raised for correct, unlikely completions",
    ),
    "gspo": Preset(
        "Sequence-level importance ratio, clipped per sequence with a narrow range, each batch in 4 minibatch "
        "updates (GSPO).",
        # Zheng et al. 2025, sec. 5.1: "we partition each batch of rollout data into four minibatches for gradient
        # updates". On-policy every sequence ratio is 1 and GSPO's gradient is GRPO's
        # (tests/offline/engine/test_objective.py).
        {"objective": {"name": "sequence-clip", "clip_low": 3e-4, "clip_high": 4e-4}, "schedule": {"minibatches": 4}},
        "sequence-level ratio and clipping",
    ),
    "tis": Preset(
        "GRPO whose token losses are weighted by pi_old / pi_sampler, the trainer's recomputed log-probabilities "
        "against the sampler's, truncated at 2 (truncated importance sampling, TIS).",
        # Yao et al. 2025, "Your Efficient RL Framework Secretly Brings You Off-Policy RL Training", the TIS
        # correction with C = 2. The weight compares the trainer with the sampler of the same policy, so it acts
        # on every update whatever the schedule. objective.old_logprobs stays auto: it recomputes pi_old wherever
        # the sampler's numerics differ (another dtype or engine), the mismatch TIS corrects.
        {"objective": {"name": "truncated-is", "is_bound": 2.0}},
        "each token's loss weighted by π_old / π_sampler (trainer vs sampler numerics), truncated or masked at 2",
    ),
    "minpro": Preset(
        "GRPO whose token ratio is replaced by the smallest ratio of the token's prefix, with each batch split "
        "into 4 minibatch updates so that 3 of them are off-policy (MinPRO).",
        # Lei et al. 2026, "A Step Back: Prefix Importance Ratio Stabilizes Policy Optimization": MinPRO is for
        # off-policy updates, where rollouts from an older policy update a newer one (abstract); on-policy every
        # ratio is 1 and MinPRO is GRPO. Several minibatch updates per batch make it act; 4 is the card's choice.
        {"objective": {"name": "min-prefix-ratio"}, "schedule": {"minibatches": 4}},
        "the token clip on ρ_t times the smallest ratio of the tokens before it; 4 minibatch updates per batch",
    ),
    "vcpo": Preset(
        "Two passes over each batch; the second's step is scaled by the ESS of the sequence importance weights "
        "and its advantages get a minimum-variance off-policy baseline (VCPO).",
        # Huang et al. 2026, "Stable Asynchrony: Variance-Controlled Off-Policy RL for LLMs": (i) the learning rate
        # scaled by the ESS, (ii) a closed-form minimum-variance baseline (abstract). The paper's off-policyness is
        # a policy lag; this synchronous trainer gets it by a second pass over the batch, with one minibatch so
        # that each group's baseline sees all of its samples.
        {"objective": {"name": "variance-controlled"}, "schedule": {"updates_per_batch": 2, "minibatches": 1}},
        "learning rate × ESS of the sequence weights; min-variance off-policy baseline; 2 passes per batch",
    ),
    "ppo-ewma": Preset(
        "GRPO's clip against a proximal policy that is an average of the policy's recent weights, each token "
        "weighted by the proximal over the sampling policy's probability, the Missing-Old-Logits repair for "
        "asynchronous and replayed rollouts (PPO-EWMA).",
        # Guan et al. 2026, "Missing Old Logits in Asynchronous Agentic RL" (abstract: "we adopt a revised
        # PPO-EWMA method"), on Hilton et al. 2021's PPO-EWMA. It acts whenever the average lags the policy; the
        # regime it is for is the asynchronous trainer's (schedule.max_staleness), which the card's sweep sets.
        {"objective": {"name": "ewma-proximal"}},
        "the Missing-Old-Logits repair: the clip against an average of the recent weights, every token weighted by"
        " π_prox / π_behaviour",
    ),
    "fiberpo": Preset(
        "GRPO's token clip gated at two levels, on each completion's length-normalised ratio (GSPO's narrow range) "
        "and on each token's ratio over it (PPO's range), with each batch in 4 minibatch updates (FiberPO).",
        # "Fibration Policy Optimization" (abstract): ratio gating decomposed into a base-level gate on trajectory
        # aggregates and a fiber-level gate on per-token residuals, reducing to the plain objective on-policy. The
        # gates act only off-policy; the abstract fixes no schedule, so 4 minibatch updates is the card's choice.
        {"objective": {"name": "fiber-gate"}, "schedule": {"minibatches": 4}},
        "the token clip gated on each completion's length-normalised ratio and on each token's ratio over it; 4 "
        "minibatch updates per batch",
    ),
    "gdpo": Preset(
        "Correctness, format and length rewards each normalised within the group on its own, then weighted, "
        "summed and normalised over the batch, so distinct reward combinations keep distinct advantages (GDPO).",
        {"advantage": {"name": "gdpo"}, "reward": {"weights": {"correct": 1.0, "format": 0.5, "length": 0.25}}},
        "each reward function normalised within its group on its own, then weighted, summed and batch-normalised",
    ),
    "fapo": Preset(
        "GRPO whose correct completions reached by a malformed derivation earn half the reward, so they help "
        "while most of a group is wrong and are penalised once most is right (FAPO).",
        # Flawed-Aware Policy Optimization: a parameter-free penalty for flawed-positive rollouts (abstract);
        # lambda = 1/2 turns a flawed positive's group advantage negative exactly when the fully correct
        # completions outnumber the wrong ones (workers/tasks/rewards.py: FlawedPositive). The paper's detector
        # is a generative reward model; here it is the rule-based malformed-derivation detector.
        {"reward": {"weights": {"correct": 1.0, "flawed-positive": 0.5}, "flaw_detector": "malformed-derivation"}},
        "correct answers reached by a malformed derivation earn half: a shortcut while most of a group is wrong, "
        "penalised once most is right",
    ),
    "grpo-lambda": Preset(
        "GRPO with a length penalty that counts only in groups at least half correct; groups below are scored "
        "by correctness alone (GRPO-lambda).",
        # "Stable Reinforcement Learning for Efficient Reasoning" (abstract): a low correctness ratio in the group
        # switches to the length-agnostic 0/1 reward, a high one keeps the length penalty. The threshold 0.5 and
        # the penalty's weight 0.5 are the card's choices; the abstract fixes neither.
        {
            "advantage": {"name": "grpo-lambda", "accuracy_threshold": 0.5, "penalty": "length"},
            "reward": {"weights": {"correct": 1.0, "length": 0.5}},
        },
        "length penalty only in groups whose pass rate reaches 0.5; correctness alone below",
    ),
    "drpo": Preset(
        "GRPO's correctness advantage; correct completions share theirs by exp(length reward / 0.2) among the "
        "correct ones only, so a long correct completion is never pushed down (DRPO).",
        # "DRPO: Efficient Reasoning via Decoupled Reward Policy Optimization" (abstract): the length signal of
        # correct rollouts is normalised within the positive group, weighted by the closed-form KL-regularised
        # optimal positive distribution (importance weights). lambda = 0.2 and the advantage of a group with no
        # wrong completion (1.0) are the card's choices.
        {
            "advantage": {"name": "drpo", "kl_lambda": 0.2, "preference": "length", "solved_advantage": 1.0},
            "reward": {"weights": {"correct": 1.0, "length": 1.0}},
        },
        "correct rollouts share GRPO's advantage by exp(length reward / λ) among themselves; never negative for length",
    ),
    "outcome-explore": Preset(
        "GRPO on rewards plus a UCB bonus for answers the prompt has rarely produced over training and a penalty "
        "for answers repeated within the group, so exploration is counted over final answers (outcome-based "
        "exploration).",
        # "Outcome-based Exploration for LLM Reasoning" (2025), abstract: historical exploration "encourages rarely
        # observed answers via UCB-style bonuses", batch exploration "penalizes within-batch repetition". The
        # abstract gives no coefficients; 0.25 each is this project's choice (docs/methods/outcome-explore.md).
        # No std division: measured, with it the bonuses become full-size advantages in all-wrong groups and
        # the policy learns to invent new wrong answers (pass@1 0.09 against 0.52 without, 3 seeds).
        {"advantage": {"name": "outcome-explore", "history_bonus": 0.25, "batch_penalty": 0.25, "scale": "none"}},
        "reward + c/√(times the prompt gave this answer) − penalty for answers repeated in the group, then grpo",
    ),
    "ace": Preset(
        "GRPO whose negative advantages are scaled by 1 + softplus(c), c a completion's log-likelihood gain over "
        "the initial policy, so errors the policy has grown confident in are pushed down harder (ACE).",
        # Xu et al. 2026, "Overconfident Errors Need Stronger Correction" (abstract): the per-rollout confidence
        # shift c_i = log(pi_theta(y_i|x) / pi_ref(y_i|x)) modulates negative advantages. The abstract fixes no
        # form nor strength: 1 + alpha softplus(c) with alpha = 1 (the knob's default) is the card's choice
        # (docs/methods/ace.md). The component needs the reference's log-probabilities, so the trainer keeps a
        # frozen copy of the initial policy although objective.kl_coef stays 0.
        {"advantage": {"name": "ace"}},
        "negative advantages × (1 + α softplus(c)), c = log π/π_ref of the completion: confident errors pushed "
        "down harder",
    ),
    "gigpo": Preset(
        "GRPO over multi-turn episodes whose tokens get the episode's group-relative advantage plus their turn's, "
        "relative to the turns taken from the same environment state (GiGPO).",
        # Feng et al. 2025, sec. 3: omega = 1 and gamma = 0.95 (the knobs' defaults), std normalisation at both
        # levels. The paper trains agents in ALFWorld and WebShop; the calculator is the environment this preset
        # starts from (any environment's state keys give the anchor states).
        {"advantage": {"name": "gigpo"}, "environment": {"name": "calculator"}},
        "per-token A_episode + ω·A_step, step groups by anchor state (needs an environment)",
    ),
    "treeps": Preset(
        "Multi-turn episodes grown as trees branched at turn boundaries, each turn trained once with its Monte "
        "Carlo value (the mean outcome of the leaves below it) minus its parent's (TreePS-RAG).",
        # Zhang et al. 2026 (abstract): MC step values over descendant outcomes, trees built online at a budget
        # comparable to independent rollouts. The tree (M = 2 roots branched after turn 1 into G leaves), the form
        # A = V(n) - V(parent) over the group's std, each shared turn trained once, and the token-mean loss that
        # gives every token of the tree one weight are this project's choices (docs/methods/treeps.md).
        {
            "generate": {"name": "treeps"},
            "advantage": {"name": "treeps"},
            "objective": {"aggregation": "token-mean"},
            "environment": {"name": "calculator"},
        },
        "rollout trees of G leaves, per-turn A = V(n) − V(parent), token-level loss (needs an environment)",
    ),
    "trace": Preset(
        "Multi-turn rollouts whose budget goes to the prompts and turn prefixes a learned predictor finds most "
        "likely to give mixed outcomes, continued as trees, GRPO over each prompt's rollouts (TRACE).",
        # Zou et al. 2026 (abstract): budget to prompt roots and intermediate prefixes likely to yield mixed
        # terminal rewards, a shared predictor of success from prefix histories. The greedy rule on the gain in
        # P(mixed), the online logistic predictor and its features, and 2 roots per prompt are this project's
        # choices (docs/methods/trace.md); the advantage stays grpo's over each prompt's (now ragged) group.
        {"generate": {"name": "trace"}, "environment": {"name": "calculator"}},
        "prompts × G rollouts allocated to prompts and turn prefixes by predicted p(1−p) (needs an environment)",
    ),
    "gated-rewards": Preset(
        "GRPO over multi-turn episodes on a return whose immediate rewards (well-formed turns, earlier turns' "
        "reward parts) count only when the episode's outcome meets a threshold (Gated Reward Accumulation, G-RA).",
        # Sun et al. 2025 (abstract and summaries): R = r_high + 1[r_high >= delta] * sum r_low. The immediate
        # rewards and their values are this project's (docs/methods/gated-rewards.md): 0.1 per well-formed turn
        # before the last, the earlier turns' reward parts at weight 1, delta = 1 (a solved calculator episode).
        {"advantage": {"name": "gated-rewards"}, "environment": {"name": "calculator"}},
        "immediate rewards added to the outcome only when it meets δ, then grpo (needs an environment)",
    ),
    "spa-rl": Preset(
        "Multi-turn episodes whose turns are rewarded by a progress estimator's contribution (trained online so "
        "that an episode's contributions sum to its reward) plus a grounding signal, advantages group-relative "
        "per turn (SPA-RL).",
        # Wang et al. 2025 (abstract) and the authors' released code: loss (sum_k c_k - R)^2, reward alpha * c +
        # beta * g with alpha = 1, beta = 0.5 (their values). A linear estimator on the batch's turn features,
        # trained online, and GRPO's process-supervision advantage in place of their PPO critic are this
        # project's choices (docs/methods/spa-rl.md).
        {"advantage": {"name": "spa-rl"}, "environment": {"name": "calculator"}},
        "turn reward α·c + β·g from a progress estimator trained online, normalised over the group's turns "
        "(needs an environment)",
    ),
    "hgpo": Preset(
        "GRPO over multi-turn episodes whose turns get their return relative to nested groups of turns sharing "
        "their state and ever more of their history, the levels aggregated with weights that favour consistent "
        "history (Hierarchy-of-Groups PO).",
        # He et al. 2026 (abstract) and its released code (verl-agent recipe/hgpo): K = 2 levels of history beyond
        # the state, weights (n + 1)^alpha with alpha = 1, gamma = 0.95, no episode-level group (all the knobs'
        # defaults); std normalisation. The calculator is the environment this preset starts from, as gigpo's.
        {"advantage": {"name": "hgpo"}, "environment": {"name": "calculator"}},
        "per-token Σ_k w_k·A_k over levels k = 0..2 of shared history, w_k = (k+2)^α (needs an environment)",
    ),
    "salt": Preset(
        "GRPO over multi-turn episodes whose turns get the mean GRPO advantage of the episodes of their group that "
        "took the same step, an edge of the group's trajectory graph (SALT).",
        # Li et al. 2025 (abstract): a graph of the trajectories of one prompt, plug-and-play over GRPO. The form
        # (the mean over the episodes through an edge, an edge the same state, text and next state) is the card's
        # documented choice (docs/methods/salt.md); std normalisation as grpo's.
        {"advantage": {"name": "salt"}, "environment": {"name": "calculator"}},
        "per-token mean GRPO advantage of the episodes through the turn's edge (s, a, s') (needs an environment)",
    ),
}


def method_names() -> list[str]:
    return sorted(METHODS)


TABLE_HEADER = "| method | card | changes | real model |\n| --- | --- | --- | --- |\n"


def methods_table(cards: Path) -> str:
    """docs/methods/README.md's table of presets, one row each, in the order they are declared here; the last column
    is what each card in `cards` says its real-model sweep showed (workers.doc_tables.real_model_verdict)."""
    rows = (
        f"| `{name}` | [{name}.md]({name}.md) | {preset.changes} | {real_model_verdict(cards / f'{name}.md')} |\n"
        for name, preset in METHODS.items()
    )
    return TABLE_HEADER + "".join(rows)
