"""Knobs that cannot act under the chosen schedule: warnings, never errors (the run may still launch).

    from workers.schedule_checks import warnings
    warnings(resolve({"method": "gspo"}))   # ["objective.clip_low, objective.clip_high: cannot act ..."]

A knob says when it can act with a marker on its field, beside its description:
`Field(..., json_schema_extra={"acts_when": "off-policy"})`; a component whose whole mechanism
needs a condition says so in its declaration (`Component(..., acts_when="off-policy")`). The
marker names one of the CONDITIONS below; each is a test of the whole config (and the knob's
value) that returns why the knob cannot act, or None. A knob is checked when its section is in
the config, i.e. for a pipeline stage when its component is chosen, whatever its value; knobs of
one section that fail the same condition share one warning. No method is named here: a new knob
or component gets its warning by its marker.
Torch-free, like RunConfig: the launch form and `python -m workers methods` call it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel


def reuses_samples(cfg) -> list[str]:
    """The chosen components that train on samples an older policy drew (Declaration.reuses_samples)."""
    from workers.pipeline import STAGES

    return [
        f"{stage} '{getattr(cfg, stage).name}'"
        for stage, registry in STAGES.items()
        if registry.declaration(getattr(cfg, stage).name).reuses_samples
    ]


def on_policy(cfg, value: Any) -> str | None:
    """Every importance ratio is 1 when each batch is used once, in one optimizer step, and is all fresh (sampled
    by the policy it trains: an asynchronous trainer with max_staleness > 0 trains on older policies' samples)."""
    s = cfg.schedule
    if s.updates_per_batch * s.minibatches > 1 or reuses_samples(cfg) or s.max_staleness:
        return None
    return (
        "cannot act: one pass of one minibatch per batch (schedule.updates_per_batch = 1, schedule.minibatches = 1) "
        "on fresh samples makes every importance ratio 1, so nothing ratio-based can act; raise either to 2"
    )


def past_the_run(cfg, value: Any) -> str | None:
    """A count of optimizer steps beyond the run's planned optimizer steps never completes."""
    s = cfg.schedule
    planned = s.steps * s.updates_per_batch * s.minibatches
    if value <= planned:
        return None
    return f"never completes: {value} is more than the run's {planned} optimizer steps (steps x passes x minibatches)"


def kl_off(cfg, value: Any) -> str | None:
    """A KL term with weight 0 is never computed: nothing that acts through it can act."""
    if cfg.objective.kl_coef > 0:
        return None
    return "cannot act: objective.kl_coef = 0, so the loss has no KL term; give it a weight > 0 (e.g. 0.001)"


def fresh_rows_only(cfg, value: Any) -> str | None:
    """Only a row an older policy sampled is weighted pi_prox / pi_behaviour: without replay, continued rows or an
    asynchronous trainer, every row trains in the step that sampled it."""
    if reuses_samples(cfg) or cfg.schedule.max_staleness:
        return None
    return (
        "cannot act: every row trains in the step that sampled it (no replay, no continued rows, "
        "schedule.max_staleness unset), so no row is stale"
    )


# marker -> the test: (cfg, the knob's value) -> why the knob cannot act here, or None
CONDITIONS: dict[str, Callable[[Any, Any], str | None]] = {
    "off-policy": on_policy,
    "within-updates": past_the_run,
    "kl-on": kl_off,
    "stale-rows": fresh_rows_only,
}

# Conditions on a knob whose default is harmless: checked only when the knob is moved off its default,
# so that every run at kl_coef 0 is not told about its default estimator. (Not "when the config sets
# it": the launch form and a stored config spell out every knob.)
CHECKED_OFF_DEFAULT = {"kl-on", "stale-rows"}


def component_warnings(cfg) -> list[str]:
    """The chosen components whose declared mechanism (Declaration.acts_when) cannot act under this config."""
    from workers.pipeline import STAGES

    found = []
    for stage, registry in STAGES.items():
        name = getattr(cfg, stage).name
        marker = registry.declaration(name).acts_when
        why = CONDITIONS[marker](cfg, name) if marker else None
        if why is not None:
            found.append(f"{stage} '{name}': {why}")
    return found


def warnings(cfg) -> list[str]:
    """One line per chosen component that cannot act, then per section and condition: the knobs that
    cannot act (fully), and why."""
    found: list[str] = component_warnings(cfg)
    for section_name in type(cfg).model_fields:
        section = getattr(cfg, section_name)
        if not isinstance(section, BaseModel):
            continue
        why_by_knobs: dict[str, list[str]] = {}
        for knob, field in type(section).model_fields.items():
            extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
            marker = extra.get("acts_when")
            value = getattr(section, knob)
            if marker is None or (marker in CHECKED_OFF_DEFAULT and value == field.default):
                continue
            why = CONDITIONS[marker](cfg, value)
            if why is not None:
                why_by_knobs.setdefault(why, []).append(f"{section_name}.{knob}")
        found += [f"{', '.join(knobs)}: {why}" for why, knobs in why_by_knobs.items()]
    return found
