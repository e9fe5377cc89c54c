"""The base of every config model: sections of RunConfig and the knobs each pipeline component owns.

A component declares its knobs beside its code, as a subclass of `Knobs` with a
description on every field; RunConfig gathers them into one discriminated union
per stage (see workers/config/schema.py), so a component's knobs exist, validate and
appear in the launch form exactly when the component is chosen.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Section(BaseModel):
    """Base of every config section: unknown keys are errors, not silently dropped; floats are finite."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)


class Knobs(Section):
    """A component without knobs of its own; components with knobs subclass it."""
