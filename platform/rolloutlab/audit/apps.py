from django.apps import AppConfig


class AuditConfig(AppConfig):
    name = "rolloutlab.audit"

    def ready(self):
        # the execution side knows nothing of the audit: it announces a run's life, the audit listens
        from rolloutlab.audit import receivers  # noqa: F401  (connects the receivers)
        from rolloutlab.audit.signing import check_settings

        check_settings()  # a malformed signing key or trusted key fails at startup, not at the first import
