"""Each component is a folder of its stage whose torch-free __init__ declares it; `get()` imports the code it names.

RunConfig validates against the declarations alone (the web side does it), so a declaration
must say of its component exactly what the component says of itself, and every folder of a
stage must be a declared component: the registries find them by walking the stage packages.
"""

import importlib
import json
import re
import subprocess
import sys

import pytest

from tests.conftest import REPO
from workers.config import METHODS, STAGE_DEFAULTS, resolve
from workers.pipeline import STAGES
from workers.pipeline.stages import build_stages
from workers.registry import MissingDeclaration, Registry, folder_name

DECLARED = [(stage, name) for stage, registry in STAGES.items() for name in registry.names()]
FOLDERS = [f"workers.pipeline.{stage}.{folder_name(name)}" for stage, name in DECLARED]


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
def test_the_declared_summary_is_the_first_line_of_the_folders_docstring(stage, name):
    """The summary is the launch form's description of the component: one text, its declaration's docstring."""
    folder = importlib.import_module(f"workers.pipeline.{stage}.{folder_name(name)}")
    assert STAGES[stage].summary(name) == folder.__doc__.strip().splitlines()[0]
    assert folder.COMPONENT.name == name and STAGES[stage].declaration(name).knobs is folder.COMPONENT.knobs


# a "Paper:" (or "Papers:") paragraph that names a year, an arXiv id or an *italic title*
CITATION = re.compile(r"^Papers?: (?:(?!\n\n).)*?(?:\b(?:19|20)\d\d\b|arXiv|\*[^*]+\*)", re.MULTILINE | re.DOTALL)


@pytest.mark.parametrize("module", FOLDERS)
def test_every_declaration_cites_the_paper_its_component_implements(module):
    assert CITATION.search(importlib.import_module(module).__doc__), f"{module}: its docstring has no 'Paper:' citation"


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_every_folder_of_a_stage_is_a_declared_component(stage):
    """Nothing is skipped: a folder the registry did not declare would vanish from the launch form."""
    root = REPO / "workers" / "pipeline" / stage
    folders = {path.name for path in root.iterdir() if path.is_dir() and any(path.glob("*.py"))}  # code, not caches
    assert folders == {folder_name(name) for name in STAGES[stage].names()}
    assert all((root / folder / "__init__.py").is_file() and (root / folder / "component.py").is_file()
               for folder in folders)  # fmt: skip


def stage_package(tmp_path, monkeypatch, init: str) -> str:
    """A throwaway stage package with one folder whose __init__.py is `init`; returns the package's name."""
    (tmp_path / "toy_stage" / "widget").mkdir(parents=True)
    (tmp_path / "toy_stage" / "__init__.py").write_text("")
    (tmp_path / "toy_stage" / "widget" / "__init__.py").write_text(init)
    monkeypatch.syspath_prepend(str(tmp_path))
    for module in [m for m in sys.modules if m.split(".")[0] == "toy_stage"]:
        monkeypatch.delitem(sys.modules, module)
    return "toy_stage"


def test_a_folder_that_declares_nothing_is_an_error_that_names_it(tmp_path, monkeypatch):
    package = stage_package(tmp_path, monkeypatch, '"""Does widgets."""\n')
    with pytest.raises(MissingDeclaration, match=r"toy_stage\.widget is a folder of a stage, so a toy component"):
        Registry("toy component").discover(package)


def test_a_folder_is_named_after_the_component_it_declares(tmp_path, monkeypatch):
    init = (
        '"""Does widgets."""\nfrom workers.registry import Component\nCOMPONENT = Component("gadget", "component:G")\n'
    )
    with pytest.raises(MissingDeclaration, match="its folder must be 'gadget'"):
        Registry("toy component").discover(stage_package(tmp_path, monkeypatch, init))


def test_a_discovered_component_takes_its_summary_from_the_docstring_and_its_path_from_the_folder(
    tmp_path, monkeypatch
):
    init = '"""Does widgets.\n\nPaper: none."""\nfrom workers.registry import Component\n'
    init += 'COMPONENT = Component("widget", "component:Widget", reuses_samples=True)\n'
    registry = Registry("toy component").discover(stage_package(tmp_path, monkeypatch, init))
    declared = registry.declaration("widget")
    assert registry.names() == ["widget"] and registry.summary("widget") == "Does widgets."
    assert declared.target == "toy_stage.widget.component:Widget" and declared.reuses_samples


@pytest.mark.parametrize("method", sorted(METHODS))
def test_every_preset_builds_the_components_it_names(method):
    cfg = resolve({"method": method})
    stages = build_stages(cfg)
    for stage, registry in STAGES.items():
        assert type(getattr(stages, stage)) is registry.get(getattr(cfg, stage).name)


KNOBS_MODULES = ["workers.config", "workers.models", "workers.models.shape", "workers.tasks.rewards"] + [
    f"workers.pipeline.{stage}" for stage in STAGES
]
SHARED_MODULES = [f"workers.pipeline.{stage}.shared" for stage in STAGES
                  if (REPO / "workers" / "pipeline" / stage / "shared.py").is_file()]  # fmt: skip


def imported_after(code: str) -> set[str]:
    """The top-level packages a fresh interpreter has imported after running `code`."""
    report = "import json, sys; print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    done = subprocess.run([sys.executable, "-c", f"{code}\n{report}"], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.splitlines()[-1]))


def test_importing_the_declarations_and_validating_every_preset_imports_no_torch():
    code = "\n".join(f"import {module}" for module in KNOBS_MODULES + SHARED_MODULES + FOLDERS)
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
