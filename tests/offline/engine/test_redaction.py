"""Secrets in the uncommitted diff a run's record keeps: found by detect-secrets, redacted before storing."""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess

import pytest

from workers.redaction import redact_secrets
from workers.repro import code_state

AWS_KEY = "AKIAIOSFODNN7EXAMPLE"  # AWS's documented example access key id
PASSWORD = "correct-horse-battery-staple"
# split, so that no secret scanner trips on this file
BEGIN, END = "-----BEGIN " + "RSA PRIVATE KEY-----", "-----END " + "RSA PRIVATE KEY-----"


def key_block() -> tuple[str, list[str]]:
    body = base64.b64encode(os.urandom(144)).decode()
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    return "\n".join([BEGIN, *lines, END]), lines


def git(repo, *args):
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args], cwd=repo, check=True,
                   capture_output=True)  # fmt: skip


@pytest.fixture
def dirty_checkout(tmp_path):
    """A git checkout whose uncommitted change adds an AWS key, a private key block and a password."""
    git(tmp_path, "init", "-q")
    (tmp_path / "train.py").write_text("LR = 1e-3\n")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-qm", "start")
    block, key_lines = key_block()
    (tmp_path / "train.py").write_text(
        f'LR = 3e-4\nAWS_ACCESS_KEY_ID = "{AWS_KEY}"\npassword = "{PASSWORD}"\nKEY = """{block}"""\nSTEPS = 10\n'
    )
    return tmp_path, key_lines


def test_the_record_keeps_the_diff_with_its_secrets_redacted(dirty_checkout):
    repo, key_lines = dirty_checkout
    code = code_state(repo)
    diff = code["diff"]
    assert code["dirty"] is True and code["diff_redactions"] == 3
    for secret in (AWS_KEY, PASSWORD, *key_lines):
        assert secret not in diff
    assert "+LR = 3e-4" in diff and "+STEPS = 10" in diff and "-LR = 1e-3" in diff  # the rest is kept as it was
    assert '+AWS_ACCESS_KEY_ID = "[REDACTED AWS Access Key]"' in diff
    assert '+password = "[REDACTED Secret Keyword]"' in diff
    assert f"{BEGIN}\n" + "\n".join(["+[REDACTED]"] * len(key_lines)) + f"\n+{END}" in diff


def test_the_diff_hash_is_that_of_the_redacted_diff(dirty_checkout):
    repo, _ = dirty_checkout
    code = code_state(repo)
    raw = subprocess.run(["git", "diff", "HEAD", "--binary"], cwd=repo, capture_output=True, text=True).stdout
    assert code["diff_sha256"] == hashlib.sha256(code["diff"].encode()).hexdigest()
    assert code["diff_sha256"] != hashlib.sha256(raw.encode()).hexdigest()


def test_a_diff_without_secrets_is_kept_byte_for_byte(tmp_path):
    git(tmp_path, "init", "-q")
    (tmp_path / "train.py").write_text("LR = 1e-3\n")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-qm", "start")
    (tmp_path / "train.py").write_text("LR = 3e-4\nWARMUP = 100\n")
    raw = subprocess.run(["git", "diff", "HEAD", "--binary"], cwd=tmp_path, capture_output=True, text=True).stdout
    code = code_state(tmp_path)
    assert (code["diff"], code["diff_redactions"]) == (raw, 0)
    assert code["diff_sha256"] == hashlib.sha256(raw.encode()).hexdigest()


def test_a_clean_checkout_has_no_diff_and_no_redactions(tmp_path):
    git(tmp_path, "init", "-q")
    (tmp_path / "train.py").write_text("LR = 1e-3\n")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-qm", "start")
    code = code_state(tmp_path)
    assert (code["dirty"], code["diff"], code["diff_sha256"], code["diff_redactions"]) == (False, None, None, 0)


def test_a_secret_repeated_on_a_line_detect_secrets_did_not_flag_is_redacted_too():
    text, count = redact_secrets(f'+password = "{PASSWORD}"\n+print("{PASSWORD}")\n')
    assert PASSWORD not in text and count == 1


def test_a_key_on_one_line_with_escaped_breaks_is_redacted_whole():
    block, lines = key_block()
    text, count = redact_secrets('+{"key": "' + block.replace("\n", "\\n") + '"}\n')
    assert count == 1 and not any(line in text for line in lines)
    assert text == '+{"key": "' + BEGIN + "[REDACTED]" + END + '"}\n'


LETTERS = "abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789"


def made_up(prefix: str, length: int, alphabet: str = LETTERS) -> str:
    """A token of the service's shape, random each run (so no scanner's list of known examples can help)."""
    return prefix + "".join(alphabet[byte % len(alphabet)] for byte in os.urandom(length))


# the shapes their services issue, each in a line as a diff would carry it
AWS_SECRET = made_up("", 40, LETTERS + "/+")
HF = made_up("hf_", 34)
OPENAI = made_up("sk-proj-", 120)
OPENAI_LEGACY = made_up("sk-", 48)
ANTHROPIC = made_up("sk-ant-api03-", 95)
GITHUB = made_up("ghp_", 36)
GITHUB_FINE = made_up("github_pat_", 82)
GITLAB = made_up("glpat-", 20)
ROLLOUTLAB = made_up("rl_", 43)
SECRET_LINES = [
    (f"+AWS_SECRET_ACCESS_KEY={AWS_SECRET}", AWS_SECRET),
    (f"+export AWS_SECRET_ACCESS_KEY={AWS_SECRET}", AWS_SECRET),
    (f"+aws_secret_access_key = {AWS_SECRET}", AWS_SECRET),  # ~/.aws/credentials
    (f"+HF_TOKEN={HF}", HF),
    (f'+huggingface_hub.login(token="{HF}")', HF),
    (f"+OPENAI_API_KEY={OPENAI}", OPENAI),
    (f'+client = OpenAI(api_key="{OPENAI_LEGACY}")', OPENAI_LEGACY),
    (f"+    anthropic_key: {ANTHROPIC}", ANTHROPIC),
    (f"+GITHUB_TOKEN={GITHUB}", GITHUB),
    (f"+  curl -H 'Authorization: token {GITHUB}' https://api.github.com/user", GITHUB),
    (f"+git clone https://{GITHUB_FINE}@github.com/lab/data.git", GITHUB_FINE),
    (f'+gitlab = Gitlab(url, private_token="{GITLAB}")', GITLAB),
    (f"+ROLLOUTLAB_TOKEN={ROLLOUTLAB}", ROLLOUTLAB),
    (f'+requests.get(url, headers={{"Authorization": "Bearer {ROLLOUTLAB}"}})', ROLLOUTLAB),
    ("+DB_PASSWORD=Tr0ub4dor-and-3", "Tr0ub4dor-and-3"),
    ("+TOKEN=x9Kq2mWv7Lp4Zr8T", "x9Kq2mWv7Lp4Zr8T"),
]


@pytest.mark.parametrize("line, secret", SECRET_LINES, ids=[f"line{i}" for i in range(len(SECRET_LINES))])
def test_common_secrets_are_redacted_whole_wherever_a_diff_carries_them(line, secret):
    diff = f"diff --git a/train.py b/train.py\n--- a/train.py\n+++ b/train.py\n@@ -1 +1,2 @@\n LR = 3e-4\n{line}\n"
    text, count = redact_secrets(diff)
    assert count >= 1 and "[REDACTED" in text
    # nothing of it is left: not the whole, not the part after a service's prefix
    assert not any(secret[i : i + 8] in text for i in range(len(secret) - 7)), text


def test_names_and_references_that_only_look_like_secrets_are_kept():
    diff = ("+    self.max_tokens = config.max_new_tokens\n+MAX_TOKENS=512\n+export HF_TOKEN=$HF_TOKEN\n"
            "+token_ids = tokenizer(text)\n+TOKENIZER_PATH=models/tokenizer.json\n")  # fmt: skip
    assert redact_secrets(diff) == (diff, 0)
