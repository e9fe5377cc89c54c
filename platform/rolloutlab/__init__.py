"""Rollout Lab's web side: a Django project on PostgreSQL, Celery and Channels.

python manage.py migrate && daphne rolloutlab.asgi:application
celery -A rolloutlab worker -Q cpu -P solo
"""

from rolloutlab.celery import app as celery_app

__all__ = ["celery_app"]
