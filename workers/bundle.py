"""Run bundles: one archive with everything a run produced and what produced it, sealed by hashes and signed.

    key = load_signing_key(text)                       # the deployment's Ed25519 key (None: unsigned)
    seal = write_bundle("run.zip", config=..., record=..., metrics=rows, samples=..., artifacts=..., key=key)
    bundle = read_bundle("run.zip")          # BundleError if it goes over a limit, is malformed or was altered
    trusted(bundle, {public_key, ...})       # True only for a valid signature by a key the reader trusts

A bundle is a zip of config.yaml, record.json (the reproducibility record),
metrics.parquet (step, metric, value, wall_time), samples.jsonl, artifacts.json
(each artifact's path, kind and sha256), manifest.json, which lists every
member's sha256 and the bundle's own sha256 over that list, and signature.json:
an Ed25519 signature over the exact bytes of manifest.json, with the signer's
public key. Members are written in a fixed order with a fixed timestamp, and
Ed25519 signatures are deterministic, so the same run always bundles to the same bytes.

Reading trusts nothing in the archive: the upload's size, the number of members
and each member's declared sizes and compression ratio are checked from the zip's
end record and central directory before any member is decompressed; members are
then read in chunks with a cap (a lying header cannot make a read longer); each
member is checked against its schema (workers.bundle_members).

    python -m workers bundle runs/demo --out demo.zip [--key key.pem]   # from a `workers run` directory
    python -m workers run --from-bundle demo.zip --out runs/again
    python -m workers bundle-key --out key.pem                          # a new signing key; prints its public key
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import json
import struct
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from workers.bundle_members import FORMAT, MEMBERS, SIGNATURE, parse_member
from workers.errors import BundleError, UserError

__all__ = ["FORMAT", "MEMBERS", "BundleError", "Bundle", "Limits", "read_bundle", "write_bundle", "trusted"]
EPOCH = (1980, 1, 1, 0, 0, 0)
MiB = 2**20


@dataclass(frozen=True)
class Limits:
    """What an import accepts; the platform sets these from its settings (BUNDLE_MAX_*)."""

    max_bytes: int = 512 * MiB  # the archive itself
    max_members: int = 16
    max_member_bytes: int = 256 * MiB  # one member, decompressed
    max_total_bytes: int = 1024 * MiB  # all members, decompressed
    max_ratio: float = 100.0  # decompressed / compressed, for members over RATIO_FLOOR
    max_central_directory: int = 64 * 1024


RATIO_FLOOR = MiB  # small members may compress very well (a manifest of hex digits) and cost nothing
SMALL_MEMBERS = {"manifest.json": 64 * 1024, SIGNATURE: 4 * 1024}


@dataclass
class Bundle:
    config: dict
    record: dict
    metrics: list[dict]  # long form: {"step", "metric", "value", "wall_time"}
    samples: list[dict]
    artifacts: list[dict]
    sha256: str
    signer: str | None = None  # the base64 public key whose signature over the manifest checked out
    signature_problem: str = ""  # why the bundle is not signed, or why its signature does not check out
    manifest: dict = field(default_factory=dict)

    def metric_rows(self) -> list[dict]:
        """metrics.jsonl form: one object per step with every metric of that step."""
        rows: dict[int, dict] = {}
        for point in self.metrics:
            rows.setdefault(point["step"], {"step": point["step"]})[point["metric"]] = point["value"]
        return [rows[step] for step in sorted(rows)]


def seal(hashes: dict[str, str]) -> str:
    return hashlib.sha256("".join(f"{name}\0{hashes[name]}\n" for name in sorted(hashes)).encode()).hexdigest()


# ------------------------------------------------------------------ keys
def new_signing_key() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.generate()


def signing_key_pem(key: Ed25519PrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


def load_signing_key(text: str) -> Ed25519PrivateKey:
    """An Ed25519 private key from PKCS#8 PEM, or from the base64 of its 32 raw bytes."""
    text = text.strip()
    try:
        if text.startswith("-----BEGIN"):
            key = serialization.load_pem_private_key(text.encode(), password=None)
        else:
            key = Ed25519PrivateKey.from_private_bytes(base64.b64decode(text, validate=True))
    except (ValueError, TypeError, binascii.Error) as exc:
        raise UserError(f"the bundle signing key is not an Ed25519 private key ({exc})") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise UserError("the bundle signing key is not an Ed25519 private key")
    return key


def public_key_text(key: Ed25519PrivateKey | Ed25519PublicKey) -> str:
    """The base64 of the 32 raw bytes of the public key: what BUNDLE_TRUSTED_KEYS lists."""
    public = key.public_key() if isinstance(key, Ed25519PrivateKey) else key
    return base64.b64encode(public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)).decode()


def load_public_key(text: str) -> str:
    """A trusted public key, normalised to public_key_text's form (UserError if it is not one)."""
    try:
        raw = base64.b64decode(text.strip(), validate=True)
        return public_key_text(Ed25519PublicKey.from_public_bytes(raw))
    except (ValueError, binascii.Error) as exc:
        raise UserError(f"{text!r} is not the base64 of an Ed25519 public key ({exc})") from None


def key_id(public_key: str) -> str:
    """A short name of a public key, for pages: the start of its sha256."""
    return hashlib.sha256(public_key.encode()).hexdigest()[:16]


def trusted(bundle: Bundle, keys) -> bool:
    return bundle.signer is not None and bundle.signer in set(keys)


# ------------------------------------------------------------------ writing
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
    path, *, config: dict, record: dict, metrics: list[dict], samples: list[dict], artifacts: list[dict],
    key: Ed25519PrivateKey | None = None,
) -> str:  # fmt: skip
    """Write the archive, signed when a key is given; returns the bundle's sha256 (the seal an auditor keeps)."""
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
    order = [*MEMBERS, "manifest.json"]
    if key is not None:
        signature = {"algorithm": "ed25519", "public_key": public_key_text(key),
                     "signature": base64.b64encode(key.sign(contents["manifest.json"])).decode()}  # fmt: skip
        contents[SIGNATURE] = json.dumps(signature, sort_keys=True, indent=1).encode()
        order.append(SIGNATURE)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name in order:
            archive.writestr(zipfile.ZipInfo(name, date_time=EPOCH), contents[name])
    return manifest["bundle_sha256"]


# ------------------------------------------------------------------ reading
def read_bundle(source, limits: Limits = Limits()) -> Bundle:
    """Open and check a bundle (a path, bytes or a binary file); BundleError names what is wrong."""
    name = "the bundle"  # bytes, or an upload's file: its repr or a temporary file's descriptor says nothing
    if isinstance(source, str | Path) or isinstance(getattr(source, "name", None), str):
        name = str(source if isinstance(source, str | Path) else source.name)
    if isinstance(source, str | Path):
        try:
            with open(source, "rb") as handle:
                return _read(handle, name, limits)
        except OSError as exc:
            raise BundleError(f"{name}: not a Rollout Lab bundle ({exc.strerror})") from None
    return _read(io.BytesIO(source) if isinstance(source, bytes | bytearray) else source, name, limits)


def _read(handle, name: str, limits: Limits) -> Bundle:
    try:
        archive = open_archive(handle, limits)
    except BundleError as exc:
        raise BundleError(f"{name}: {exc}") from None
    with archive:
        try:
            return unpack(archive, limits)
        except BundleError as exc:
            raise BundleError(f"{name}: {exc}") from None


def open_archive(handle, limits: Limits) -> zipfile.ZipFile:
    """The zip, once its size, member count and central directory are within the limits; nothing decompressed."""
    size = handle.seek(0, io.SEEK_END)
    if size > limits.max_bytes:
        raise BundleError(f"refused: {size} bytes, more than the {limits.max_bytes} a bundle may have")
    check_end_record(handle, size, limits)
    handle.seek(0)
    try:
        archive = zipfile.ZipFile(handle)
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise BundleError(f"not a Rollout Lab bundle ({exc})") from None
    try:
        check_members(archive.infolist(), limits)
    except BundleError:
        archive.close()
        raise
    return archive


def check_end_record(handle, size: int, limits: Limits) -> None:
    """Read the zip's end-of-central-directory record (the last 22 bytes + comment) before zipfile parses
    the central directory, so a many-member bomb is refused from its declared count alone."""
    tail_size = min(size, 22 + 65_535)
    handle.seek(size - tail_size)
    tail = handle.read(tail_size)
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or len(tail) - at < 22:
        raise BundleError("not a Rollout Lab bundle (not a zip archive)")
    _, disk, _, _, entries, directory_size, _, _ = struct.unpack("<4s4H2LH", tail[at : at + 22])
    if entries == 0xFFFF or directory_size == 0xFFFFFFFF or tail.rfind(b"PK\x06\x07", 0, at) >= 0:
        raise BundleError("refused: a zip64 archive; a bundle never needs one")
    if disk != 0:
        raise BundleError("refused: a multi-disk zip archive")
    if entries > limits.max_members:
        raise BundleError(f"refused: {entries} members, more than the {limits.max_members} a bundle may have")
    if directory_size > limits.max_central_directory:
        raise BundleError(f"refused: a central directory of {directory_size} bytes, more than a bundle needs")


def check_members(infos: list[zipfile.ZipInfo], limits: Limits) -> None:
    """Declared sizes and ratios, from the central directory: the bomb is refused before it goes off."""
    if len(infos) > limits.max_members:
        raise BundleError(f"refused: {len(infos)} members, more than the {limits.max_members} a bundle may have")
    names = [info.filename for info in infos]
    allowed = {*MEMBERS, "manifest.json", SIGNATURE}
    strange = sorted(set(names) - allowed)
    if strange or len(set(names)) != len(names):
        raise BundleError(f"altered: its files are not the ones a bundle holds ({', '.join(strange) or 'repeated'})")
    total = 0
    for info in infos:
        cap = SMALL_MEMBERS.get(info.filename, limits.max_member_bytes)
        if info.file_size > cap:
            raise BundleError(f"refused: {info.filename} would decompress to {info.file_size} bytes, more than {cap}")
        ratio = info.file_size / max(info.compress_size, 1)
        if info.file_size > RATIO_FLOOR and ratio > limits.max_ratio:
            raise BundleError(f"refused: {info.filename} is compressed {ratio:.0f}:1, "
                              f"more than {limits.max_ratio:.0f}:1 (a zip bomb?)")  # fmt: skip
        if info.flag_bits & 0x1 or info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise BundleError(f"refused: {info.filename} is encrypted or compressed with an unusual method")
        total += info.file_size
    if total > limits.max_total_bytes:
        raise BundleError(f"refused: the members would decompress to {total} bytes, more than {limits.max_total_bytes}")


def read_member(archive: zipfile.ZipFile, member: str, cap: int) -> bytes:
    """The member's bytes, read in chunks and never more than its declared size or the cap."""
    info = archive.getinfo(member)
    limit = min(info.file_size, cap)
    chunks, size = [], 0
    try:
        with archive.open(info) as stream:
            while chunk := stream.read(min(MiB, limit + 1 - size)):
                size += len(chunk)
                if size > limit:
                    raise BundleError(f"refused: {member} decompresses to more than the {limit} bytes it declares")
                chunks.append(chunk)
    except (zipfile.BadZipFile, zlib.error, OSError, EOFError, ValueError) as exc:  # a corrupt stream or CRC
        raise BundleError(f"refused: {member} does not decompress to what its header declares ({exc})") from None
    return b"".join(chunks)


def unpack(archive: zipfile.ZipFile, limits: Limits) -> Bundle:
    present = set(archive.namelist())
    if "manifest.json" not in present:
        raise BundleError("not a Rollout Lab bundle (no manifest.json)")
    manifest_bytes = read_member(archive, "manifest.json", SMALL_MEMBERS["manifest.json"])
    manifest = parse_member("manifest.json", manifest_bytes, max_bytes=limits.max_member_bytes)
    if sorted(manifest["files"]) != sorted(MEMBERS) or not present >= {*MEMBERS}:
        raise BundleError("altered: its files are not the ones a bundle holds")
    parsed = {}
    for member in MEMBERS:
        data = read_member(archive, member, limits.max_member_bytes)
        if hashlib.sha256(data).hexdigest() != manifest["files"][member]:
            raise BundleError(f"altered: {member} does not match its sha256 in the manifest")
        parsed[member] = parse_member(member, data, max_bytes=limits.max_member_bytes)
        del data
    if seal(manifest["files"]) != manifest["bundle_sha256"]:
        raise BundleError("altered: the manifest's bundle_sha256 does not match its file list")
    signer, problem = check_signature(archive, present, manifest_bytes, limits)
    return Bundle(
        config=parsed["config.yaml"], record=parsed["record.json"], metrics=parsed["metrics.parquet"],
        samples=parsed["samples.jsonl"], artifacts=parsed["artifacts.json"], sha256=manifest["bundle_sha256"],
        signer=signer, signature_problem=problem, manifest=manifest,
    )  # fmt: skip


def check_signature(archive, present: set[str], manifest_bytes: bytes, limits: Limits) -> tuple[str | None, str]:
    """(the signer's public key, "") when signature.json signs these manifest bytes; (None, why) otherwise."""
    if SIGNATURE not in present:
        return None, "not signed"
    signature = parse_member(SIGNATURE, read_member(archive, SIGNATURE, SMALL_MEMBERS[SIGNATURE]), max_bytes=0)
    public = Ed25519PublicKey.from_public_bytes(base64.b64decode(signature["public_key"]))
    try:
        public.verify(base64.b64decode(signature["signature"]), manifest_bytes)
    except InvalidSignature:
        return None, f"the signature by key {key_id(signature['public_key'])} does not match the manifest"
    return public_key_text(public), ""


def bundle_run_dir(run_dir: Path, out: Path, key: Ed25519PrivateKey | None = None) -> str:
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
        samples=_jsonl(run_dir / "samples.jsonl"), artifacts=_jsonl(run_dir / "artifacts.jsonl"), key=key,
    )  # fmt: skip


def _jsonl(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
