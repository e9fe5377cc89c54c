"""Issue an API token: `python manage.py issue_token USERNAME [--name laptop]`. The key is shown once."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from rolloutlab.accounts.models import ApiToken


class Command(BaseCommand):
    help = "Issue an API token for a user"

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--name", default="cli")

    def handle(self, *args, username, name, **options):
        try:
            user = get_user_model().objects.get(username=username)
        except get_user_model().DoesNotExist:
            raise CommandError(f"no user named {username!r}") from None
        _, raw = ApiToken.issue(user, name)
        self.stdout.write(raw)
