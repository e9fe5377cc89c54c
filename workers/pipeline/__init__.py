"""The stages of one RL step, each a registry of named components.

    generate -> (reward) -> filter -> control -> advantage -> objective -> replay

A config names one component per stage (`generate.name`, `filter.name`, ...);
the trainer builds them with `build_stages(cfg)` and calls every stage the same
way whatever the method, so a method is nothing but a choice of components and
knobs. The protocols each stage implements live in workers/pipeline/stages.py.
"""

from __future__ import annotations

from workers.pipeline.advantage import ADVANTAGES
from workers.pipeline.control import CONTROLLERS
from workers.pipeline.filter import FILTERS
from workers.pipeline.generate import GENERATORS
from workers.pipeline.objective import OBJECTIVES
from workers.pipeline.replay import REPLAYS
from workers.pipeline.stages import Stages

# config section -> the registry its `name` is looked up in
STAGES = {
    "generate": GENERATORS,
    "filter": FILTERS,
    "control": CONTROLLERS,
    "replay": REPLAYS,
    "advantage": ADVANTAGES,
    "objective": OBJECTIVES,
}


def build_stages(cfg) -> Stages:
    built = {stage: registry.get(getattr(cfg, stage).name)(cfg) for stage, registry in STAGES.items()}
    return Stages(**built)
