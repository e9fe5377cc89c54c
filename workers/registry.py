"""Named-component registries: one per pipeline stage, task, reward and backend.

Every registry follows the same rules, so adding a component never means
learning a new convention:

- components are added with the ``@REGISTRY.register("name")`` decorator;
- a second component under an existing name is an error, never a silent override;
- looking up an unknown name raises ``UnknownComponent`` listing the valid names.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class UnknownComponent(KeyError):
    """A name that no component in a registry answers to."""

    def __init__(self, kind: str, name: str, valid: list[str]):
        self.kind, self.name, self.valid = kind, name, valid
        super().__init__(f"unknown {kind} '{name}'; valid: {', '.join(valid)}")

    def __str__(self) -> str:  # KeyError would quote the whole message
        return self.args[0]


class Registry(Generic[T]):
    """A mapping from a name to a component class or function."""

    def __init__(self, kind: str):
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        def add(component: T) -> T:
            if name in self._items:
                raise ValueError(f"{self.kind} '{name}' is registered twice")
            self._items[name] = component
            return component

        return add

    def get(self, name: str) -> T:
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
        """The first line of a component's docstring: its one-line description."""
        doc = (self.get(name).__doc__ or "").strip()
        return doc.splitlines()[0] if doc else ""
