"""Bundle uploads, capped before they are read: by Content-Length, then byte by byte as they stream in.

Django caps form fields (DATA_UPLOAD_MAX_MEMORY_SIZE) and spools files over
FILE_UPLOAD_MAX_MEMORY_SIZE to disk, but never caps a file's size: a 50 GB
upload would fill the disk. CappedUploadHandler (in settings.FILE_UPLOAD_HANDLERS,
so it is in place before the CSRF check parses a form) refuses a request whose
declared length is over BUNDLE_MAX_BYTES before reading it, and stops one whose
bytes go past it; a raw body is streamed with the same cap.

    handle = bundle_upload(request)   # a binary file for workers.bundle.read_bundle; UserInputError (413)
"""

from __future__ import annotations

import tempfile

from django.conf import settings
from django.core.files.uploadhandler import StopUpload, TemporaryFileUploadHandler
from django.http import QueryDict
from django.utils.datastructures import MultiValueDict

from rolloutlab.inputs import UserInputError

CHUNK = 2**20


def too_large() -> UserInputError:
    limit = settings.BUNDLE_MAX_BYTES
    return UserInputError(f"the bundle is larger than {limit // 2**20} MB", {"bundle": "too large"}, status=413)


class CappedUploadHandler(TemporaryFileUploadHandler):
    """Spools the upload to a temporary file and stops it past BUNDLE_MAX_BYTES."""

    def handle_raw_input(self, input_data, META, content_length, boundary, encoding=None):
        if content_length > settings.BUNDLE_MAX_BYTES + settings.BUNDLE_FORM_SLACK:
            self.request.bundle_too_large = True
            return QueryDict(encoding=encoding), MultiValueDict()  # nothing of the body is read
        return None

    def new_file(self, *args, **kwargs):
        self.received = 0
        super().new_file(*args, **kwargs)

    def receive_data_chunk(self, raw_data, start):
        self.received += len(raw_data)
        if self.received > settings.BUNDLE_MAX_BYTES:
            self.request.bundle_too_large = True
            raise StopUpload(connection_reset=False)
        return super().receive_data_chunk(raw_data, start)


def declared_length(request) -> int:
    try:
        return int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return 0


def bundle_upload(request):
    """The uploaded bundle as a binary file: a form's `bundle` file, else the raw body. None if neither."""
    if declared_length(request) > settings.BUNDLE_MAX_BYTES + settings.BUNDLE_FORM_SLACK:
        raise too_large()
    if request.content_type == "multipart/form-data":
        upload = request.FILES.get("bundle")
        stopped = getattr(request, "bundle_too_large", False)  # set by CappedUploadHandler
        if stopped or (upload is not None and upload.size > settings.BUNDLE_MAX_BYTES):
            raise too_large()
        return upload
    return raw_body(request)


def raw_body(request):
    """The body streamed into a temporary file (never request.body, which is capped far lower), with the cap."""
    spool = tempfile.SpooledTemporaryFile(max_size=8 * CHUNK)
    size = 0
    while chunk := request.read(CHUNK):
        size += len(chunk)
        if size > settings.BUNDLE_MAX_BYTES:
            spool.close()
            raise too_large()
        spool.write(chunk)
    if size == 0:
        spool.close()
        return None
    spool.seek(0)
    return spool
