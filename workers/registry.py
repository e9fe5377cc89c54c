"""Named-component registries: one per pipeline stage, task, reward and backend.

Every registry follows the same rules, so adding a component never means
learning a new convention:

- a component is added under a name, either with the ``@REGISTRY.register("name")``
  decorator on its code, or declared by its dotted path with ``REGISTRY.declare(...)``;
- a second component under an existing name is an error, never a silent override;
- looking up an unknown name raises ``UnknownComponent`` listing the valid names.

A pipeline stage *declares* its components (workers/pipeline/<stage>/knobs.py): the name,
where the code lives, its one-line summary, its knob model and its cross-field check.
RunConfig validates against the declarations alone, so the web side never imports the
torch code; ``get(name)`` imports the component only when a worker builds the stage.

    STAGE.declare("dars", "workers.pipeline.control.dars:DifficultyAdaptiveRollouts",
                  summary="Prompts below ... (DARS).", knobs=DARSKnobs)
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
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

    def load(self) -> Any:
        module, _, attribute = self.target.partition(":")
        return getattr(importlib.import_module(module), attribute)


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
    ) -> None:
        """Add a component by the dotted path of its code ("module:attribute"), imported by get()."""
        if ":" not in target:
            raise ValueError(f"{self.kind} '{name}': '{target}' is not a 'module:attribute' path")
        self._add(name, Declaration(target, summary, knobs, check, tuple(needs), reuses_samples, acts_when))

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
