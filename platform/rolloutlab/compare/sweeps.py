"""Sweeps: methods x seeds (x a grid over up to two knobs) on one base config, launched as one experiment.

The form shows a method's preset; what the user changed from it is applied to
every method of the sweep, on top of that method's own preset, so each method
keeps the knobs its paper sets.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import yaml
from django.db import transaction

from rolloutlab.execution.forms import LaunchFields, parse_form
from rolloutlab.execution.limits import check_active_runs
from rolloutlab.execution.services import launch_run, validate_config
from rolloutlab.inputs import UserInputError
from rolloutlab.runs.access import project_for_launch
from rolloutlab.runs.models import Experiment
from workers.config import METHODS, RunConfig, apply_override, resolve
from workers.errors import ConfigError

MAX_RUNS = 200


class SweepError(Exception):
    def __init__(self, fields: dict[str, str], values: dict | None = None):
        super().__init__("; ".join(f"{k}: {v}" for k, v in fields.items()))
        self.fields, self.values = fields, values


@dataclass
class Plan:
    name: str
    project: str
    tags: list[str]
    configs: list[tuple[str, dict]]  # (run name, raw config)


def changed_knobs(cfg: RunConfig, preset: RunConfig) -> dict[str, object]:
    """{dotted knob: value} wherever cfg differs from the preset it was shown with."""
    mine, base = cfg.model_dump(mode="json"), preset.model_dump(mode="json")
    changed = {}
    for section, knobs in mine.items():
        if isinstance(knobs, dict):
            for knob, value in knobs.items():
                if base[section].get(knob) != value:
                    changed[f"{section}.{knob}"] = value
        elif section not in ("method", "seed") and base.get(section) != knobs:
            changed[section] = knobs
    return changed


def grid_axis(post, n: int, errors: dict) -> tuple[str, list] | None:
    knob, text = post.get(f"grid{n}_knob", "").strip(), post.get(f"grid{n}_values", "").strip()
    if not knob and not text:
        return None
    if not knob or not text:
        errors[f"grid{n}_knob"] = "give both a knob (e.g. objective.clip_high) and its values (e.g. 0.2, 0.28)"
        return None
    try:
        return knob, [yaml.safe_load(v.strip()) for v in text.split(",") if v.strip()]
    except yaml.YAMLError:
        errors[f"grid{n}_values"] = "comma-separated values"
        return None


def parse_sweep(post) -> Plan:
    raw, errors = parse_form(post)
    methods = post.getlist("methods")
    if not methods:
        errors["methods"] = "pick at least one method"
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        errors["methods"] = f"unknown method(s): {', '.join(unknown)}"
    try:
        seeds = sorted({int(s) for s in post.get("seeds", "0").split(",") if s.strip()})
        if not seeds or min(seeds) < 0:
            raise ValueError
    except ValueError:
        errors["seeds"] = "comma-separated seeds, whole numbers from 0"
        seeds = []
    axes = [a for a in (grid_axis(post, 1, errors), grid_axis(post, 2, errors)) if a]
    try:
        about = LaunchFields.from_post(post)
    except UserInputError as exc:
        errors.update(exc.fields)
    if errors:
        raise SweepError(errors, raw)
    try:
        base = resolve(raw)
    except ConfigError as exc:
        raise SweepError(exc.fields, raw) from None
    overrides = changed_knobs(base, resolve({"method": raw.get("method")}))
    cells = list(itertools.product(methods, seeds, *[[(k, v) for v in values] for k, values in axes]))
    if len(cells) > MAX_RUNS:
        raise SweepError({"seeds": f"{len(cells)} runs; a sweep launches at most {MAX_RUNS}"}, raw)
    configs = []
    for method, seed, *grid in cells:
        config = {"method": method, "seed": seed}
        try:
            for assignment in [*(f"{k}={yaml.safe_dump(v).strip()}" for k, v in overrides.items()),
                               *(f"{k}={yaml.safe_dump(v).strip()}" for k, v in grid)]:  # fmt: skip
                apply_override(config, assignment)  # a grid knob below a plain value (seed.x) is refused here
            validate_config(config)  # the deployment's limits too, before anything is launched
        except ConfigError as exc:
            label = ", ".join(f"{k}={v}" for k, v in grid) or method
            raise SweepError({k: f"{label}: {v}" for k, v in exc.fields.items()}, raw) from None
        name = " ".join([method, f"s{seed}", *(f"{k.split('.')[-1]}={v}" for k, v in grid)])
        configs.append((name, config))
    return Plan(
        name=about.name or f"sweep of {', '.join(methods)}"[:200],
        project=about.project,
        tags=about.tags,
        configs=configs,
    )


def launch_sweep(user, plan: Plan) -> Experiment:
    check_active_runs(user, adding=len(plan.configs))
    with transaction.atomic():
        project = project_for_launch(user, plan.project)
        experiment = Experiment.objects.create(project=project, name=plan.name, owner=user)
        for name, config in plan.configs:
            launch_run(user, config, project=project, name=name, tags=plan.tags, experiment=experiment)
    return experiment
