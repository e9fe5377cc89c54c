from django.apps import AppConfig


class MetricsConfig(AppConfig):
    name = "rolloutlab.metrics"

    def ready(self):
        # the runs app knows nothing of the metric tables: it announces a delete, the metrics app follows it
        from rolloutlab.metrics import receivers  # noqa: F401  (connects the receivers)
