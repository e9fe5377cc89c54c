"""What the filter stage's declarations share (no torch here): the knob every filter has."""

from __future__ import annotations

from pydantic import Field

from workers.knobs import Knobs


class FilterKnobs(Knobs):
    overlong: bool = Field(
        False,
        description="Overlong filtering (DAPO, Table 1): truncated completions stay in their group's "
        "baseline but are left out of the loss, so a completion cut off mid-answer is never pushed down.",
    )
