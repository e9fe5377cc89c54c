"""Create (or reset) a login: `python manage.py demo_user [--username demo --password demo] [--team T --role R]`.

The user is an ordinary one; `--admin` makes a site administrator (Django's admin
pages). `--team` puts the user in that team (made if missing) with `--role`.
"""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from rolloutlab.accounts.models import Membership, Role, Team


class Command(BaseCommand):
    help = "Create or reset a login, optionally in a team"

    def add_arguments(self, parser):
        parser.add_argument("--username", default="demo")
        parser.add_argument("--password", default="demo")
        parser.add_argument("--admin", action="store_true", help="a site administrator (staff and superuser)")
        parser.add_argument("--team", default="", help="a team to join (created if missing)")
        parser.add_argument("--role", default=Role.MEMBER, choices=[r.value for r in Role])

    def handle(self, *args, username, password, admin, team, role, **options):
        user, created = get_user_model().objects.get_or_create(username=username)
        user.is_staff = user.is_superuser = admin
        user.set_password(password)
        user.save()
        if team:
            joined, _ = Team.objects.get_or_create(name=team)
            Membership.objects.update_or_create(team=joined, user=user, defaults={"role": role})
        kind = "site admin" if admin else "user"
        self.stdout.write(f"{'created' if created else 'reset'} {kind} login {username} / {password}")
