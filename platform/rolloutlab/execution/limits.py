"""The deployment's ceilings on what sizes a run, checked at launch beside the field they concern.

A config can be valid for the engine and still too big for this deployment (10⁹
prompts a step, a 2.6-billion-parameter tiny model on a CPU worker): RUN_LIMITS
in settings says how big, and the launch form shows each ceiling where it applies.
"""

from __future__ import annotations

from django.conf import settings

from rolloutlab.inputs import UserInputError
from rolloutlab.runs.models import FINAL_STATES, Run
from workers.config import RunConfig
from workers.models.shape import tiny_parameters

# each ceiling: the knob its error is shown beside, how to measure it on a config, and what it counts
CEILINGS = {
    "rollouts_per_step": ("rollout.prompts_per_step", lambda c: c.rollout.prompts_per_step * c.rollout.group_size,
                          "rollouts a step (prompts_per_step x group_size)"),
    "max_new_tokens": ("rollout.max_new_tokens", lambda c: c.rollout.max_new_tokens, "new tokens a completion"),
    "model_parameters": ("model.hidden_size", lambda c: tiny_size(c),
                         "parameters of the tiny model (hidden_size and layers)"),
    "eval_samples": ("eval.size", lambda c: c.eval.size * c.eval.n, "evaluation samples (eval.size x samples)"),
    "steps": ("schedule.steps", lambda c: c.schedule.steps, "steps"),
    "warmup_examples": ("model.warmup_steps", lambda c: tiny_warmup_examples(c),
                        "warm-start examples (warmup_steps x warmup_batch_size)"),
    "threads": ("resources.threads", lambda c: c.resources.threads, "CPU threads"),
    "rollout_actors": ("resources.rollout_actors", lambda c: ray_actors(c), "rollout actors a run on Ray"),
    "wall_time_s": ("resources.wall_time_s", lambda c: c.resources.wall_time_s or 0, "seconds of wall time a run"),
}  # fmt: skip


def wall_time_s(config: dict) -> int:
    """The seconds a run may take: its resources.wall_time_s, else (and at most) the deployment's ceiling."""
    ceiling = settings.RUN_LIMITS["wall_time_s"]
    asked = (config.get("resources") or {}).get("wall_time_s")
    return min(asked or ceiling, ceiling)


def time_limit_message(seconds: int) -> str:
    return (
        f"time limit: the run went over its wall time of {seconds:,} s (resources.wall_time_s, at most the "
        "deployment's LIMIT_WALL_TIME_S) and was stopped"
    )


def ray_actors(cfg: RunConfig) -> int:
    """The rollout actors a run places: none unless it runs on Ray."""
    return cfg.resources.rollout_actors if cfg.resources.executor == "ray" else 0


def tiny_size(cfg: RunConfig) -> int:
    """The tiny model's parameters; 0 for a model from a directory, whose size its own files fix."""
    return tiny_parameters(cfg.model.hidden_size, cfg.model.layers) if cfg.model.name == "tiny" else 0


def tiny_warmup_examples(cfg: RunConfig) -> int:
    """The tiny model's warm-start examples; 0 for a model from a directory, which is not warm-started."""
    return cfg.model.warmup_steps * cfg.model.warmup_batch_size if cfg.model.name == "tiny" else 0


def over_limits(cfg: RunConfig) -> dict[str, str]:
    """{knob: message} for each of the deployment's ceilings the config goes over."""
    errors = {}
    for name, (knob, measure, what) in CEILINGS.items():
        value, ceiling = measure(cfg), settings.RUN_LIMITS[name]
        if value > ceiling:
            errors.setdefault(knob, f"this deployment allows at most {ceiling:,} {what}; this config asks {value:,}")
    return errors


def form_ceilings() -> dict[str, str]:
    """{knob: "at most N ..."} for the launch form."""
    return {
        knob: f"deployment limit: {settings.RUN_LIMITS[name]:,} {what}" for name, (knob, _, what) in CEILINGS.items()
    }


def check_active_runs(user, adding: int = 1) -> None:
    """A user may have MAX_ACTIVE_RUNS_PER_USER runs queued or running; launching more is refused (429)."""
    cap = settings.MAX_ACTIVE_RUNS_PER_USER
    active = Run.objects.filter(owner=user).exclude(state__in=FINAL_STATES).count()
    if active + adding > cap:
        raise UserInputError(
            f"you have {active} runs queued or running and may have at most {cap}: wait for some to end or cancel them",
            {"runs": f"at most {cap} queued or running"}, status=429,
        )  # fmt: skip
