"""A request body is bounded before anything parses it (rolloutlab/serving.py), against the live daphne server.

An anonymous multipart POST used to be parsed in memory by the server before Django, CSRF or the upload caps
ran (a 200 MB body took the web process from 870 MB to 3.2 GB). Now any route but a bundle import refuses a
body over REQUEST_MAX_BYTES unread, the import routes take theirs unparsed, and at most UPLOADS_AT_ONCE such
bodies at a time.
"""

from __future__ import annotations

import socket
import threading
import time
import urllib.parse

import psutil
import pytest
from django.conf import settings

pytestmark = pytest.mark.timeout(120)

BOUNDARY = "rolloutlabboundary"


def connect(stack) -> socket.socket:
    host, port = urllib.parse.urlsplit(stack.url).netloc.split(":")
    return socket.create_connection((host, int(port)), timeout=30)


def headers(path: str, **fields: str) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", *(f"{k.replace('_', '-')}: {v}" for k, v in fields.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def answer(sock: socket.socket) -> bytes:
    """What the server wrote until it closed the connection (or 30 s passed)."""
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except (ConnectionResetError, TimeoutError):
        pass
    return received


def test_a_body_declared_over_the_cap_is_refused_before_a_byte_of_it_is_sent(live_stack):
    for path in ("/login/", "/runs/launch/", "/api/runs"):
        with connect(live_stack) as sock:
            sock.sendall(headers(path, Content_Type=f"multipart/form-data; boundary={BOUNDARY}",
                                 Content_Length=str(2**30)))  # fmt: skip
            reply = answer(sock)  # nothing of the 1 GiB follows: the server answers the headers alone
        assert reply.startswith(b"HTTP/1.1 413 "), (path, reply[:200])
        assert f"larger than {settings.REQUEST_MAX_BYTES} bytes".encode() in reply


def test_a_chunked_body_is_cut_off_once_it_passes_the_cap(live_stack):
    with connect(live_stack) as sock:
        sock.sendall(headers("/login/", Content_Type="application/x-www-form-urlencoded", Transfer_Encoding="chunked"))
        chunk = b"a" * 2**20
        sent, refused = 0, False
        try:
            while sent < 64 * 2**20:  # far past the 4 MiB cap, unless the server stops reading
                sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                sent += len(chunk)
        except (BrokenPipeError, ConnectionResetError):
            refused = True
        reply = answer(sock)
    assert refused or reply.startswith(b"HTTP/1.1 413 ")
    assert sent <= settings.REQUEST_MAX_BYTES + 16 * 2**20  # cut soon after the cap (what the buffers held)


class PeakMemory:
    """The most resident memory a process reaches while the block runs, above what it held at its start."""

    def __init__(self, pid: int):
        self.process, self.peak, self.done = psutil.Process(pid), 0, threading.Event()

    def __enter__(self) -> PeakMemory:
        self.start = self.process.memory_info().rss
        self.thread = threading.Thread(target=self.sample, daemon=True)
        self.thread.start()
        return self

    def sample(self) -> None:
        while not self.done.is_set():
            self.peak = max(self.peak, self.process.memory_info().rss)
            time.sleep(0.02)

    def __exit__(self, *exc) -> None:
        self.done.set()
        self.thread.join()

    @property
    def growth(self) -> int:
        return self.peak - self.start


def multipart(size: int) -> tuple[bytes, bytes]:
    """A form whose one file field holds `size` bytes: its head (before the file's bytes) and tail."""
    head = (f"--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"bundle\"; filename=\"run.zip\"\r\n"
            "Content-Type: application/zip\r\n\r\n").encode()  # fmt: skip
    return head, f"\r\n--{BOUNDARY}--\r\n".encode()


def test_a_large_anonymous_upload_to_an_import_route_is_never_parsed_in_memory(live_stack):
    size = 200 * 2**20  # under the bundle cap; the server used to parse it into 2.3 GB
    head, tail = multipart(size)
    block = b"\0" * 2**20
    with PeakMemory(live_stack.web.pid) as memory, connect(live_stack) as sock:
        sock.sendall(headers("/audit/import/", Content_Type=f"multipart/form-data; boundary={BOUNDARY}",
                             Content_Length=str(len(head) + size + len(tail)), Connection="close"))  # fmt: skip
        sock.sendall(head)
        for _ in range(size // len(block)):
            sock.sendall(block)
        sock.sendall(tail)
        reply = answer(sock)
    assert reply.startswith(b"HTTP/1.1 403 "), reply[:200]  # Django's CSRF check answered it: no login, no token
    assert memory.growth < size * 1.5, f"the web process grew by {memory.growth / 2**20:.0f} MB"


def upload_begun(stack, size: int = 100 * 2**20) -> socket.socket:
    """A connection that has sent a large import's headers and the start of its form, and then waits."""
    sock = connect(stack)
    head, _ = multipart(size)
    sock.sendall(headers("/audit/import/", Content_Type=f"multipart/form-data; boundary={BOUNDARY}",
                         Content_Length=str(len(head) + size)))  # fmt: skip
    sock.sendall(head)
    return sock


def answered_within(sock: socket.socket, seconds: float) -> bytes:
    sock.settimeout(seconds)
    try:
        return sock.recv(4096)
    except TimeoutError:
        return b""


def test_large_bodies_are_taken_a_few_at_a_time_and_the_next_is_asked_to_come_back(live_stack):
    assert settings.UPLOADS_AT_ONCE == 2
    first, second = upload_begun(live_stack), upload_begun(live_stack)
    try:
        assert answered_within(first, 1) == b"" and answered_within(second, 1) == b""  # both being received
        with upload_begun(live_stack) as third:
            reply = answered_within(third, 10)
        assert reply.startswith(b"HTTP/1.1 503 ") and b"Retry-After: 60" in reply, reply[:200]
        first.close()  # an upload that ends, even by its client going away, gives its place back
        time.sleep(0.5)
        with upload_begun(live_stack) as fourth:
            assert answered_within(fourth, 2) == b""
        small = connect(live_stack)  # a small body is never kept waiting by uploads
        with small:
            small.sendall(headers("/login/", Content_Type="application/x-www-form-urlencoded", Content_Length="3",
                                  Connection="close") + b"a=b")  # fmt: skip
            assert answer(small).startswith(b"HTTP/1.1 403 ")  # Django's CSRF refusal
    finally:
        first.close()
        second.close()
