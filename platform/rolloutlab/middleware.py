"""Errors of the JSON API are JSON, whoever answered: Django's own 404/405/403 (CSRF)/400 included."""

from __future__ import annotations

from http import HTTPStatus

from django.http import JsonResponse

API_PREFIX = "/api/"


class JsonApiErrors:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if not request.path.startswith(API_PREFIX) or response.status_code < 400:
            return response
        if response.get("Content-Type", "").startswith("application/json"):
            return response
        message = {404: f"no such endpoint: {request.path}", 405: f"{request.method} is not allowed here"}.get(
            response.status_code, reason_of(response.status_code)
        )
        answer = JsonResponse({"error": message, "fields": {}}, status=response.status_code)
        if response.has_header("Allow"):
            answer["Allow"] = response["Allow"]
        return answer


def reason_of(status: int) -> str:
    try:
        return HTTPStatus(status).phrase.lower()
    except ValueError:
        return "error"
