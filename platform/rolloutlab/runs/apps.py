from django.apps import AppConfig
from django.db.backends.signals import connection_created


def sqlite_for_threads(sender, connection, **kwargs):
    """The embedded mode writes from several threads: WAL lets readers and one writer proceed together."""
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")


class RunsConfig(AppConfig):
    name = "rolloutlab.runs"

    def ready(self):
        connection_created.connect(sqlite_for_threads)
