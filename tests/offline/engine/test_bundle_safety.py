"""Bundles read as untrusted input: limits before decompression, a schema per member, the signature."""

from __future__ import annotations

import base64
import io
import json
import math

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.offline.engine.bundles import (
    lie_about_size,
    many_members_bomb,
    members,
    resealed,
    rss_growth,
    small_bundle,
    zeros_bomb,
    zipped,
)
from workers.bundle import BundleError, Limits, load_signing_key, new_signing_key, public_key_text, read_bundle, trusted


@pytest.fixture(scope="module")
def bomb(tmp_path_factory):
    path = tmp_path_factory.mktemp("bombs") / "zeros.zip"
    zeros_bomb(path, gigabytes=1.0)
    return path


def test_a_gigabyte_of_zeros_is_refused_from_its_central_directory(bomb):
    assert bomb.stat().st_size < 8 * 2**20  # it is a bomb: 1 GB in a few MB
    with rss_growth() as memory, pytest.raises(BundleError) as refused:
        read_bundle(bomb)
    assert "refused: metrics.parquet would decompress to 1073741824 bytes" in str(refused.value)
    assert memory["mb"] <= 50, memory


def test_a_bomb_that_declares_a_small_size_is_cut_off_at_what_it_declares(bomb, tmp_path):
    liar = tmp_path / "liar.zip"
    liar.write_bytes(bomb.read_bytes())
    lie_about_size(liar, "metrics.parquet", 1000)
    with rss_growth() as memory, pytest.raises(BundleError) as refused:
        read_bundle(liar)
    assert "refused: metrics.parquet does not decompress to what its header declares" in str(refused.value)
    assert memory["mb"] <= 50, memory


def test_a_high_compression_ratio_is_refused_even_under_the_size_caps(tmp_path):
    data = resealed(small_bundle(), {"samples.jsonl": b" " * (4 * 2**20)})  # 4 MiB of spaces deflate ~1000:1
    with pytest.raises(BundleError, match=r"samples.jsonl is compressed \d+:1, more than 100:1"):
        read_bundle(data)


def test_many_members_are_refused_from_the_end_record_before_the_directory_is_parsed(tmp_path):
    path = tmp_path / "many.zip"
    many_members_bomb(path, 60_000)
    with rss_growth() as memory, pytest.raises(BundleError, match="refused: 60000 members, more than the 16"):
        read_bundle(path)
    assert memory["mb"] <= 50, memory


def test_an_archive_over_the_upload_cap_is_refused_before_it_is_opened():
    data = small_bundle()
    with pytest.raises(BundleError, match=f"refused: {len(data)} bytes, more than the 1000"):
        read_bundle(data, Limits(max_bytes=1000))


def test_a_member_over_its_cap_is_refused():
    with pytest.raises(BundleError, match=r"refused: config.yaml would decompress to \d+ bytes, more than 100"):
        read_bundle(small_bundle(), Limits(max_member_bytes=100))


def test_a_member_that_is_no_bundle_member_is_refused():
    contents = members(small_bundle())
    contents["../../etc/cron.d/evil"] = b"* * * * * root sh"
    with pytest.raises(BundleError, match="not the ones a bundle holds"):
        read_bundle(zipped(contents))


# ------------------------------------------------------------------ member schemas
def parquet(columns: dict) -> bytes:
    out = io.BytesIO()
    pq.write_table(pa.table(columns), out)
    return out.getvalue()


GOOD_METRICS = {"step": pa.array([1], pa.int64()), "metric": pa.array(["reward/mean"]),
                "value": pa.array([0.5], pa.float64()), "wall_time": pa.array([1.0], pa.float64())}  # fmt: skip

MALFORMED = [
    ("config.yaml", b"seed: [1, 2\n", "config.yaml: not valid YAML"),
    ("config.yaml", b'seed: 0\nmethod: "gr\\0po"\n', "config.yaml: holds a NUL character"),
    ("config.yaml", b"a: &x [1, 2]\nb: *x\n", "config.yaml: not valid YAML (aliases are not allowed"),
    ("config.yaml", b"seed: .inf\n", "config.yaml: a number that is not finite"),
    ("record.json", b'{"seeds": {"run": "zero"}}', "record.json: seeds.run:"),
    ("record.json", b'{"host": "a\\u0000b"}', "record.json: host: Value error, holds a NUL character"),
    ("record.json", b'{"capture_seconds": NaN}', "record.json: not valid JSON (NaN is not a finite number)"),
    ("record.json", b'{"host": "' + b"x" * 300 + b'"}', "record.json: host: String should have at most 200"),
    ("record.json", b'{"surprise": 1}', "record.json: surprise: Extra inputs are not permitted"),
    ("record.json", b"[1, 2]", "record.json: the record must be an object"),
    ("metrics.parquet", b"PAR1 not really", "metrics.parquet: not a readable parquet file"),
    ("metrics.parquet", parquet({**GOOD_METRICS, "value": pa.array([math.inf])}), "metrics.parquet: row 0, value:"),
    ("metrics.parquet", parquet({**GOOD_METRICS, "step": pa.array([-1], pa.int64())}), "metrics.parquet: row 0, step:"),
    ("metrics.parquet", parquet({**GOOD_METRICS, "metric": pa.array(["a\0b"])}), "metrics.parquet: row 0, metric:"),
    ("metrics.parquet", parquet({"step": GOOD_METRICS["step"]}), "metrics.parquet: columns must be"),
    ("samples.jsonl", b'{"step": 1, "prompt": 5}\n', "samples.jsonl: line 1, prompt: Input should be a valid string"),
    ("samples.jsonl", b'{"step": 1}\n{"step": "two"}\n', "samples.jsonl: line 2, step:"),
    ("samples.jsonl", b'{"step": 1, "reward": Infinity}\n', "samples.jsonl: line 1: not valid JSON"),
    ("samples.jsonl", b"not json\n", "samples.jsonl: line 1: not valid JSON"),
    ("artifacts.json", b'[{"path": "a", "kind": "checkpoint", "sha256": "nothex"}]', "artifacts.json: item 0, sha256"),
    ("artifacts.json", b'{"path": "a"}', "artifacts.json: must be a list"),
    ("signature.json", b'{"algorithm": "rsa", "public_key": "x", "signature": "y"}', "signature.json: algorithm"),
    ("signature.json", b"\xff\xfe", "signature.json: not valid JSON"),
]


@pytest.mark.parametrize(("member", "content", "message"), MALFORMED, ids=[f"{m}-{i}" for i, (m, _, _) in
                                                                         enumerate(MALFORMED)])  # fmt: skip
def test_a_malformed_member_is_refused_with_its_name_and_field(member, content, message):
    data = resealed(small_bundle(new_signing_key()), {member: content})
    with pytest.raises(BundleError) as refused:
        read_bundle(data)
    assert message in str(refused.value)


@pytest.mark.parametrize(
    ("manifest", "message"),
    [
        ({"format": "rolloutlab-bundle/1", "files": {}, "bundle_sha256": "0" * 64, "extra": 1}, "extra: Extra inputs"),
        ({"format": "rolloutlab-bundle/1", "files": {"config.yaml": "NOPE"}, "bundle_sha256": "0" * 64},
         "files.config.yaml: String should match pattern"),
        ({"format": "other/9", "files": {}, "bundle_sha256": "0" * 64},
         "format: Input should be 'rolloutlab-bundle/1'"),
    ],
)  # fmt: skip
def test_a_malformed_manifest_is_refused_with_its_field(manifest, message):
    data = resealed(small_bundle(), {"manifest.json": json.dumps(manifest).encode()})
    with pytest.raises(BundleError, match="manifest.json: ") as refused:
        read_bundle(data)
    assert message in str(refused.value)


def test_the_optional_diff_redactions_of_the_record_is_accepted():
    record = {"code": {"revision": "a" * 40, "dirty": True, "diff_sha256": "b" * 64, "diff": "x", "diff_redactions": 2},
              "diff_redactions": 2}  # fmt: skip
    assert read_bundle(small_bundle(record=record)).record["code"]["diff_redactions"] == 2


# ------------------------------------------------------------------ signatures
def test_a_signed_bundle_names_its_signer_and_is_trusted_only_by_who_trusts_it():
    key, other = new_signing_key(), new_signing_key()
    bundle = read_bundle(small_bundle(key))
    assert bundle.signer == public_key_text(key) and not bundle.signature_problem
    assert trusted(bundle, {public_key_text(key)}) and not trusted(bundle, {public_key_text(other)})


def test_a_resealed_edited_bundle_keeps_an_old_signature_that_no_longer_matches():
    key = new_signing_key()
    data = small_bundle(key)
    edited = parquet({**GOOD_METRICS, "value": pa.array([0.99], pa.float64())})
    assert edited != members(data)["metrics.parquet"]
    bundle = read_bundle(resealed(data, {"metrics.parquet": edited}))  # hashes recomputed, not re-signed
    assert bundle.signer is None and "does not match the manifest" in bundle.signature_problem
    assert not trusted(bundle, {public_key_text(key)})


def test_an_unsigned_bundle_says_so():
    bundle = read_bundle(small_bundle())
    assert bundle.signer is None and bundle.signature_problem == "not signed"


def test_keys_load_from_pem_or_raw_base64():
    key = new_signing_key()
    from workers.bundle import signing_key_pem

    raw = key.private_bytes_raw()
    assert public_key_text(load_signing_key(signing_key_pem(key))) == public_key_text(key)
    assert public_key_text(load_signing_key(base64.b64encode(raw).decode())) == public_key_text(key)


def test_the_same_run_signed_by_the_same_key_bundles_to_the_same_bytes():
    key = new_signing_key()
    assert small_bundle(key) == small_bundle(key)


def test_the_cli_makes_a_key_that_signs_a_bundle_and_verify_names_the_signer(tmp_path, capsys):
    from workers.cli import main

    key_file = tmp_path / "key.pem"
    assert main(["bundle-key", "--out", str(key_file)]) == 0
    public = capsys.readouterr().out.split()[-1]
    assert oct(key_file.stat().st_mode & 0o777) == "0o600"
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "config.yaml").write_text("seed: 0\n")
    (run_dir / "metrics.jsonl").write_text('{"step": 1, "reward/mean": 0.5}\n')
    assert main(["bundle", str(run_dir), "--out", str(tmp_path / "b.zip"), "--key", str(key_file)]) == 0
    assert main(["verify-bundle", str(tmp_path / "b.zip")]) == 0
    assert f"signed by {public}" in capsys.readouterr().out
    assert read_bundle(tmp_path / "b.zip").signer == public
