"""Who is calling the JSON API: a logged-in session, or `Authorization: Bearer <token>`."""

from __future__ import annotations

from functools import wraps

from django.http import JsonResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt

from rolloutlab.accounts.models import ApiToken, hash_token


def api_user(request):
    header = request.headers.get("Authorization", "")
    if header.startswith("Bearer "):
        token = ApiToken.objects.select_related("user").filter(digest=hash_token(header[7:].strip())).first()
        if token is None or not token.user.is_active:
            return None
        ApiToken.objects.filter(id=token.id).update(last_used_at=timezone.now())
        return token.user
    return request.user if request.user.is_authenticated else None


def api_login_required(view):
    """JSON 401 instead of a redirect; token requests skip CSRF (no cookie is involved)."""

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        user = api_user(request)
        if user is None:
            return JsonResponse(
                {"error": "authentication required: log in or send 'Authorization: Bearer <token>'"}, status=401
            )
        request.user = user
        if not request.headers.get("Authorization") and request.method not in ("GET", "HEAD", "OPTIONS"):
            from django.middleware.csrf import CsrfViewMiddleware

            reason = CsrfViewMiddleware(lambda r: None).process_view(request, None, (), {})
            if reason is not None:
                return JsonResponse({"error": "CSRF check failed"}, status=403)
        return view(request, *args, **kwargs)

    return csrf_exempt(wrapper)
