"""The web process validates run configs without importing torch.

RunConfig is the web side's contract with the worker, and the web validates every launch
with it; the engine's code (torch, ~2 s and hundreds of MB) must stay in the worker. Each
test reads what one fresh process, set up as the web sets itself up, reports.
"""

import json
import os
import subprocess
import sys

import pytest
from django.conf import settings

from tests.support.live import ROOT
from workers.config import METHODS, resolve
from workers.models.shape import tiny_parameters

# Django set up as the web process does (settings, apps, the URLconf with every view, the
# launch form and the API schema, the websocket routes), then the launch service's validation.
WEB_PROCESS = """
import json, sys
import django
django.setup()
from django.conf import settings
from django.urls import get_resolver
get_resolver(settings.ROOT_URLCONF).url_patterns
import rolloutlab.runs.routing
from rolloutlab.execution.services import validate_config
from workers.config import METHODS
from workers.errors import ConfigError

hashes = {name: validate_config({"method": name}).config_hash() for name in METHODS}
from rolloutlab.execution.forms import prompt_preview  # the launch form's preview of a word problem's prompt
preview = prompt_preview({"method": "grpo", "task": {"name": "word-problems"}, "prompt": {"system": "Be brief."}})
errors = {}
for key, raw in json.loads(sys.argv[1]).items():
    try:
        validate_config(raw)
        errors[key] = None
    except ConfigError as exc:
        errors[key] = {"message": str(exc), "fields": exc.fields}
torch = sorted(name for name in sys.modules if name.split(".")[0] == "torch")
print(json.dumps({"hashes": hashes, "errors": errors, "torch": torch, "preview": preview}))
"""

INVALID = {
    "unknown component": {"advantage": {"name": "median-ish"}},
    "knob of another component": {"filter": {"name": "none", "max_rounds": 2}},
    "unknown knob of a component": {"control": {"name": "dars", "stages": 1, "bogus": 3}},
    "siri's limits": {"control": {"name": "siri", "short": 8, "long": 8}},
    "duet's group bounds": {"control": {"name": "duet", "min_group": 10}},
    "held-out problems": {"task": {"digits": 1, "operands": 2, "operators": "+-"}, "eval": {"size": 150}},
    "reward function": {"reward": {"weights": {"speed": 1.0}}},
    "tiny model too big": {"model": {"hidden_size": 2048, "layers": 48, "heads": 16}},
}


@pytest.fixture(scope="module")
def web_process():
    """What a fresh web-like process validated, and which torch modules it had imported by then."""
    path = os.pathsep.join([str(ROOT), str(ROOT / "platform"), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path, "DJANGO_SETTINGS_MODULE": "rolloutlab.settings"}
    done = subprocess.run(
        [sys.executable, "-c", WEB_PROCESS, json.dumps(INVALID)], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_it_validates_every_preset_and_previews_a_prompt_without_importing_torch(web_process):
    assert web_process["torch"] == []
    assert web_process["preview"]["rendered"] == "Be brief.\n\n" + web_process["preview"]["question"]
    assert web_process["hashes"] == {name: resolve({"method": name}).config_hash() for name in METHODS}


def test_an_unknown_component_lists_the_declared_ones(web_process):
    valid = (
        "ace, d3s, drpo, gated-rewards, gdpo, gigpo, group-mean, group-median, grpo-lambda, hgpo, leave-one-out, "
        "outcome-explore, salt, spa-rl, treeps, xrpo"
    )
    assert web_process["errors"]["unknown component"]["fields"] == {
        "advantage.name": f"unknown advantage estimator 'median-ish'; valid: {valid}"
    }


def test_a_knob_of_another_component_is_refused_with_the_chosen_ones_knobs(web_process):
    assert web_process["errors"]["knob of another component"]["fields"] == {
        "filter.max_rounds": "not a knob of filter 'none'; valid: name, overlong"
    }
    assert web_process["errors"]["unknown knob of a component"]["fields"] == {
        "control.bogus": "not a knob of control 'dars'; valid: "
        "extra_budget, mass, max_extra, name, schedule, stages, threshold",
        "control.stages": "Input should be greater than or equal to 2 (got 1)",
    }


def test_the_declared_cross_field_checks_run(web_process):
    siri = web_process["errors"]["siri's limits"]
    assert siri["fields"] == {"control.short": "8 must be below the expanded limit (8)"}
    assert web_process["errors"]["duet's group bounds"]["fields"] == {
        "control.min_group": "rollout.group_size 8 must lie within control.min_group 10 and control.max_group 16, "
        "the mean DUET keeps"
    }


def test_the_task_and_reward_checks_run(web_process):
    assert web_process["errors"]["held-out problems"]["fields"] == {
        "eval.size": "150 held-out problems would leave too few of the task's 200 for training; at most 100"
    }
    assert web_process["errors"]["reward function"]["fields"] == {
        "reward.weights": "unknown reward function 'speed'; valid: correct, flawed-positive, format, length, overlong"
    }


def test_the_deployment_limit_on_the_tiny_models_size_is_checked(web_process):
    ceiling, asked = settings.RUN_LIMITS["model_parameters"], tiny_parameters(2048, 48)
    assert web_process["errors"]["tiny model too big"] == {
        "message": "the config goes over this deployment's limits",
        "fields": {
            "model.hidden_size": f"this deployment allows at most {ceiling:,} parameters of the tiny model "
            f"(hidden_size and layers); this config asks {asked:,}"
        },
    }
