"""Tier 3, live: tests that start processes — daphne, a Celery worker, Chromium, a Ray cluster — and talk to them.

`make test-live` runs this tier alone.
"""
