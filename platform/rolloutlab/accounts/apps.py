from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "rolloutlab.accounts"
