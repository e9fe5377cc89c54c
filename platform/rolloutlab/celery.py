"""The Celery app, configured from Django settings (the CELERY_* names).

celery -A rolloutlab worker -Q cpu -P prefork --concurrency 1 --max-tasks-per-child 1   # one run per fresh child
"""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rolloutlab.settings")

app = Celery("rolloutlab")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()  # each installed app's tasks.py
# the execution side is a package, not an app (it holds no models): its tasks are named here
app.autodiscover_tasks(["rolloutlab.execution"])
