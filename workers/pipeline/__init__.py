"""The stages of one RL step, each a registry of named components.

    generate -> (reward) -> filter -> control -> advantage -> objective -> replay

A config names one component per stage (`generate.name`, `filter.name`, ...);
the trainer builds them with `build_stages(cfg)` (workers/pipeline/stages.py) and
calls every stage the same way whatever the method, so a method is nothing but a
choice of components and knobs. The protocols each stage implements live in
workers/pipeline/stages.py.

Each stage declares its components in `<stage>/knobs.py`: name, summary, knob model,
cross-field check and the dotted path of the code. This package and those modules
import no torch, so RunConfig (which the web side validates) reads them freely; a
component's code is imported only by `registry.get(name)`, when a worker builds it.
"""

from __future__ import annotations

from workers.pipeline.advantage.knobs import ADVANTAGES
from workers.pipeline.control.knobs import CONTROLLERS
from workers.pipeline.filter.knobs import FILTERS
from workers.pipeline.generate.knobs import GENERATORS
from workers.pipeline.objective.knobs import OBJECTIVES
from workers.pipeline.replay.knobs import REPLAYS

# config section -> the registry its `name` is looked up in
STAGES = {
    "generate": GENERATORS,
    "filter": FILTERS,
    "control": CONTROLLERS,
    "replay": REPLAYS,
    "advantage": ADVANTAGES,
    "objective": OBJECTIVES,
}
