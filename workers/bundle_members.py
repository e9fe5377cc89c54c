"""The schema of every member of a run bundle, checked before any of it reaches a database.

A bundle comes from another deployment, so each member is untrusted input: its
types, lengths and numbers are checked here (strings hold no NUL and have a
bounded length, numbers are finite, free-form JSON is bounded in depth and size),
and an error names the member and the field:

    parse_member("metrics.parquet", data, max_bytes=cap)   # MemberError("metrics.parquet: row 3, value: ...")

workers.bundle calls `parse_member` for each member it has read (within its
caps); RunConfig validates config.yaml's knobs after this schema has passed.
"""

from __future__ import annotations

import io
import json
import math
from typing import Annotated, Any, Literal

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints, ValidationError, model_validator

from workers.errors import BundleError

FORMAT = "rolloutlab-bundle/1"
MEMBERS = ["config.yaml", "record.json", "metrics.parquet", "samples.jsonl", "artifacts.json"]
SIGNATURE = "signature.json"

MAX_TEXT = 100_000  # characters of one string (a prompt, a completion)
MAX_DIFF = 16 * 2**20  # characters of the record's uncommitted diff
MAX_DEPTH = 16  # nesting of free-form JSON
MAX_ITEMS = 10_000  # keys of one free-form mapping or items of one list
MAX_METRIC_POINTS = 5_000_000
MAX_SAMPLES = 200_000
MAX_ARTIFACTS = 10_000
MAX_STEP = 10**9


class MemberError(BundleError):
    """A bundle member that does not fit its schema; the message names the member and the field."""


def _no_nul(text: str) -> str:
    if "\0" in text:
        raise ValueError("holds a NUL character")
    return text


def _bounded_json(value: Any, depth: int = 0) -> Any:
    """Free-form JSON: bounded depth and size, finite numbers, strings without NUL."""
    if depth > MAX_DEPTH:
        raise ValueError(f"nested deeper than {MAX_DEPTH}")
    if isinstance(value, str):
        if len(value) > MAX_TEXT:
            raise ValueError(f"a string longer than {MAX_TEXT} characters")
        return _no_nul(value)
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("a number that is not finite")
    if isinstance(value, dict | list) and len(value) > MAX_ITEMS:
        raise ValueError(f"more than {MAX_ITEMS} items")
    if isinstance(value, dict):
        for key, item in value.items():
            _bounded_json(key, depth + 1)
            _bounded_json(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _bounded_json(item, depth + 1)
    elif value is not None and not isinstance(value, bool | int | float):
        raise ValueError(f"a {type(value).__name__}, which JSON does not hold")
    return value


Text = Annotated[str, StringConstraints(max_length=MAX_TEXT), AfterValidator(_no_nul)]
Name = Annotated[str, StringConstraints(max_length=200), AfterValidator(_no_nul)]
Sha256 = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
Finite = Annotated[float, Field(allow_inf_nan=False)]
Step = Annotated[int, Field(ge=0, le=MAX_STEP)]
Json = Annotated[Any, AfterValidator(_bounded_json)]


class Member(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class Manifest(Member):
    format: Literal["rolloutlab-bundle/1"]
    files: dict[Literal[*MEMBERS], Sha256]  # type: ignore[valid-type]
    bundle_sha256: Sha256


class Signature(Member):
    """An Ed25519 signature over the exact bytes of manifest.json, with the signer's public key."""

    algorithm: Literal["ed25519"]
    public_key: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9+/]{43}=$")]  # 32 bytes, base64
    signature: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9+/]{86}==$")]  # 64 bytes, base64


class CodeState(Member):
    revision: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{40,64}$")] | None = None
    dirty: bool | None = None
    diff_sha256: Sha256 | None = None
    diff: Annotated[str, StringConstraints(max_length=MAX_DIFF), AfterValidator(_no_nul)] | None = None
    diff_redactions: Annotated[int, Field(ge=0)] | None = None  # how many secrets were taken out of the diff


class DataStream(Member):
    sha256: Sha256
    examples: Annotated[int, Field(ge=0)]


class RunAbout(Member):
    """What the exporting platform knew of the run (audit.services.export_bundle)."""

    name: Name = ""
    method: Name = ""
    seed: Annotated[int, Field(ge=0, le=2**31 - 1)] = 0
    state: Literal["queued", "running", "succeeded", "failed", "cancelled", "lost"] = "succeeded"
    steps: Step = 0


class Record(Member):
    """The reproducibility record (workers.repro.capture_environment), as kept with the run."""

    model_config = ConfigDict(extra="forbid", strict=False)
    code: CodeState | None = None
    python: Text | None = None
    packages: dict[Name, Name] = Field(default_factory=dict, max_length=MAX_ITEMS)
    torch: Name | None = None
    gpu: Json = None
    cpu: Json = None
    host: Name | None = None
    platform: Name | None = None
    env: dict[Name, Text] = Field(default_factory=dict, max_length=1000)
    seeds: dict[Name, int] = Field(default_factory=dict, max_length=100)
    config: Json = None
    config_hash: Sha256 | None = None
    dataset_fingerprint: Name | None = None
    initial_weights_sha256: Name | None = None
    model_source: Text | None = None  # 'tiny' or the resolved directory of the weights (workers.training.trainer)
    determinism: Json = None
    capture_seconds: Finite | None = None
    data_stream: DataStream | None = None
    run: RunAbout | None = None
    diff_redactions: Annotated[int, Field(ge=0)] | None = None


class MetricPoint(Member):
    step: Step
    metric: Name
    value: Finite
    wall_time: Finite | None = None


class SampleRow(Member):
    """One rollout sample as the trainer describes it; other reporters (the SDK) may add bounded fields."""

    model_config = ConfigDict(extra="allow", strict=True)
    step: Step = 0
    prompt: Text = ""
    answer: Text | None = None
    completion: Text = ""
    reward: Finite | None = None
    rewards: dict[Name, Finite] = Field(default_factory=dict, max_length=100)
    correct: bool | None = None
    advantage: Finite | None = None
    length: Annotated[int, Field(ge=0)] | None = None
    truncated: bool | None = None
    stages: dict[Name, Json] = Field(default_factory=dict, max_length=100)

    @model_validator(mode="after")
    def _extras_are_bounded(self) -> SampleRow:
        if len(self.model_extra or {}) > 32:
            raise ValueError("more than 32 fields")
        _bounded_json(self.model_extra or {})
        return self


class ArtifactRow(Member):
    path: Annotated[str, StringConstraints(max_length=1000), AfterValidator(_no_nul)]
    kind: Annotated[str, StringConstraints(max_length=50), AfterValidator(_no_nul)]
    sha256: Sha256 | Literal[""] = ""


# ------------------------------------------------------------------ parsing
class NoAliasLoader(yaml.SafeLoader):
    """YAML without anchors and aliases: a few bytes of aliases can expand to gigabytes."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            raise yaml.composer.ComposerError(None, None, "aliases are not allowed", self.peek_event().start_mark)
        return super().compose_node(parent, index)


def _where(error: dict) -> str:
    return ".".join(str(part) for part in error["loc"]) or "(the whole member)"


def _explain(member: str, exc: ValidationError, prefix: str = "") -> MemberError:
    first = exc.errors()[0]
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return MemberError(f"{member}: {prefix}{_where(first)}: {first['msg']}{more}")


def _validate(member: str, model, value, prefix: str = ""):
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        raise _explain(member, exc, prefix) from None


def _json(member: str, data: bytes, prefix: str = ""):
    try:
        return json.loads(data.decode("utf-8"), parse_constant=_no_constants)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError, ValueError) as exc:
        raise MemberError(f"{member}: {prefix}not valid JSON ({exc})") from None


def _no_constants(name: str):
    raise ValueError(f"{name} is not a finite number")


def parse_manifest(data: bytes) -> dict:
    return _validate("manifest.json", Manifest, _json("manifest.json", data)).model_dump()


def parse_signature(data: bytes) -> dict:
    return _validate(SIGNATURE, Signature, _json(SIGNATURE, data)).model_dump()


def parse_config(data: bytes) -> dict:
    try:
        raw = yaml.load(data.decode("utf-8"), Loader=NoAliasLoader)  # noqa: S506 - a SafeLoader without aliases
    except (UnicodeDecodeError, yaml.YAMLError, RecursionError) as exc:
        raise MemberError(f"config.yaml: not valid YAML ({exc})") from None
    if not isinstance(raw, dict):
        raise MemberError("config.yaml: a run config must be a mapping of sections to knobs")
    try:
        _bounded_json(raw)
    except ValueError as exc:
        raise MemberError(f"config.yaml: {exc}") from None
    return raw


def parse_record(data: bytes) -> dict:
    raw = _json("record.json", data)
    if not isinstance(raw, dict):
        raise MemberError("record.json: the record must be an object")
    _validate("record.json", Record, raw)
    return raw  # kept as it was written, so a re-export bundles to the same bytes


def parse_samples(data: bytes) -> list[dict]:
    rows = []
    for number, line in enumerate(data.split(b"\n"), start=1):
        if not line.strip():
            continue
        if len(rows) >= MAX_SAMPLES:
            raise MemberError(f"samples.jsonl: more than {MAX_SAMPLES} samples")
        raw = _json("samples.jsonl", line, f"line {number}: ")
        if not isinstance(raw, dict):
            raise MemberError(f"samples.jsonl: line {number}: a sample must be an object")
        _validate("samples.jsonl", SampleRow, raw, f"line {number}, ")
        rows.append(raw)
    return rows


def parse_artifacts(data: bytes) -> list[dict]:
    raw = _json("artifacts.json", data)
    if not isinstance(raw, list) or len(raw) > MAX_ARTIFACTS:
        raise MemberError(f"artifacts.json: must be a list of at most {MAX_ARTIFACTS} artifacts")
    for i, row in enumerate(raw):
        _validate("artifacts.json", ArtifactRow, row, f"item {i}, ")
    return raw


METRIC_COLUMNS = {"step": "int64", "metric": "string", "value": "double", "wall_time": "double"}


def parse_metrics(data: bytes, max_bytes: int) -> list[dict]:
    """The parquet's footer is checked before its pages are read: rows, columns and uncompressed size."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        source = pq.ParquetFile(io.BytesIO(data))
    except (pa.ArrowException, OSError) as exc:
        raise MemberError(f"metrics.parquet: not a readable parquet file ({exc})") from None
    meta = source.metadata
    columns = {field.name: str(field.type) for field in source.schema_arrow}
    if columns != METRIC_COLUMNS:
        raise MemberError(f"metrics.parquet: columns must be {METRIC_COLUMNS}, not {columns}")
    if meta.num_rows > MAX_METRIC_POINTS:
        raise MemberError(f"metrics.parquet: {meta.num_rows} points, more than {MAX_METRIC_POINTS}")
    unpacked = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
    if unpacked > max_bytes:
        raise MemberError(f"metrics.parquet: {unpacked} bytes once decompressed, more than {max_bytes}")
    try:
        rows = source.read().to_pylist()
    except (pa.ArrowException, OSError) as exc:
        raise MemberError(f"metrics.parquet: not a readable parquet file ({exc})") from None
    for i, row in enumerate(rows):
        _validate("metrics.parquet", MetricPoint, row, f"row {i}, ")
    return rows


def parse_member(member: str, data: bytes, *, max_bytes: int) -> Any:
    """The member's content, checked against its schema (MemberError names the member and the field)."""
    parsers = {
        "manifest.json": parse_manifest,
        SIGNATURE: parse_signature,
        "config.yaml": parse_config,
        "record.json": parse_record,
        "samples.jsonl": parse_samples,
        "artifacts.json": parse_artifacts,
    }
    if member == "metrics.parquet":
        return parse_metrics(data, max_bytes)
    return parsers[member](data)
