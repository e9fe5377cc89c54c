"""Replay stage: what is kept from a step and reused in later ones.

Each component is one folder here, found by the registry (no list to edit): its __init__.py, torch-free,
declares it (summary, paper, knobs); its component.py holds the code, imported when a worker builds
the stage.
"""

from workers.registry import Registry

REPLAYS: Registry[type] = Registry("replay component").discover(__name__)

__all__ = ["REPLAYS"]
