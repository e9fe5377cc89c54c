"""`python manage.py demo [--examples] [--port 8000]`: the whole platform in one process.

Migrates, collects the static files, creates the demo login, optionally queues example runs (grpo and mc-grpo
on the quick arithmetic example, and a short GRPO run of the packaged real model, SmolLM2-135M-Instruct, on
word problems), then serves with daphne. The database is kept between starts and the login demo/demo made or
reset, so a demo started again with another setting (`MODEL_ROOTS=/mine:models make demo`) keeps its runs and
its login. Without
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
from workers.errors import ConfigError
from workers.models.packaged import gguf_file

EXAMPLES = Path(settings.BASE_DIR) / "examples"
QUICK = EXAMPLES / "grpo-arith-quick.yaml"
REAL_MODEL = EXAMPLES / "grpo-smollm2-word-problems.yaml"
# the real model's example cut to a first look: about 10 minutes on a 2-core CPU, two small evaluations
SHORT = {"schedule": {"steps": 8}, "eval": {"every": 8, "size": 50, "k": 1}}


def example_runs() -> list[tuple[str, dict]]:
    """(name, config) of each example run: the quick pair, and the real model's short run when its package is
    installed on this machine (the `models` extra)."""
    quick = yaml.safe_load(QUICK.read_text())
    runs = [(f"example {method}", {**quick, "method": method}) for method in ("grpo", "mc-grpo")]
    real = yaml.safe_load(REAL_MODEL.read_text())
    try:
        gguf_file(real["model"]["name"])
    except ConfigError:
        return runs
    short = {**real, **{section: {**real.get(section, {}), **knobs} for section, knobs in SHORT.items()}}
    return [*runs, ("example smollm2 word problems (short)", short)]


class Command(BaseCommand):
    help = "Migrate, create the demo login, optionally queue example runs, and serve"

    def add_arguments(self, parser):
        parser.add_argument("--examples", action="store_true", help="queue the example runs")
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
        runs = example_runs()
        for name, config in runs:
            run = launch_run(user, config, name=name, tags=["example"])
            self.stdout.write(f"queued run #{run.id}: {run.name}")
        if len(runs) == 2:
            self.stdout.write("the real model's example is left out: pip install -e '.[models]' (make install does)")
