"""Settings from the environment: what a deployment is refused, and the documented production block.

Each case imports the settings (or runs manage.py) in a fresh process with exactly the
environment under test, as a server would start.
"""

from __future__ import annotations

import base64
import os
import re
import secrets
import subprocess
import sys

import pytest

from tests.services import TEST_SIGNING_KEY
from tests.support.live import ROOT

MANAGE_CHECK = ["manage.py", "check", "--deploy", "--fail-level", "WARNING"]
OWN_KEY = secrets.token_urlsafe(50)  # a key a deployment may use
TEAM = {"DATABASE_URL": "postgres://rolloutlab:pw@db.internal:5432/rolloutlab", "REDIS_URL": "redis://cache:6379/0"}


def start(env: dict[str, str], code: str = "import rolloutlab.settings", tmp_path=None, args=None):
    """Python with only PATH, the import path and `env`: none of the test session's own variables."""
    base = {"PATH": os.environ["PATH"], "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "platform")])}
    base["BUNDLE_SIGNING_KEY"] = TEST_SIGNING_KEY  # a team deployment needs one; the refusals tested here are others
    if tmp_path is not None:
        base.update(SQLITE_PATH=str(tmp_path / "db.sqlite3"), STATIC_ROOT=str(tmp_path / "static"))
    command = [sys.executable, *(args or ["-c", code])]
    return subprocess.run(command, cwd=ROOT, env={**base, **env}, capture_output=True, text=True)


def refusal(result: subprocess.CompletedProcess) -> str:
    assert result.returncode != 0, "the settings were accepted"
    assert "ImproperlyConfigured" in result.stderr, result.stderr
    return result.stderr.strip().splitlines()[-1]


def loaded(env: dict[str, str], names: list[str], tmp_path) -> dict:
    import json

    code = "import django, json, os; os.environ['DJANGO_SETTINGS_MODULE'] = 'rolloutlab.settings'; django.setup(); "
    code += f"from django.conf import settings; print(json.dumps({{k: getattr(settings, k) for k in {names!r}}}))"
    result = start(env, code, tmp_path)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_a_database_url_without_a_redis_url_is_refused(tmp_path):
    message = refusal(start({"DATABASE_URL": TEAM["DATABASE_URL"], "SECRET_KEY": OWN_KEY}, tmp_path=tmp_path))
    assert "DATABASE_URL is set but REDIS_URL is not" in message
    assert "inside the web process" in message


def test_a_redis_url_without_a_database_url_is_refused(tmp_path):
    message = refusal(start({"REDIS_URL": TEAM["REDIS_URL"], "SECRET_KEY": OWN_KEY}, tmp_path=tmp_path))
    assert "REDIS_URL is set but DATABASE_URL is not" in message


def test_team_mode_refuses_the_in_process_executor(tmp_path):
    message = refusal(start({**TEAM, "SECRET_KEY": OWN_KEY, "RUN_EXECUTOR": "inprocess"}, tmp_path=tmp_path))
    assert "RUN_EXECUTOR=inprocess is for the embedded mode only" in message


def test_an_unknown_executor_is_refused(tmp_path):
    assert "RUN_EXECUTOR must be celery or inprocess" in refusal(start({"RUN_EXECUTOR": "thread"}, tmp_path=tmp_path))


def test_team_mode_refuses_a_missing_secret_key(tmp_path):
    assert "SECRET_KEY (or SECRET_KEY_FILE) must be set" in refusal(start(TEAM, tmp_path=tmp_path))


def test_team_mode_refuses_the_embedded_secret_key(tmp_path):
    message = refusal(start({**TEAM, "SECRET_KEY": "embedded-mode-only-not-a-secret"}, tmp_path=tmp_path))
    assert "SECRET_KEY is a published example value" in message


def test_team_mode_refuses_the_secret_key_of_env_example(tmp_path):
    lines = (ROOT / ".env.example").read_text().splitlines()
    example = dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))
    key_file = tmp_path / "secret_key"
    key_file.write_text(example["SECRET_KEY"] + "\n")
    message = refusal(start({**TEAM, "SECRET_KEY_FILE": str(key_file)}, tmp_path=tmp_path))
    assert "SECRET_KEY is a published example value" in message


@pytest.mark.parametrize("key", ["x", "k" * 50, "change-me", "abcd" * 20])
def test_team_mode_refuses_a_weak_or_placeholder_secret_key(tmp_path, key):
    message = refusal(start({**TEAM, "SECRET_KEY": key}, tmp_path=tmp_path))
    assert "SECRET_KEY is too weak" in message or "SECRET_KEY is a published example value" in message


def test_team_mode_with_its_own_secret_runs_on_celery(tmp_path):
    values = loaded({**TEAM, "SECRET_KEY": secrets.token_urlsafe(50)}, ["RUN_EXECUTOR", "EMBEDDED"], tmp_path)
    assert values == {"RUN_EXECUTOR": "celery", "EMBEDDED": False}


def test_the_embedded_mode_needs_no_variable(tmp_path):
    values = loaded({}, ["RUN_EXECUTOR", "EMBEDDED", "DEBUG", "SECURE_SSL_REDIRECT"], tmp_path)
    assert values == {"RUN_EXECUTOR": "inprocess", "EMBEDDED": True, "DEBUG": True, "SECURE_SSL_REDIRECT": False}


def test_the_https_settings_come_from_the_environment(tmp_path):
    env = {"SECURE_HSTS_SECONDS": "3600", "SECURE_PROXY_SSL_HEADER": "HTTP_X_FORWARDED_PROTO,https",
           "SESSION_COOKIE_SECURE": "True", "CSRF_TRUSTED_ORIGINS": "https://a.example, https://b.example"}  # fmt: skip
    names = ["SECURE_HSTS_SECONDS", "SECURE_PROXY_SSL_HEADER", "SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE",
             "CSRF_TRUSTED_ORIGINS"]  # fmt: skip
    assert loaded(env, names, tmp_path) == {
        "SECURE_HSTS_SECONDS": 3600,
        "SECURE_PROXY_SSL_HEADER": ["HTTP_X_FORWARDED_PROTO", "https"],
        "SESSION_COOKIE_SECURE": True,
        "CSRF_COOKIE_SECURE": False,
        "CSRF_TRUSTED_ORIGINS": ["https://a.example", "https://b.example"],
    }


@pytest.mark.parametrize("value", ["X-Forwarded-Proto", "HTTP_X_FORWARDED_PROTO", "HTTP_X,https,more"])
def test_a_malformed_proxy_header_is_refused(value, tmp_path):
    assert "SECURE_PROXY_SSL_HEADER must be HEADER,VALUE" in refusal(
        start({"SECURE_PROXY_SSL_HEADER": value}, tmp_path=tmp_path)
    )


def documented_production_env() -> dict[str, str]:
    """The ```env block of docs/deploy.md's Production section, each <placeholder> filled with a fresh secret."""
    text = (ROOT / "docs" / "deploy.md").read_text()
    section = text[text.index("## Production") :]
    block = re.search(r"^```env\n(.*?)^```", section, re.S | re.M).group(1)
    env = dict(line.split("=", 1) for line in block.splitlines() if line.strip())
    return {name: re.sub(r"<[^>]+>", fresh_secret, value) for name, value in env.items()}


def fresh_secret(placeholder: re.Match) -> str:
    """A value of the kind the placeholder asks for: the signing key is 32 random bytes in base64."""
    if "signing-key" in placeholder.group(0):
        return base64.b64encode(os.urandom(32)).decode()
    return secrets.token_urlsafe(50)


def check_deploy(env: dict[str, str], tmp_path) -> subprocess.CompletedProcess:
    return start(env, tmp_path=tmp_path, args=MANAGE_CHECK)


def test_the_documented_production_env_passes_the_deploy_check(tmp_path):
    env = documented_production_env()
    assert {"SECURE_SSL_REDIRECT", "SECURE_HSTS_SECONDS", "SECURE_PROXY_SSL_HEADER", "SECRET_KEY"} <= set(env)
    result = check_deploy(env, tmp_path)
    assert result.returncode == 0, result.stderr
    assert "System check identified no issues" in result.stdout, result.stdout + result.stderr


def test_the_deploy_check_warns_without_the_https_settings(tmp_path):
    """The test above could fail: the same env less the HTTPS lines fails the check."""
    env = {k: v for k, v in documented_production_env().items() if not k.startswith(("SECURE_", "SESSION_", "CSRF_C"))}
    result = check_deploy(env, tmp_path)
    assert result.returncode != 0
    for warning in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert warning in result.stderr
