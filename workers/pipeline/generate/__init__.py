"""Generate stage: how the candidate completions of a step are produced.

Each component is one folder here, found by the registry (no list to edit): its __init__.py, torch-free,
declares it (summary, paper, knobs); its component.py holds the code, imported when a worker builds
the stage. base.py holds the sampling helpers the generators share.
"""

from workers.registry import Registry

GENERATORS: Registry[type] = Registry("generate component").discover(__name__)

__all__ = ["GENERATORS"]
