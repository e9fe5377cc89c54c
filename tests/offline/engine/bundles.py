"""Bundles for the tests: a small valid one, one member replaced and the manifest re-sealed, zip bombs, memory."""

from __future__ import annotations

import hashlib
import io
import json
import struct
import zipfile
from contextlib import contextmanager

from workers.bundle import EPOCH, seal, write_bundle

MiB = 2**20


def small_bundle(key=None, **override) -> bytes:
    """A valid bundle of a small run, without training one."""
    from tests.conftest import small_config

    args = {
        "config": small_config().model_dump(mode="json"),
        "record": {"run": {"name": "small", "method": "grpo", "seed": 0, "state": "succeeded", "steps": 2},
                   "seeds": {"run": 0, "model_init": 0}, "data_stream": {"sha256": "0" * 64, "examples": 8}},
        "metrics": [{"step": s, "metric": m, "value": v, "wall_time": 1.0 + s}
                    for s in (1, 2) for m, v in (("reward/mean", 0.25 * s), ("eval/pass@1", 0.1 * s))],
        "samples": [{"step": 1, "prompt": "1+2=", "answer": "3", "completion": "3", "reward": 1.0,
                     "rewards": {"correct": 1.0}, "correct": True, "advantage": 0.5, "length": 1,
                     "truncated": False, "stages": {"filter": "kept"}}],
        "artifacts": [{"path": "runs/1/environment.json", "kind": "environment", "sha256": "a" * 64}],
    }  # fmt: skip
    args.update(override)
    out = io.BytesIO()
    write_bundle(out, key=key, **args)
    return out.getvalue()


def members(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def zipped(contents: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in contents.items():
            archive.writestr(zipfile.ZipInfo(name, date_time=EPOCH), data, compress_type=zipfile.ZIP_DEFLATED)
    return out.getvalue()


def resealed(data: bytes, replace: dict[str, bytes], key=None, keep_signature: bool = True) -> bytes:
    """The bundle with members replaced and the manifest's hashes recomputed, as a forger would.

    The old signature is kept (it no longer matches the manifest), dropped, or replaced by one of `key`."""
    contents = members(data)
    contents.update(replace)
    manifest = json.loads(contents["manifest.json"])
    if "manifest.json" not in replace:
        manifest["files"] = {name: hashlib.sha256(contents[name]).hexdigest() for name in manifest["files"]}
        manifest["bundle_sha256"] = seal(manifest["files"])
        contents["manifest.json"] = json.dumps(manifest, sort_keys=True, indent=1).encode()
    if key is not None:
        import base64

        from workers.bundle import public_key_text

        signature = {"algorithm": "ed25519", "public_key": public_key_text(key),
                     "signature": base64.b64encode(key.sign(contents["manifest.json"])).decode()}  # fmt: skip
        contents["signature.json"] = json.dumps(signature).encode()
    elif not keep_signature:
        contents.pop("signature.json", None)
    return zipped(contents)


def zeros_bomb(path, gigabytes: float = 1.0) -> None:
    """A bundle whose metrics.parquet is `gigabytes` of zeros, deflated (about 1 MB per GB), written in chunks."""
    contents = members(small_bundle())
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        for name, data in contents.items():
            if name != "metrics.parquet":
                archive.writestr(zipfile.ZipInfo(name, date_time=EPOCH), data)
        zeros = bytes(8 * MiB)
        info = zipfile.ZipInfo("metrics.parquet", date_time=EPOCH)
        info.compress_type = zipfile.ZIP_DEFLATED
        with archive.open(info, "w") as member:
            for _ in range(int(gigabytes * 1024 / 8)):
                member.write(zeros)


def lie_about_size(path, member: str, declared: int) -> None:
    """Rewrite the member's uncompressed size in its local header and central directory entry (and nothing else)."""
    data = bytearray(path.read_bytes())
    name = member.encode()
    for signature, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        at = 0
        while (at := data.find(signature, at)) >= 0:
            name_at = at + (30 if signature == b"PK\x03\x04" else 46)
            if data[name_at : name_at + len(name)] == name:
                struct.pack_into("<L", data, at + offset, declared)
            at += 4
    path.write_bytes(bytes(data))


def many_members_bomb(path, count: int = 60_000) -> None:
    """A zip of `count` empty members: harmless bytes, but a central directory that costs memory to parse."""
    with zipfile.ZipFile(path, "w") as archive:
        for i in range(count):
            archive.writestr(zipfile.ZipInfo(f"m{i}", date_time=EPOCH), b"")


def status_kb(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


@contextmanager
def rss_growth():
    """Yields a dict whose "mb" is, afterwards, how far the process's resident memory rose above where it began:
    the peak (VmHWM, reset first through /proc/self/clear_refs) where Linux allows, else VmRSS after."""
    measured = {}
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")  # resets VmHWM to the current RSS
        field = "VmHWM"
    except OSError:
        field = "VmRSS"
    before = status_kb("VmRSS")
    yield measured
    measured["mb"] = (status_kb(field) - before) / 1024
    measured["field"] = field
