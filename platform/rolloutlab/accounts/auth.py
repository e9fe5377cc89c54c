"""Who is calling the JSON API: a logged-in session, or `Authorization: Bearer <token>`.

Only a request that authenticated with a valid token skips the CSRF check: a
cookie is never involved there. Any other request, whatever headers it sends,
is a session request and must pass CSRF on a state change.
"""

from __future__ import annotations

from django.db.models import Q
from django.utils import timezone
from ninja.errors import AuthenticationError
from ninja.security import APIKeyQuery, HttpBearer, django_auth

from rolloutlab.accounts.models import ApiToken, hash_token
from rolloutlab.accounts.sharing import grant_for

BEARER = "Bearer "


def token_user(header: str):
    """The active user a live token belongs to, or None (unknown, revoked or expired)."""
    now = timezone.now()
    token = (
        ApiToken.objects.select_related("user")
        .filter(digest=hash_token(header[len(BEARER) :].strip()), revoked_at__isnull=True)
        .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))
        .first()
    )
    if token is None or not token.user.is_active:
        return None
    ApiToken.objects.filter(id=token.id).update(last_used_at=now)
    return token.user


def uses_token(request) -> bool:
    return request.headers.get("Authorization", "").startswith(BEARER)


def api_user(request):
    """(user or None, whether a token authenticated it)."""
    if uses_token(request):
        return token_user(request.headers["Authorization"])
    return request.user if request.user.is_authenticated else None


class TokenAuth(HttpBearer):
    def authenticate(self, request, token):
        """A request that shows a token stands or falls by it: an unknown, revoked or expired one is a 401,
        never a fall-back to the session cookie that came along."""
        user = token_user(f"{BEARER}{token}")
        if user is None:
            raise AuthenticationError()
        return user


class ShareAuth(APIKeyQuery):
    """?share=<a share link's token>: read-only access to the link's runs (only on GET endpoints)."""

    param_name = "share"

    def authenticate(self, request, key):
        grant = grant_for(key) if key else None
        if grant is None:
            raise AuthenticationError()
        return grant


MEMBERS = [TokenAuth(), django_auth]  # who may call any endpoint
READERS = [*MEMBERS, ShareAuth()]  # who may call a reading endpoint: a share link's holder too
