"""Secrets detect-secrets' own plugins miss or cut short (used by workers/redaction.py).

Each reports the whole secret: its value is what the redaction replaces. detect-secrets' GitHub and GitLab
detectors report only a token's prefix (their patterns capture it alone), so they are replaced here, not added to.

- service tokens by their published prefixes: Hugging Face (`hf_`), OpenAI (`sk-`, `sk-proj-`, ...), Anthropic
  (`sk-ant-`), GitHub (`ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_`, `github_pat_`), GitLab (`glpat-`, ...), and this
  platform's own API tokens (`rl_`);
- a bearer token in an Authorization header;
- an assignment to a variable whose name says it holds a secret, as environment files and shell scripts write
  them (`AWS_SECRET_ACCESS_KEY=...`, `export HF_TOKEN=...`, unquoted), and the AWS credentials file's keys.
"""

from __future__ import annotations

import re

from detect_secrets.plugins.base import RegexBasedDetector

# the value of an assignment: no quote or space in it, at least 8 characters, not a reference ($VAR, ${VAR})
ASSIGNED = r"""\s*[=:]\s*["']?([^\s"'$<{][^\s"']{7,})"""
# a name with a word of its own that says secret: AWS_SECRET_ACCESS_KEY, HF_TOKEN, DB_PASSWORD (not TOKENIZER_PATH)
SECRET_WORD = r"(?:SECRET|TOKEN|PASSWORD|PASSWD|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIAL)S?"
SECRET_NAME = r"(?:[A-Z0-9]+_)*" + SECRET_WORD + r"(?:_[A-Z0-9]+)*"


SERVICE_TOKENS = [  # (service, a token as it issues them): the prefix says what it is, whatever the line around it
    ("Hugging Face Token", re.compile(r"\bhf_[A-Za-z0-9]{30,}")),
    ("Anthropic Key", re.compile(r"\bsk-ant-[A-Za-z0-9_-]{20,}")),
    ("OpenAI Key", re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}")),
    ("GitHub Token", re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9_]{30,}")),
    ("GitHub Token", re.compile(r"\bgithub_pat_[A-Za-z0-9_]{30,}")),  # fine-grained
    ("GitLab Token", re.compile(r"\b(?:glpat|gldt|glft|glsoat|glrt|glcbt)-[A-Za-z0-9_-]{20,}")),
    ("Rollout Lab Token", re.compile(r"\brl_[A-Za-z0-9_-]{32,}")),  # this platform's (rolloutlab/accounts/models.py)
]


def service_tokens(text: str) -> set[tuple[str, str]]:
    """(type, token) of every service token in the text. Not a detect-secrets plugin: its heuristic filters
    would drop a token on a line that looks like an indirect reference (`client = OpenAI(api_key="sk-...")`)."""
    return {(kind, match.group()) for kind, pattern in SERVICE_TOKENS for match in pattern.finditer(text)}


class BearerTokenDetector(RegexBasedDetector):
    secret_type = "Bearer Token"
    denylist = [re.compile(r"\b[Bb]earer\s+([A-Za-z0-9._~+/-]{16,}=*)")]


class SecretAssignmentDetector(RegexBasedDetector):
    """NAME=value where NAME says it is a secret (upper case, as environment variables are written), and the
    AWS credentials file's lower-case keys."""

    secret_type = "Secret Assignment"
    denylist = [
        re.compile(r"\b" + SECRET_NAME + r"\b" + ASSIGNED),
        re.compile(r"\b(?:aws_secret_access_key|aws_session_token)" + ASSIGNED, re.IGNORECASE),
    ]


PLUGINS = [BearerTokenDetector, SecretAssignmentDetector]
REPLACED = {"GitHubTokenDetector", "GitLabTokenDetector"}  # detect-secrets' own, which report a prefix alone
