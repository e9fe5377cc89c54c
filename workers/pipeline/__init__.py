"""The stages of one RL step, each a registry of named components.

    generate -> (reward) -> filter -> control -> advantage -> objective -> replay

A config names one component per stage (`generate.name`, `filter.name`, ...);
the trainer builds them with `build_stages(cfg)` (workers/pipeline/stages.py) and
calls every stage the same way whatever the method, so a method is nothing but a
choice of components and knobs. The protocols each stage implements live in
workers/pipeline/stages.py.

Each component is one folder of its stage, `<stage>/<name>/`: a torch-free `__init__.py`
that declares it (its docstring's first line is the summary, the rest cites the paper; its
knob model, cross-field check, and `COMPONENT = Component(name, "component:Class", ...)`)
beside `component.py`, its torch code. Each stage's registry finds the folders itself
(Registry.discover), so adding a method edits no list. This package and the declarations
import no torch, so RunConfig (which the web side validates) reads them freely; a
component's code is imported only by `registry.get(name)`, when a worker builds it.
"""

from __future__ import annotations

from workers.pipeline.advantage import ADVANTAGES
from workers.pipeline.control import CONTROLLERS
from workers.pipeline.filter import FILTERS
from workers.pipeline.generate import GENERATORS
from workers.pipeline.objective import OBJECTIVES
from workers.pipeline.replay import REPLAYS

# config section -> the registry its `name` is looked up in
STAGES = {
    "generate": GENERATORS,
    "filter": FILTERS,
    "control": CONTROLLERS,
    "replay": REPLAYS,
    "advantage": ADVANTAGES,
    "objective": OBJECTIVES,
}
