"""`python manage.py demo [--examples] [--port 8000]`: the whole platform in one process.

Migrates, collects the static files, creates the demo login, optionally queues two example runs (grpo and
mc-grpo on the quick arithmetic example), then serves with daphne. Without
DATABASE_URL and REDIS_URL this is the embedded mode: SQLite, the in-memory
channel layer, and runs executed in this very process.
"""

from pathlib import Path

import yaml
from daphne.cli import CommandLineInterface
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand

from rolloutlab.execution.services import launch_run

EXAMPLE = Path(settings.BASE_DIR) / "examples" / "grpo-arith-quick.yaml"


class Command(BaseCommand):
    help = "Migrate, create the demo login, optionally queue example runs, and serve"

    def add_arguments(self, parser):
        parser.add_argument("--examples", action="store_true", help="queue two example runs")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--host", default="127.0.0.1")

    def handle(self, *args, examples, port, host, **options):
        call_command("migrate", verbosity=0)
        call_command("collectstatic", interactive=False, verbosity=0)  # hashed, compressed files for WhiteNoise
        call_command("demo_user", username="demo", password="demo", team="demo", role="admin")
        if examples:
            self.queue_examples()
        mode = "embedded (SQLite, in-process runs)" if settings.EMBEDDED else "PostgreSQL + Redis + Celery"
        self.stdout.write(f"\nRollout Lab is serving at http://{host}:{port}/  (log in as demo / demo; {mode})\n")
        CommandLineInterface().run(["-b", host, "-p", str(port), "rolloutlab.asgi:application"])

    def queue_examples(self) -> None:
        user = get_user_model().objects.get(username="demo")
        base = yaml.safe_load(EXAMPLE.read_text())
        for method in ("grpo", "mc-grpo"):
            run = launch_run(user, {**base, "method": method}, name=f"example {method}", tags=["example"])
            self.stdout.write(f"queued run #{run.id}: {run.name}")
