"""Static files: Plotly.js from the plotly package, and the storage that names, compresses and caches them.

`collectstatic` (run by `make demo`, the Docker image's build and the test session) copies static/ and
the plotly package's own bundle (as vendor/plotly.min.js; no CDN, no front-end build) into STATIC_ROOT under
names that carry their content's hash, with gzip and brotli copies beside each. WhiteNoise serves those
compressed to any browser that accepts it, with a far-future max-age: a changed file gets a new name.
"""

from __future__ import annotations

import logging
from pathlib import Path

import plotly
from django.contrib.staticfiles.finders import BaseFinder
from django.core.files.storage import FileSystemStorage
from whitenoise.storage import CompressedManifestStaticFilesStorage

PLOTLY_DIR = Path(plotly.__file__).parent / "package_data"
PLOTLY_NAME = "plotly.min.js"
PLOTLY_PREFIX = "vendor"  # templates load it as {% static 'vendor/plotly.min.js' %}

log = logging.getLogger(__name__)


class PlotlyFinder(BaseFinder):
    """Finds vendor/plotly.min.js in the installed plotly package, so its version is the one pyproject pins."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.storage = FileSystemStorage(location=PLOTLY_DIR)
        self.storage.prefix = PLOTLY_PREFIX  # collectstatic puts the file under this folder

    def check(self, **kwargs):
        return []

    def find(self, path, find_all=False, **kwargs):
        if path != f"{PLOTLY_PREFIX}/{PLOTLY_NAME}":
            return []
        found = str(PLOTLY_DIR / PLOTLY_NAME)
        return [found] if find_all else found

    def list(self, ignore_patterns):
        yield PLOTLY_NAME, self.storage


class StaticStorage(CompressedManifestStaticFilesStorage):
    """WhiteNoise's compressed, hashed storage; a file the manifest lacks (collectstatic not run since it was
    added) gets its plain URL, which WhiteNoise still serves from the finders, rather than failing the page."""

    def stored_name(self, name):
        try:
            return super().stored_name(name)
        except ValueError:
            log.warning("%s is not in the static files manifest: run `manage.py collectstatic`", name)
            return name
