"""Rollout Lab's web side: a Django project on PostgreSQL, Celery and Channels.

python manage.py migrate && daphne rolloutlab.asgi:application
celery -A rolloutlab worker -Q cpu -P prefork -c 1 --max-tasks-per-child 1

The Celery app is loaded when first asked for (`celery -A rolloutlab` finds rolloutlab.celery;
the web process imports it to dispatch runs), not on `import rolloutlab`: importing one module of
the package (a tool reading rolloutlab.inputs, say) loads no Celery. The client SDK a training
script imports is a package of its own, rolloutlab_client, outside this one.
"""


def __getattr__(name: str):
    if name == "celery_app":
        from rolloutlab.celery import app

        return app
    raise AttributeError(f"module 'rolloutlab' has no attribute {name!r}")


__all__ = ["celery_app"]
