"""One model cache: the command line and the platform's workers keep warm-started models in the same place.

With ROLLOUTLAB_CACHE unset both use ~/.cache/rolloutlab, so a model that a run on the
platform warmed up is the one a command-line run of the same shape loads at once.
"""

import json
import os
import subprocess
import sys

import pytest
import yaml

from rolloutlab.execution import services as execution
from rolloutlab.execution.executor import execute
from rolloutlab.runs.models import Run
from tests.conftest import REPO
from tests.support.platform_fixtures import SMALL_RUN

pytestmark = pytest.mark.django_db(transaction=True)  # the executor's reporter writes from its own thread

RUN = {**SMALL_RUN, "model": {**SMALL_RUN["model"], "warmup_steps": 40}, "schedule": {"steps": 1, "save_final": False},
       "eval": {"every": 0, "size": 16}}  # fmt: skip


@pytest.fixture
def home(monkeypatch, settings, tmp_path):
    """A fresh home directory and no ROLLOUTLAB_CACHE, for this process and the command line it starts."""
    settings.STORAGE_ROOT = tmp_path / "storage"
    monkeypatch.setattr("rolloutlab.execution.services.submit", lambda run_id: None)  # executed here, as a worker would
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("ROLLOUTLAB_CACHE")
    return tmp_path / "home"


def cli_run(config: dict, out) -> list[str]:
    """The details of the states a command-line run reported (its status.jsonl)."""
    path = out.parent / "run.yaml"
    path.write_text(yaml.safe_dump(config))
    command = [sys.executable, "-m", "workers", "run", str(path), "--out", str(out), "--no-progress"]
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO, env=os.environ, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line)["detail"] for line in (out / "status.jsonl").read_text().splitlines()]


def test_a_model_a_platform_run_warmed_up_is_the_one_the_command_line_loads_at_once(home, alice, tmp_path):
    run = execution.launch_run(alice, RUN)
    assert execute(run.id) == "succeeded", Run.objects.get(id=run.id).detail
    built = list((home / ".cache" / "rolloutlab" / "tiny").iterdir())
    assert len(built) == 1  # the platform's worker warmed it up under ~/.cache/rolloutlab

    details = cli_run(RUN, tmp_path / "cli")
    assert "loading the model" in details
    assert not [detail for detail in details if detail.startswith("warming up")], details  # found, not rebuilt
    assert list((home / ".cache" / "rolloutlab" / "tiny").iterdir()) == built
