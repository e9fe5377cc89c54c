from django.apps import AppConfig


class MetricsConfig(AppConfig):
    name = "rolloutlab.metrics"
