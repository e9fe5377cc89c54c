"""Control stage: which prompts a step trains on and where its rollout budget goes.

A control component answers five calls, each with a default in `Controller`:

    plan(ctx)                          -> Budget   how many prompts, how many candidates to draw for them
    select(ctx, candidates, count)     -> list     which `count` of the drawn candidates to roll out
    allocate(ctx, examples, budget)    -> Budget   per-prompt group sizes and length limits
    extend(ctx, batch, stage)          -> list     after scoring: more rollouts per group (multi-stage rollout)
    observe(batch)                                 every scored group of the step, kept or not

`extend` is asked only while a round has fewer than `max_stages` rollout stages (1 by
default: never), so a component that does not extend costs nothing and draws nothing.

Components read what the run knows of each prompt from `ctx.history` (PromptHistory).

Each component is one folder here, found by the registry (no list to edit): its __init__.py, torch-free,
declares it (summary, paper, knobs, cross-field check); its component.py holds the code, imported when
a worker builds the stage. base.py holds `Controller`, the defaults every component subclasses;
budgeting.py the fixed-mean allocation two of them share; shared.py (torch-free) their shared check.
"""

from workers.registry import Registry

CONTROLLERS: Registry[type] = Registry("control component").discover(__name__)

__all__ = ["CONTROLLERS"]
