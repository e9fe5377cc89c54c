"""How long a run of the built-in tiny model takes, roughly, before it is launched: the launch form says it.

    estimated_seconds(resolve({"method": "grpo"}))   # ~70: the defaults, about a minute

A cost model, not a measurement of this machine: seconds per rollout token of a training step and per sequence
of an evaluation, measured on 2 CPU cores (AMD EPYC) with the tiny model's default shape (hidden 128, 4 layers):
the defaults (64 prompts x 8, 200 steps, an evaluation of 200 problems x (1 greedy + 8 samples) every 20 steps)
took 70 s; 100 steps of 16 x 8 with an evaluation every 10 took 25 s. A wider or deeper tiny model scales by its
parameters; any other model gets no estimate (None): its cost depends on weights this module does not know.
Torch-free, like RunConfig.
"""

from __future__ import annotations

import math

ROLLOUT_TOKEN_S = 0.5e-3 / 8  # one rollout of 8 new tokens: generation and its share of the update
STEP_S = 0.01  # a step's fixed cost: the stages, the reporter, the optimizer
EVAL_SEQUENCE_S = 0.9e-3 / 8  # one held-out sequence of 8 new tokens, greedy or sampled
WARM_UP_STEP_S = 0.02  # one supervised warm-up step (once per model shape: the result is cached)
DEFAULT_SHAPE = 128 * 128 * 4  # hidden^2 x layers of the default tiny model: the calibration's


def estimated_seconds(cfg) -> float | None:
    """Rough wall seconds of the whole run on 2 CPU cores (training, evaluations and a first warm-up), or None."""
    if cfg.model.name != "tiny":
        return None
    size = max(1.0, cfg.model.hidden_size**2 * cfg.model.layers / DEFAULT_SHAPE)
    rollouts = cfg.rollout.prompts_per_step * cfg.rollout.group_size
    step = STEP_S + ROLLOUT_TOKEN_S * rollouts * cfg.rollout.max_new_tokens * size * cfg.schedule.updates_per_batch
    evaluations = 0 if not cfg.eval.every else math.ceil(cfg.schedule.steps / cfg.eval.every) + 1
    per_evaluation = cfg.eval.size * (1 + (cfg.eval.samples or cfg.eval.k)) * cfg.rollout.max_new_tokens
    return (
        cfg.schedule.steps * step
        + evaluations * per_evaluation * EVAL_SEQUENCE_S * size
        + cfg.model.warmup_steps * WARM_UP_STEP_S * size
    )


def described(cfg) -> str:
    """The launch form's line: "about 2 minutes ..." or why there is no estimate."""
    seconds = estimated_seconds(cfg)
    if seconds is None:
        return "no estimate for a pretrained model: its cost depends on its weights"
    if cfg.schedule.time_limit_s:
        seconds = min(seconds, cfg.schedule.time_limit_s + 60)
    if seconds < 90:
        shown = f"{max(10, round(seconds, -1)):.0f} seconds"
    else:
        minutes = round(seconds / 60)
        shown = f"{minutes} minutes" if minutes < 120 else f"{minutes / 60:.0f} hours"
    return f"about {shown} on 2 CPU cores (a rough estimate for the tiny model; the first run of a shape warms it up)"
