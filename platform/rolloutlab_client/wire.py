"""The wire format of external runs: what rolloutlab_client.client sends and /api/runs/external... accepts.

Imports only pydantic, so a training script's client and the server validate with the
same models, and a bad point is refused where it is logged rather than by a 400 later.

    POST /api/runs/external            ExternalRunIn  -> 201 ExternalRunOut (200 if its key was seen)
    POST /api/runs/<id>/points         PointsIn       -> 200 StoredOut
    POST /api/runs/<id>/samples        SamplesIn      -> 200 StoredOut
    POST /api/runs/<id>/finish         FinishIn       -> 200 the run

Exactly once: a point is identified by (run, name, step) and a sample by its client key,
so a batch sent again after a lost answer is stored once, whatever part of it got through.
"""

from __future__ import annotations

import json
import math
import unicodedata
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    StringConstraints,
    WithJsonSchema,
)

MAX_INT32 = 2**31 - 1  # steps are integer columns
MAX_CONFIG_BYTES = 64 * 1024  # an external run's config as JSON
MAX_POINTS = 5000  # points per request
MAX_SAMPLES = 256  # samples per request
MAX_SAMPLE_TEXT = 32 * 1024  # characters of a prompt, completion or answer
MAX_EXTRA_BYTES = 16 * 1024  # a sample's free-form extra columns as JSON


def printable(text: str) -> str:
    """No NUL or other control characters: PostgreSQL refuses NUL, and none belongs in a name."""
    bad = next((c for c in text if unicodedata.category(c) in ("Cc", "Cs") and c not in "\t\n\r"), None)
    if bad is not None:
        raise ValueError(f"must not contain the control character U+{ord(bad):04X}")
    return text


def no_nul(text: str) -> str:
    """Free text (a completion) may hold any character but NUL, which PostgreSQL's text and jsonb refuse."""
    if "\x00" in text:
        raise ValueError("must not contain the character U+0000")
    return text


def bounded_json(limit: int):
    """A JSON object of at most `limit` bytes, with no NUL in any key or string."""

    def check(value: dict[str, Any]) -> dict[str, Any]:
        encoded = json.dumps(value, ensure_ascii=False, allow_nan=False)
        if len(encoded.encode()) > limit:
            raise ValueError(f"must be at most {limit} bytes as JSON")
        if "\\u0000" in encoded:
            raise ValueError("must not contain the character U+0000")
        return value

    return AfterValidator(check)


MetricName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z][\w@./-]{0,199}$")]
Step = Annotated[int, Field(ge=0, le=MAX_INT32)]
ClientKey = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.:-]{8,64}$")]
ProjectName = Annotated[
    str, StringConstraints(strip_whitespace=True, min_length=1, max_length=100), AfterValidator(printable)
]
ShortText = Annotated[str, StringConstraints(max_length=200), AfterValidator(printable)]
LongText = Annotated[str, StringConstraints(max_length=MAX_SAMPLE_TEXT), AfterValidator(no_nul)]


class Wire(BaseModel):
    """Unknown keys are refused by name; numbers must be finite (JSON has no NaN)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class ExternalRunIn(Wire):
    project: ProjectName = Field(description="A project of yours (made in your team if new)")
    name: Annotated[ShortText, StringConstraints(strip_whitespace=True)] = ""
    config: Annotated[dict[str, Any], bounded_json(MAX_CONFIG_BYTES)] = Field(
        default_factory=dict, description=f"Free JSON: the script's hyperparameters (at most {MAX_CONFIG_BYTES} bytes)"
    )
    total_steps: Step = Field(0, description="The steps the script plans, if it knows (0: unknown)")
    key: ClientKey | None = Field(None, description="The client's key for this run: sent again, it finds the same run")


class ExternalRunOut(BaseModel):
    id: int
    url: str = Field(description="The run's page")


NON_FINITE = {"nan": math.nan, "+inf": math.inf, "-inf": -math.inf}  # JSON has no such numbers: sent as these names


def non_finite_from_text(value: Any) -> Any:
    return NON_FINITE.get(value, value) if isinstance(value, str) else value


def non_finite_as_text(value: float) -> float | str:
    if math.isfinite(value):
        return value
    return "nan" if math.isnan(value) else ("+inf" if value > 0 else "-inf")


# a metric's value: a finite number, or NaN / +inf / -inf sent by name; stored as such and drawn as a marked gap
MetricValue = Annotated[
    float,
    Field(allow_inf_nan=True),
    BeforeValidator(non_finite_from_text),
    PlainSerializer(non_finite_as_text),
    WithJsonSchema({"anyOf": [{"type": "number"}, {"enum": sorted(NON_FINITE)}]}),
]


class Point(Wire):
    name: MetricName
    step: Step
    value: MetricValue
    wall_time: float | None = Field(None, ge=0, description="Seconds since the epoch when it was logged")


class PointsIn(Wire):
    points: list[Point] = Field(default_factory=list, max_length=MAX_POINTS, description="None: a heartbeat")


class SampleIn(Wire):
    """One rollout sample as the run page shows it; `key` makes a retried batch store it once."""

    key: ClientKey
    step: Step
    prompt: LongText = ""
    completion: LongText = ""
    answer: LongText | None = None
    reward: float | None = None
    rewards: dict[MetricName, float] = Field(default_factory=dict, max_length=32)
    advantage: float | None = None
    correct: bool | None = None
    extra: Annotated[dict[str, Any], bounded_json(MAX_EXTRA_BYTES)] = Field(default_factory=dict)


class SamplesIn(Wire):
    samples: list[SampleIn] = Field(default_factory=list, max_length=MAX_SAMPLES)


class StoredOut(BaseModel):
    received: int
    stored: int = Field(description="New ones; the rest were stored by an earlier try")


class FinishIn(Wire):
    status: Literal["finished", "failed", "cancelled"] = "finished"
    detail: Annotated[str, StringConstraints(max_length=1000), AfterValidator(printable)] = ""
