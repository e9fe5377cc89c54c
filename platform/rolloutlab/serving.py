"""What daphne does with a request body before Django sees it: bounded, and never parsed.

daphne's request (Twisted's) reads the whole body and then, for a multipart POST, parses it in memory into
arguments that nothing uses: Django parses the body itself, under its own caps, once the ASGI application
has it. That parse ran for any page, before CSRF, login or the upload caps, so an anonymous 1 GiB POST took
the web process to 15 GB. BoundedRequest turns it off and refuses a body over its route's cap with 413 before
reading it (its Content-Length) or as soon as a streamed (chunked) body goes past it:

- the routes that take a bundle upload (audit's import page, the API's POST /api/bundles) accept
  BUNDLE_MAX_BYTES and a form's slack, spooled to a temporary file;
- every other route accepts REQUEST_MAX_BYTES (a form, a config, an API call).

daphne hands the ASGI application a body whole (every chunk queued at once), so a body in flight costs its size in
memory: at most UPLOADS_AT_ONCE bodies over REQUEST_MAX_BYTES are taken at a time, and another gets 503 with
Retry-After until one ends. The web process's memory is then bounded whoever sends what.

asgi.py installs it into daphne (`install()`), so every way of serving the application (daphne's command line,
`manage.py demo`, runserver) bounds bodies alike; the documented reverse proxy sets the same caps
(docs/deploy.md).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from daphne import http_protocol
from django.conf import settings
from django.urls import Resolver404, resolve

UPLOAD_ROUTES = {"audit:import", "api:import_bundle"}  # the views that read a bundle upload
REFUSAL = (
    b"HTTP/1.1 %s\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\nRetry-After: 60\r\n"
    b"Content-Length: %d\r\n\r\n%s"
)


def body_limit(target: bytes) -> int:
    """The most bytes of body a request for `target` (the request line's path and query) may send."""
    try:
        route = resolve(urlsplit(target.decode("latin-1")).path).view_name
    except (Resolver404, UnicodeDecodeError, ValueError):
        route = ""
    if route in UPLOAD_ROUTES:
        return settings.BUNDLE_MAX_BYTES + settings.BUNDLE_FORM_SLACK
    return settings.REQUEST_MAX_BYTES


class BoundedRequest(http_protocol.WebRequest):
    large_in_flight = 0  # requests of this process receiving a body over REQUEST_MAX_BYTES (one reactor thread)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._parsePOSTFormSubmission = False  # Django parses the body, under its caps; this parse was a copy
        self.limit, self.received, self.refused = settings.REQUEST_MAX_BYTES, 0, False

    def gotLength(self, length: int | None) -> None:
        """Called once the headers are in, with the declared length (None for a chunked body)."""
        self.limit = body_limit(getattr(self.channel, "_path", b""))  # the request line, parsed by the channel
        if length is not None and length > self.limit:
            self.refuse(b"413 Content Too Large", f"the request body is larger than {self.limit} bytes, the most "
                        "this address accepts")  # fmt: skip
            return
        large = length is None or length > settings.REQUEST_MAX_BYTES  # chunked: its size is known only at its end
        if self.limit > settings.REQUEST_MAX_BYTES and large and not self.admit_large():
            return
        super().gotLength(length)

    def admit_large(self) -> bool:
        """A place among the large bodies in flight, given back when this request ends however it ends."""
        if BoundedRequest.large_in_flight >= settings.UPLOADS_AT_ONCE:
            self.refuse(b"503 Service Unavailable", "other uploads are being received; try again in a minute")
            return False
        BoundedRequest.large_in_flight += 1
        self.notifyFinish().addBoth(self.leave_large)
        return True

    @staticmethod
    def leave_large(result):
        BoundedRequest.large_in_flight -= 1
        return None  # a connection lost is this request's end, not an error to log

    def handleContentChunk(self, data: bytes) -> None:
        if self.refused:
            return
        self.received += len(data)
        if self.received > self.limit:  # a chunked body, or one longer than it said
            self.refuse(b"413 Content Too Large", f"the request body is larger than {self.limit} bytes")
            return
        super().handleContentChunk(data)

    def requestReceived(self, command, path, version) -> None:
        if not self.refused:
            super().requestReceived(command, path, version)

    def refuse(self, status: bytes, why: str) -> None:
        """The status and why in words, and the connection closed: the rest of the body is never read."""
        self.refused = True
        message = f"{why}\n".encode()
        self.channel.transport.write(REFUSAL % (status, len(message), message))
        self.channel.transport.loseConnection()


def install() -> None:
    """daphne builds each connection's requests from its module's WebRequest: this one instead."""
    http_protocol.WebRequest = BoundedRequest
