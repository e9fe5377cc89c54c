"""API tokens: a user's key for the JSON API and the SDK. Only a hash is stored."""

import hashlib
import secrets

from django.conf import settings
from django.db import models


def hash_token(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


class ApiToken(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    @classmethod
    def issue(cls, user, name: str) -> tuple["ApiToken", str]:
        """A new token; the raw key is returned once and never stored."""
        raw = "rl_" + secrets.token_urlsafe(32)
        return cls.objects.create(user=user, name=name, digest=hash_token(raw)), raw

    def __str__(self):
        return f"{self.name} ({self.user})"
