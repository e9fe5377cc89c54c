"""Filter stage: which groups go on to training, and which samples of them carry gradient.

Every filter component picks groups (`keep`); the stage then applies the
sample-level filters that any method may switch on (filter.overlong), so a
knob like DAPO's overlong filtering works with every group filter alike.

Each component is one folder here, found by the registry (no list to edit): its __init__.py, torch-free,
declares it (summary, paper, knobs); its component.py holds the code, imported when a worker builds
the stage. base.py holds `GroupFilter`, the part every filter shares; shared.py (torch-free) the
knob every filter has.
"""

from workers.registry import Registry

FILTERS: Registry[type] = Registry("filter component").discover(__name__)

__all__ = ["FILTERS"]
