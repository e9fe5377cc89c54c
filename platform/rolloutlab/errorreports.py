"""What Django's error reports (the DEBUG technical 500 page, the admins' error mail) may show.

Django's own filter hides settings whose names look secret (KEY, PASS, TOKEN...), but
not DATABASE_URL, REDIS_URL or CELERY_BROKER_URL, nor a Redis URL inside CHANNEL_LAYERS,
nor a local variable that holds a connection URL: each of those carries a password.
This filter hides the URL settings whole, and the password of any URL anywhere in a
report (settings, request META, frame variables), keeping scheme, user and host for
debugging. settings.DEFAULT_EXCEPTION_REPORTER_FILTER names it.
"""

from __future__ import annotations

import re
from pprint import pformat

from django.views.debug import SafeExceptionReporterFilter

# scheme://user:PASSWORD@host (user may be empty, as in redis://:password@host)
URL_PASSWORD = re.compile(r"(?P<head>\b[a-z][a-z0-9+.-]*://[^\s/:@'\"]*:)[^\s@/'\"]+(?=@)", re.I)


def mask_url_passwords(text: str, substitute: str) -> str:
    return URL_PASSWORD.sub(lambda m: m.group("head") + substitute, text)


class _Masked:
    """Stands in for a frame variable whose repr held a password: the report prints this repr instead."""

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return self.text


class SecretUrlFilter(SafeExceptionReporterFilter):
    hidden_settings = re.compile(
        "API|AUTH|TOKEN|KEY|SECRET|PASS|SIGNATURE|HTTP_COOKIE|DATABASE_URL|REDIS_URL|BROKER_URL|RESULT_BACKEND", re.I
    )  # Django's list, and the URL settings that carry passwords

    def cleanse_setting(self, key, value):
        cleansed = super().cleanse_setting(key, value)
        if type(cleansed) is str:  # not a lazy object posing as one (axes has some in settings)
            return mask_url_passwords(cleansed, self.cleansed_substitute)
        return cleansed

    def get_traceback_frame_variables(self, request, tb_frame):
        variables = super().get_traceback_frame_variables(request, tb_frame)
        return [(name, self.mask_variable(value)) for name, value in variables]

    def mask_variable(self, value):
        try:
            text = pformat(value)
        except Exception:  # noqa: BLE001 - a broken __repr__: the report shows its own error for it
            return value
        if URL_PASSWORD.search(text):
            return _Masked(mask_url_passwords(text, self.cleansed_substitute))
        return value
