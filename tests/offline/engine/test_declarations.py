"""Each stage declares its components in a torch-free knobs.py; `get()` imports the code the declaration names.

RunConfig validates against the declarations alone (the web side does it), so a declaration
must say of its component exactly what the component says of itself.
"""

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO
from workers.config import METHODS, STAGE_DEFAULTS, resolve
from workers.pipeline import STAGES
from workers.pipeline.stages import build_stages

DECLARED = [(stage, name) for stage, registry in STAGES.items() for name in registry.names()]


def test_every_stage_of_the_config_has_a_registry_of_declarations():
    assert set(STAGES) == set(STAGE_DEFAULTS)
    assert all(STAGE_DEFAULTS[stage] in registry for stage, registry in STAGES.items())


@pytest.mark.parametrize("stage, name", DECLARED)
def test_a_declared_name_resolves_to_a_component_whose_knobs_are_the_declared_ones(stage, name):
    registry = STAGES[stage]
    declared, component = registry.declaration(name), registry.get(name)
    assert isinstance(component, type) and component.__module__ == declared.target.partition(":")[0]
    assert component.Knobs is declared.knobs


@pytest.mark.parametrize("stage, name", DECLARED)
def test_the_declared_summary_is_the_first_line_of_the_components_docstring(stage, name):
    """The summary is the launch form's description of the component and the first line of its docstring: one text."""
    registry = STAGES[stage]
    assert registry.summary(name) == registry.get(name).__doc__.strip().splitlines()[0]


@pytest.mark.parametrize("method", sorted(METHODS))
def test_every_preset_builds_the_components_it_names(method):
    cfg = resolve({"method": method})
    stages = build_stages(cfg)
    for stage, registry in STAGES.items():
        assert type(getattr(stages, stage)) is registry.get(getattr(cfg, stage).name)


KNOBS_MODULES = ["workers.config", "workers.models", "workers.models.shape", "workers.tasks.rewards"] + [
    f"workers.pipeline.{stage}.knobs" for stage in STAGES
]


def imported_after(code: str) -> set[str]:
    """The top-level packages a fresh interpreter has imported after running `code`."""
    report = "import json, sys; print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    done = subprocess.run([sys.executable, "-c", f"{code}\n{report}"], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.splitlines()[-1]))


def test_importing_the_declarations_and_validating_every_preset_imports_no_torch():
    code = "\n".join(f"import {module}" for module in KNOBS_MODULES)
    code += "\nfrom workers.config import METHODS, resolve\nfor name in METHODS:\n    resolve({'method': name})"
    imported = imported_after(code)
    assert {"workers", "pydantic"} <= imported
    assert not imported & {"torch", "transformers", "scipy"}


def test_getting_a_component_imports_its_code():
    """The other side of the same coin: the subprocess check above can tell torch was imported."""
    assert "torch" in imported_after("from workers.pipeline import STAGES\nSTAGES['objective'].get('token-clip')")


def test_every_declared_need_has_a_trainer_method_that_fills_it():
    from workers.training.learner import PROVIDERS, Learner

    needs = {need for stage, registry in STAGES.items() for name in registry.names()
             for need in registry.declaration(name).needs}  # fmt: skip
    assert "ref_logprobs" in needs and needs <= set(PROVIDERS)
    assert all(callable(getattr(Learner, method)) for method in PROVIDERS.values())
