"""Redacting secrets from text a run's record keeps (the uncommitted git diff), with detect-secrets.

    text, count = redact_secrets(diff)      # each detected secret replaced by [REDACTED <type>]

detect-secrets scans the text with its default plugins and filters (AWS keys, private
keys, keyword assignments such as `password = "..."`, URLs with a password, tokens of
known services, and quoted high-entropy strings, which includes quoted hex digests), and
the plugins of workers/secret_patterns.py (Hugging Face, OpenAI, Anthropic, GitHub, GitLab
and this platform's tokens whole, bearer tokens, `SECRET_NAME=value` assignments).
Every occurrence of a detected value is replaced, wherever it appears in the text; a
private key's whole body is replaced, from its BEGIN line to its END line, keeping the
diff's +/-/space prefix of each line so the result still reads as a diff. `count` is the
number of distinct secrets (a private key block counts once).
"""

from __future__ import annotations

import re
import tempfile
from contextlib import contextmanager
from pathlib import Path

from detect_secrets import SecretsCollection
from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
from detect_secrets.settings import transient_settings

from workers import secret_patterns

PRIVATE_KEY_TYPE = "Private Key"
KEY_BLOCK = re.compile(r"(-----BEGIN[A-Z0-9 ]*PRIVATE KEY[A-Z0-9 ]*-----)(.*?)(-----END[A-Z0-9 ]*PRIVATE KEY)", re.S)
KEY_BODY = re.compile(r"[A-Za-z0-9+/=]{4,}")  # base64 runs beside a BEGIN/END marker


def detect(text: str) -> list[tuple[int, str, str]]:
    """(line number, secret type, secret value) of each finding, in line order (0: a service token, found
    wherever it is)."""
    with tempfile.TemporaryDirectory(prefix="rolloutlab-scan-") as folder:
        # a .diff name: detect-secrets picks its generic rules (not those of one language)
        Path(folder, "uncommitted.diff").write_text(text, encoding="utf-8", errors="surrogateescape")
        with scanning_settings():
            found = SecretsCollection(root=folder)
            found.scan_file("uncommitted.diff")
    found = {(s.line_number, s.type, s.secret_value) for _, s in found if s.secret_value}
    return sorted(found | {(0, kind, token) for kind, token in secret_patterns.service_tokens(text)})


@contextmanager
def scanning_settings():
    """detect-secrets configured with plugins_used(). Its map of plugin names to classes is cached once made, so
    it is made again inside (to find ours) and after (to forget them)."""
    with transient_settings({"plugins_used": plugins_used()}):
        get_mapping_from_secret_type_to_class.cache_clear()
        try:
            yield
        finally:
            get_mapping_from_secret_type_to_class.cache_clear()


def plugins_used() -> list[dict]:
    """detect-secrets' own plugins, less those secret_patterns replaces, and secret_patterns' (by file)."""
    own = [{"name": plugin.__name__} for plugin in get_mapping_from_secret_type_to_class().values()]
    path = f"file://{Path(secret_patterns.__file__).resolve()}"
    ours = [{"name": plugin.__name__, "path": path} for plugin in secret_patterns.PLUGINS]
    return [plugin for plugin in own if plugin["name"] not in secret_patterns.REPLACED] + ours


def redact_secrets(text: str) -> tuple[str, int]:
    """The text with every secret detect-secrets finds replaced, and how many distinct secrets that was."""
    findings = detect(text)
    key_lines = sorted({line for line, kind, _ in findings if kind == PRIVATE_KEY_TYPE})
    values: dict[str, str] = {}  # value -> type of its first finding (several plugins may report one value)
    for _, kind, value in findings:
        if kind != PRIVATE_KEY_TYPE:
            values.setdefault(value, kind)
    text, keys = redact_key_blocks(text, key_lines)
    for value in sorted(values, key=len, reverse=True):  # longest first: one value may contain another
        text = text.replace(value, f"[REDACTED {values[value]}]")
    return text, keys + len(values)


def redact_key_blocks(text: str, lines: list[int]) -> tuple[str, int]:
    """Replace the body of each private key that starts on one of these (1-based) lines."""
    starts = line_offsets(text)
    pieces, position, count = [], 0, 0
    for line in lines:
        block = KEY_BLOCK.search(text, max(starts[line - 1], position))
        if block is None:
            continue
        pieces += [text[position : block.start(2)], redact_key_body(block.group(2))]
        position, count = block.end(2), count + 1
    return "".join(pieces) + text[position:], count


def redact_key_body(body: str) -> str:
    lines = body.split("\n")
    if len(lines) == 1:  # the key on one line, its line breaks escaped (as in JSON): all of it goes
        return "[REDACTED]"
    # lines[0] is the rest of the BEGIN line, lines[-1] the start of the END line; every line of the
    # diff begins with its prefix character (+, - or a space), which is kept
    middle = [line[:1] + ("[REDACTED]" if line[1:].strip() else line[1:]) for line in lines[1:-1]]
    ends = [KEY_BODY.sub("[REDACTED]", lines[0]), lines[-1][:1] + KEY_BODY.sub("[REDACTED]", lines[-1][1:])]
    return "\n".join([ends[0], *middle, ends[1]])


def line_offsets(text: str) -> list[int]:
    offsets = [0]
    for match in re.finditer("\n", text):
        offsets.append(match.end())
    return offsets
