"""Generate stage: how the candidate completions of a step are produced.

The components are declared, with their knobs, in knobs.py (torch-free: RunConfig reads it);
their code is in base.py (with the sampling helpers they share) and one module per method,
imported when a worker builds the stage.
"""

from workers.pipeline.generate.knobs import GENERATORS

__all__ = ["GENERATORS"]
