"""Where a request came from, for the login throttle (django-axes keys a lockout on username and address).

Straight to daphne, the peer's address. Behind the TLS proxy the deployment documents (SECURE_PROXY_SSL_HEADER
set), the peer is always the proxy: keyed on it, five failures for a username locked that user out for everyone.
There the client is the last X-Forwarded-For entry, the one the proxy appended for the peer it saw; a client may
write entries before it, never that one.
"""

from __future__ import annotations

import ipaddress

from django.conf import settings


def client_address(request) -> str | None:
    if settings.SECURE_PROXY_SSL_HEADER:
        appended = request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")[-1].strip()
        try:
            return str(ipaddress.ip_address(appended))
        except ValueError:  # no header, or not an address: the proxy is not the documented one
            pass
    return request.META.get("REMOTE_ADDR")
