"""Run bundles: one archive with everything a run produced and what produced it, sealed by hashes.

    seal = write_bundle("run.zip", config=..., record=..., metrics=rows, samples=..., artifacts=...)
    bundle = read_bundle("run.zip")          # BundleError if any byte of it was changed

A bundle is a zip of config.yaml, record.json (the reproducibility record),
metrics.parquet (step, metric, value, wall_time), samples.jsonl, artifacts.json
(each artifact's path, kind and sha256) and manifest.json, which lists every
file's sha256 and the bundle's own sha256 over that list. Members are written in
a fixed order with a fixed timestamp, so the same run always bundles to the same bytes.

    python -m workers bundle runs/demo --out demo.zip      # from a `workers run` directory
    python -m workers run --from-bundle demo.zip --out runs/again
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from dataclasses import dataclass
from pathlib import Path

import yaml

from workers.errors import UserError

FORMAT = "rolloutlab-bundle/1"
MEMBERS = ["config.yaml", "record.json", "metrics.parquet", "samples.jsonl", "artifacts.json"]
EPOCH = (1980, 1, 1, 0, 0, 0)


class BundleError(UserError):
    """A bundle that is not one, or whose contents do not match its manifest (altered)."""


@dataclass
class Bundle:
    config: dict
    record: dict
    metrics: list[dict]  # long form: {"step", "metric", "value", "wall_time"}
    samples: list[dict]
    artifacts: list[dict]
    sha256: str

    def metric_rows(self) -> list[dict]:
        """metrics.jsonl form: one object per step with every metric of that step."""
        rows: dict[int, dict] = {}
        for point in self.metrics:
            rows.setdefault(point["step"], {"step": point["step"]})[point["metric"]] = point["value"]
        return [rows[step] for step in sorted(rows)]


def seal(hashes: dict[str, str]) -> str:
    return hashlib.sha256("".join(f"{name}\0{hashes[name]}\n" for name in sorted(hashes)).encode()).hexdigest()


def metrics_parquet(points: list[dict]) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({
        "step": pa.array([p["step"] for p in points], pa.int64()),
        "metric": pa.array([p["metric"] for p in points], pa.string()),
        "value": pa.array([p["value"] for p in points], pa.float64()),
        "wall_time": pa.array([p.get("wall_time") for p in points], pa.float64()),
    })  # fmt: skip
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    return buffer.getvalue()


def write_bundle(
    path, *, config: dict, record: dict, metrics: list[dict], samples: list[dict], artifacts: list[dict]
) -> str:
    """Write the archive; returns the bundle's sha256 (the seal an auditor keeps)."""
    contents = {
        "config.yaml": yaml.safe_dump(config, sort_keys=True).encode(),
        "record.json": json.dumps(record, sort_keys=True, indent=1).encode(),
        "metrics.parquet": metrics_parquet(sorted(metrics, key=lambda p: (p["step"], p["metric"]))),
        "samples.jsonl": "".join(json.dumps(s, sort_keys=True) + "\n" for s in samples).encode(),
        "artifacts.json": json.dumps(artifacts, sort_keys=True, indent=1).encode(),
    }
    hashes = {name: hashlib.sha256(data).hexdigest() for name, data in contents.items()}
    manifest = {"format": FORMAT, "files": hashes, "bundle_sha256": seal(hashes)}
    contents["manifest.json"] = json.dumps(manifest, sort_keys=True, indent=1).encode()
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name in [*MEMBERS, "manifest.json"]:
            archive.writestr(zipfile.ZipInfo(name, date_time=EPOCH), contents[name])
    return manifest["bundle_sha256"]


def read_bundle(source) -> Bundle:
    """Open and check a bundle (a path or bytes); BundleError names what is wrong or altered."""
    import pyarrow.parquet as pq

    name = getattr(source, "name", None) or (str(source) if not isinstance(source, bytes) else "the bundle")
    try:
        archive = zipfile.ZipFile(io.BytesIO(source) if isinstance(source, bytes) else source)
    except (zipfile.BadZipFile, OSError) as exc:
        raise BundleError(f"{name}: not a Rollout Lab bundle ({exc})") from None
    with archive:
        present = set(archive.namelist())
        if "manifest.json" not in present:
            raise BundleError(f"{name}: not a Rollout Lab bundle (no manifest.json)")
        try:
            manifest = json.loads(archive.read("manifest.json"))
        except json.JSONDecodeError:
            raise BundleError(f"{name}: altered: manifest.json is not valid JSON") from None
        if manifest.get("format") != FORMAT:
            raise BundleError(f"{name}: unknown bundle format {manifest.get('format')!r}; expected {FORMAT}")
        data = check_contents(name, archive, present, manifest)
    try:
        return Bundle(
            config=yaml.safe_load(data["config.yaml"]),
            record=json.loads(data["record.json"]),
            metrics=pq.read_table(io.BytesIO(data["metrics.parquet"])).to_pylist(),
            samples=[json.loads(line) for line in data["samples.jsonl"].decode().splitlines() if line],
            artifacts=json.loads(data["artifacts.json"]),
            sha256=manifest["bundle_sha256"],
        )
    except Exception as exc:  # noqa: BLE001 - contents that match their hashes but do not parse
        raise BundleError(f"{name}: a member does not parse ({exc})") from None


def check_contents(name: str, archive: zipfile.ZipFile, present: set[str], manifest: dict) -> dict[str, bytes]:
    files = manifest.get("files", {})
    if sorted(files) != sorted(MEMBERS) or present != {*MEMBERS, "manifest.json"}:
        raise BundleError(f"{name}: altered: its files are not the ones a bundle holds")
    data = {member: archive.read(member) for member in MEMBERS}
    for member, content in data.items():
        if hashlib.sha256(content).hexdigest() != files[member]:
            raise BundleError(f"{name}: altered: {member} does not match its sha256 in the manifest")
    if seal(files) != manifest.get("bundle_sha256"):
        raise BundleError(f"{name}: altered: the manifest's bundle_sha256 does not match its file list")
    return data


def bundle_run_dir(run_dir: Path, out: Path) -> str:
    """Bundle the directory a `python -m workers run` wrote."""
    run_dir = Path(run_dir)
    if not (run_dir / "config.yaml").is_file():
        raise UserError(f"{run_dir}: not a run directory (no config.yaml)")
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    record = json.loads((run_dir / "environment.json").read_text()) if (run_dir / "environment.json").is_file() else {}
    if (run_dir / "data_stream.json").is_file():
        record["data_stream"] = json.loads((run_dir / "data_stream.json").read_text())
    metrics = []
    for row in _jsonl(run_dir / "metrics.jsonl"):
        metrics += [{"step": row["step"], "metric": k, "value": float(v), "wall_time": None}
                    for k, v in row.items() if k != "step"]  # fmt: skip
    return write_bundle(
        out, config=config, record=record, metrics=metrics,
        samples=_jsonl(run_dir / "samples.jsonl"), artifacts=_jsonl(run_dir / "artifacts.jsonl"),
    )  # fmt: skip


def _jsonl(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
