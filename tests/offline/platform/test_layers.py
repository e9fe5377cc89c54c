"""The platform's layers hold: no module imports from a layer above its own.

    pytest tests/offline/platform/test_layers.py        # no database, no Django setup: it only parses the files

Bottom to top (docs/architecture.md draws them):

    base        the project's plumbing that every app uses and that imports no app: settings, the Celery app,
                input types, outages, realtime (naming Channels groups, sending to them), finite values
    accounts    teams, roles, tokens, share links, the activity log
    runs        projects, experiments and runs as records; the one door to a user's runs (runs/access.py);
                the runs table
    execution   launching a run and everything until it ends (a package, not an app)
    metrics     metric storage and reads
    compare     comparisons, statistics, sweeps
    audit       bundles, Verify
    alerts      rules on a run's end and on its points
    site        what mounts or serves every app and so may import any: urls, api (mounts the routers), asgi;
                and each app's entry points (views, API routers, sockets, template tags, commands, the admin),
                thin doors that validate a request and call the services of the layers below

A module imports from its own layer or below. Every import counts, at module level or inside a function, so an
upward import cannot hide in a function body: the lower layer announces (a Django signal, as lifecycle does to
audit and alerts) or the code moves to the layer it belongs to.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[3] / "platform" / "rolloutlab"

# bottom to top: (name, module prefixes); the modules of one row may import each other
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    (
        "base",
        (
            "rolloutlab",  # the package itself: its __init__ hands on the Celery app, lazily
            "rolloutlab.settings",
            "rolloutlab.celery",
            "rolloutlab.inputs",
            "rolloutlab.outages",
            "rolloutlab.middleware",
            "rolloutlab.errorreports",
            "rolloutlab.staticfiles",
            "rolloutlab.realtime",
            "rolloutlab.finite",
        ),
    ),
    ("accounts", ("rolloutlab.accounts",)),
    ("runs", ("rolloutlab.runs",)),
    ("execution/metrics", ("rolloutlab.execution", "rolloutlab.metrics")),
    ("compare/audit/alerts", ("rolloutlab.compare", "rolloutlab.audit", "rolloutlab.alerts")),
    ("site", ("rolloutlab.urls", "rolloutlab.api", "rolloutlab.asgi")),
]
SITE = len(LAYERS) - 1
# an app's entry points: a request, a socket, a template or a command comes in through them
ENTRY_MODULES = {"views", "api", "table_api", "urls", "consumers", "routing", "admin"}
ENTRY_PACKAGES = {"templatetags", "management"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_entry_point(module: str) -> bool:
    parts = module.split(".")
    return len(parts) > 2 and (parts[-1] in ENTRY_MODULES or bool(ENTRY_PACKAGES & set(parts[2:-1])))


def layer_of(module: str) -> int | None:
    """The layer's index, or None for a module of the package that no row names (the test below refuses it)."""
    if is_entry_point(module):
        return SITE
    best, index = "", None
    for i, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > len(best):
                best, index = prefix, i
    return index


def is_module(name: str) -> bool:
    relative = Path(*name.split("."))
    return (PACKAGE.parent / relative).with_suffix(".py").is_file() or (PACKAGE.parent / relative).is_dir()


def imported_modules(path: Path, module: str) -> list[tuple[int, str]]:
    """(line, module) for every import of the package in the file, at any depth (function bodies included)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from . import x, from ..runs import y
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            # `from rolloutlab.runs import services` imports the module rolloutlab.runs.services
            found += [(node.lineno, f"{base}.{a.name}" if is_module(f"{base}.{a.name}") else base) for a in node.names]
    return sorted({(line, name) for line, name in found if name == "rolloutlab" or name.startswith("rolloutlab.")})


def platform_files() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def upward_imports() -> list[str]:
    problems = []
    for path in platform_files():
        module = module_name(path)
        here = layer_of(module)
        for line, target in imported_modules(path, module):
            there = layer_of(target)
            if there is not None and here is not None and there > here:
                problems.append(
                    f"{path.relative_to(PACKAGE.parent)}:{line}: {module} ({LAYERS[here][0]}) imports {target}"
                    f" ({LAYERS[there][0]}), a layer above"
                )
    return problems


def test_every_module_of_the_platform_has_a_layer():
    unplaced = [module_name(path) for path in platform_files() if layer_of(module_name(path)) is None]
    assert not unplaced, f"add these to a row of LAYERS: {unplaced}"


def test_no_module_imports_from_a_layer_above_its_own():
    problems = upward_imports()
    assert not problems, "imports that run up the layers:\n" + "\n".join(problems)


@pytest.mark.parametrize(
    ("source", "where"),
    [
        ("from rolloutlab.compare.stats import BANDS\n", "module level"),
        ("def f():\n    from rolloutlab.compare import stats\n    return stats\n", "a function body"),
        ("def f():\n    import rolloutlab.audit.trust\n", "a plain import in a function"),
    ],
)
def test_it_sees_an_upward_import_wherever_it_stands(tmp_path, monkeypatch, source, where):
    """The check itself: a runs module importing compare is caught, whether at the top or inside a function."""
    fake = tmp_path / "rolloutlab"
    (fake / "runs").mkdir(parents=True)
    (fake / "compare").mkdir()
    (fake / "audit").mkdir()
    (fake / "compare" / "stats.py").write_text("BANDS = 1\n")
    (fake / "audit" / "trust.py").write_text("")
    (fake / "runs" / "records.py").write_text(source)
    monkeypatch.setattr(__import__(__name__, fromlist=["PACKAGE"]), "PACKAGE", fake)
    problems = upward_imports()
    assert len(problems) == 1, where
    assert problems[0].startswith("rolloutlab/runs/records.py:") and "rolloutlab.runs.records (runs)" in problems[0]
