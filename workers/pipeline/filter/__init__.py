"""Filter stage: which groups go on to training, and which samples of them carry gradient.

Every filter component picks groups (`keep`); the stage then applies the
sample-level filters that any method may switch on (filter.overlong), so a
knob like DAPO's overlong filtering works with every group filter alike.

The components are declared, with their knobs, in knobs.py (torch-free: RunConfig reads it);
their code is in base.py, imported when a worker builds the stage.
"""

from workers.pipeline.filter.knobs import FILTERS

__all__ = ["FILTERS"]
