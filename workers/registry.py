"""Named-component registries: one per pipeline stage, task, reward and backend.

Every registry follows the same rules, so adding a component never means
learning a new convention:

- a component is added under a name, either with the ``@REGISTRY.register("name")``
  decorator on its code, or declared by its dotted path with ``REGISTRY.declare(...)``;
- a second component under an existing name is an error, never a silent override;
- looking up an unknown name raises ``UnknownComponent`` listing the valid names.

A pipeline stage's components are found, not listed: each is one folder of its stage,
``workers/pipeline/<stage>/<name>/``, whose ``__init__.py`` imports no torch and declares it.
Its module docstring's first line is the summary (the launch form's description), the rest
cites the paper; beside the knob model and the cross-field check it holds one
``COMPONENT = Component(...)``, naming its code relative to the folder. ``Registry.discover``
walks the stage's subpackages and reads those declarations, so RunConfig validates against
them alone and the web side never imports torch; ``get(name)`` imports the code only when a
worker builds the stage.

    workers/pipeline/control/dars/__init__.py    the docstring (summary, paper), DARSKnobs, and
        COMPONENT = Component("dars", "component:DifficultyAdaptiveRollouts", knobs=DARSKnobs)
    workers/pipeline/control/dars/component.py   DifficultyAdaptiveRollouts: the torch code
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class UnknownComponent(KeyError):
    """A name that no component in a registry answers to."""

    def __init__(self, kind: str, name: str, valid: list[str]):
        self.kind, self.name, self.valid = kind, name, valid
        super().__init__(f"unknown {kind} '{name}'; valid: {', '.join(valid)}")

    def __str__(self) -> str:  # KeyError would quote the whole message
        return self.args[0]


@dataclass(frozen=True)
class Checked:
    """How a component was checked against its paper: its row of docs/methods/README.md's "How each method was
    checked" (workers/pipeline/catalog.py writes the table; the line number is found in the card by the quote)."""

    presets: str  # which presets use it
    paper: str  # the paper, with the section or equation where it says what the component computes
    how: str  # "paper form" (what the paper says, with its values) or "documented choice: ..." (what was chosen)
    card: str  # the card under docs/methods/ whose line says so
    quote: str  # words that stand on that line of the card


@dataclass(frozen=True)
class Declaration:
    """What is known of a component before its code is imported."""

    target: str  # "package.module:attribute", imported by load()
    summary: str  # one line: the launch form's description of the component (its docstring's first line)
    knobs: type | None = None  # the pydantic model of its own knobs
    check: Callable[[Any], None] | None = None  # check(cfg): raises when its knobs do not fit the rest of the run
    # what the component reads that the trainer computes only when asked (e.g. "ref_logprobs": the batch's
    # RolloutBatch.ref_logprobs, filled before the advantage stage by a forward of the reference policy)
    needs: tuple[str, ...] = ()
    # the component trains on samples an older policy drew (replay, resumed partial rollouts), so their
    # importance ratios differ from 1 even on one pass of one minibatch
    reuses_samples: bool = False
    # the schedule condition without which the component's own mechanism changes nothing (a marker of
    # workers/schedule_checks.py, as on a knob): e.g. "off-policy" for an objective that only reshapes ratios
    acts_when: str | None = None
    checked: Checked | None = None  # how it was checked against its paper (every pipeline component has one)

    def load(self) -> Any:
        module, _, attribute = self.target.partition(":")
        return getattr(importlib.import_module(module), attribute)


class MissingDeclaration(LookupError):
    """A folder of a stage package that does not declare the component it must be."""


@dataclass(frozen=True)
class Component:
    """What a component folder's torch-free __init__ declares of itself: `COMPONENT = Component(...)`.

    Its summary is not written here: it is the first line of that __init__'s docstring.
    """

    name: str  # the name a config chooses it by; its folder is the name with '-' written '_'
    code: str  # "module:attribute" within the folder, e.g. "component:DifficultyAdaptiveRollouts"
    knobs: type | None = None
    check: Callable[[Any], None] | None = None
    needs: tuple[str, ...] = ()
    reuses_samples: bool = False
    acts_when: str | None = None  # the fields' meanings are Declaration's
    checked: Checked | None = None


def folder_name(name: str) -> str:
    """The folder of a stage package that holds the component called `name`."""
    return name.replace("-", "_")


class Registry(Generic[T]):
    """A mapping from a name to a component class or function, registered or declared."""

    def __init__(self, kind: str):
        self.kind = kind
        self._items: dict[str, T | Declaration] = {}

    def _add(self, name: str, entry: T | Declaration) -> None:
        if name in self._items:
            raise ValueError(f"{self.kind} '{name}' is registered twice")
        self._items[name] = entry

    def register(self, name: str) -> Callable[[T], T]:
        def add(component: T) -> T:
            self._add(name, component)
            return component

        return add

    def declare(
        self,
        name: str,
        target: str,
        *,
        summary: str,
        knobs: type | None = None,
        check: Callable[[Any], None] | None = None,
        needs: tuple[str, ...] = (),
        reuses_samples: bool = False,
        acts_when: str | None = None,
        checked: Checked | None = None,
    ) -> None:
        """Add a component by the dotted path of its code ("module:attribute"), imported by get()."""
        if ":" not in target:
            raise ValueError(f"{self.kind} '{name}': '{target}' is not a 'module:attribute' path")
        declaration = Declaration(target, summary, knobs, check, tuple(needs), reuses_samples, acts_when, checked)
        self._add(name, declaration)

    def discover(self, package: str) -> Registry[T]:
        """Declare every component folder (subpackage) of `package`, each from its own __init__; returns self.

        A folder that declares nothing is an error, never skipped: a component would vanish from the
        launch form without a word."""
        for found in pkgutil.iter_modules(importlib.import_module(package).__path__, f"{package}."):
            if found.ispkg:
                self._declare_folder(importlib.import_module(found.name))
        return self

    def _declare_folder(self, folder: ModuleType) -> None:
        declared = getattr(folder, "COMPONENT", None)
        if not isinstance(declared, Component):
            raise MissingDeclaration(
                f"{folder.__name__} is a folder of a stage, so a {self.kind}, but its __init__.py declares none: "
                f"it must set COMPONENT = Component(name, 'module:attribute', knobs=...) (see any other folder)"
            )
        leaf = folder.__name__.rpartition(".")[2]
        if leaf != folder_name(declared.name):
            raise MissingDeclaration(
                f"{folder.__name__} declares {self.kind} '{declared.name}': its folder must be "
                f"'{folder_name(declared.name)}', the name with '-' written '_'"
            )
        summary = (folder.__doc__ or "").strip().partition("\n")[0]
        if not summary:
            raise MissingDeclaration(f"{folder.__name__}: its docstring's first line, the summary, is missing")
        self.declare(
            declared.name,
            f"{folder.__name__}.{declared.code}",
            summary=summary,
            knobs=declared.knobs,
            check=declared.check,
            needs=declared.needs,
            reuses_samples=declared.reuses_samples,
            acts_when=declared.acts_when,
            checked=declared.checked,
        )

    def get(self, name: str) -> T:
        entry = self._entry(name)
        return entry.load() if isinstance(entry, Declaration) else entry

    def declaration(self, name: str) -> Declaration:
        """The declaration of a declared component (its knobs, summary and check), without importing it."""
        entry = self._entry(name)
        if not isinstance(entry, Declaration):
            raise TypeError(f"{self.kind} '{name}' is registered, not declared")
        return entry

    def _entry(self, name: str) -> T | Declaration:
        try:
            return self._items[name]
        except KeyError:
            raise UnknownComponent(self.kind, name, self.names()) from None

    def names(self) -> list[str]:
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def summary(self, name: str) -> str:
        """A component's one-line description: declared, or the first line of its docstring."""
        entry = self._entry(name)
        if isinstance(entry, Declaration):
            return entry.summary
        doc = (entry.__doc__ or "").strip()
        return doc.splitlines()[0] if doc else ""
