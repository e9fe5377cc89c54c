"""This deployment's bundle signing key and the keys it trusts (settings BUNDLE_SIGNING_KEY, BUNDLE_TRUSTED_KEYS).

Outside the embedded mode the key must be configured (settings fail fast without
one); the embedded mode makes one on first use under var/, so `make demo` signs too.
"""

from __future__ import annotations

import os
from functools import cache

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from workers.bundle import load_public_key, load_signing_key, new_signing_key, public_key_text, signing_key_pem
from workers.errors import UserError


@cache
def deployment_key():
    """The Ed25519 private key this deployment signs its exports with."""
    text = settings.BUNDLE_SIGNING_KEY
    if not text:
        text = auto_key(settings.BUNDLE_SIGNING_KEY_AUTO)
    try:
        return load_signing_key(text)
    except UserError as exc:
        raise ImproperlyConfigured(f"BUNDLE_SIGNING_KEY: {exc}") from None


def auto_key(path) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text()
    with os.fdopen(fd, "w") as handle:
        handle.write(signing_key_pem(new_signing_key()))
    return path.read_text()


@cache
def trusted_keys() -> frozenset[str]:
    """The public keys whose signatures make an import verified: this deployment's own and BUNDLE_TRUSTED_KEYS."""
    keys = {public_key_text(deployment_key())}
    for text in settings.BUNDLE_TRUSTED_KEYS:
        try:
            keys.add(load_public_key(text))
        except UserError as exc:
            raise ImproperlyConfigured(f"BUNDLE_TRUSTED_KEYS: {exc}") from None
    return frozenset(keys)


def check_settings() -> None:
    """Parse the configured keys now (ImproperlyConfigured if one is not a key); makes no key."""
    if settings.BUNDLE_SIGNING_KEY:
        deployment_key()
        trusted_keys()
    for text in settings.BUNDLE_TRUSTED_KEYS:
        try:
            load_public_key(text)
        except UserError as exc:
            raise ImproperlyConfigured(f"BUNDLE_TRUSTED_KEYS: {exc}") from None


def forget() -> None:
    """Read the settings afresh (tests that change them)."""
    deployment_key.cache_clear()
    trusted_keys.cache_clear()
