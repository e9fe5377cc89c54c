from django.apps import AppConfig


class AlertsConfig(AppConfig):
    name = "rolloutlab.alerts"

    def ready(self):
        # the execution side knows nothing of alerts: it announces a run's end and its points, the alerts listen
        from rolloutlab.alerts import receivers  # noqa: F401  (connects the receivers)
