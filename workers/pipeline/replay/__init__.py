"""Replay stage: what is kept from a step and reused in later ones.

The components are declared, with their knobs, in knobs.py (torch-free: RunConfig reads it);
their code is in base.py and one module per method, imported when a worker builds the stage.
"""

from workers.pipeline.replay.knobs import REPLAYS

__all__ = ["REPLAYS"]
