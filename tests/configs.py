"""Run configs for the engine's tests, importable without the platform (the GPU machine runs engine tests
with no Django installed)."""

from __future__ import annotations


def small_config(**sections):
    """A RunConfig small enough to train a few steps in a second or two on one CPU core.

    Keyword arguments are sections laid over the defaults, e.g. rollout={"group_size": 4}; a section that
    chooses another kind (model={"name": "/models/m"}, task={"name": "jsonl", ...}) replaces the default's.
    """
    from workers.config import lay_over, resolve

    raw = {
        "method": "grpo",
        "model": {"hidden_size": 32, "layers": 2, "heads": 2, "warmup_steps": 150, "warmup_lr": 3e-3},
        "task": {"name": "arith", "digits": 1, "operands": 2, "operators": "+-"},
        "rollout": {"group_size": 4, "prompts_per_step": 4, "max_new_tokens": 4},
        "schedule": {"steps": 3, "minibatches": 1, "samples_per_step": 4, "save_final": False},
        "eval": {"every": 0, "size": 16, "k": 2},
        "optimizer": {"lr": 1e-3},
        "resources": {"device": "cpu", "threads": 2},
    }
    return resolve(lay_over(raw, sections))
