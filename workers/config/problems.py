"""A validation error as the user should read it: one message per field, filed under that field."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError

from workers.config.schema import SECTION_KINDS, SWITCHED_SECTIONS, RunConfig
from workers.tasks.knobs import TASKS


def validation_problems(exc: ValidationError) -> list[tuple[str, str]]:
    """(field path, message) per problem: ("rollout.group_size", "... (got 1)").

    A problem found across sections or fields names its field in the message ("advantage.name: ...",
    "eval.samples: ..."); it is filed under that field.
    """
    problems = []
    for err in exc.errors():
        loc = _without_union_tags(err["loc"])
        where = ".".join(str(p) for p in loc)
        if err["type"] == "extra_forbidden":
            owner = err["loc"][:2] if _without_union_tags(err["loc"]) != tuple(err["loc"]) else None
            prefix = f"not a knob of {owner[0]} '{owner[1]}'" if owner else "unknown knob"
            problems.append((where, f"{prefix}; valid: {', '.join(_valid_keys(err['loc']))}"))
            continue
        if err["type"] in ("union_tag_invalid", "union_tag_not_found") and loc and loc[0] in SECTION_KINDS:
            switch = SWITCHED_SECTIONS[loc[0]].knob
            problems.append((f"{loc[0]}.{switch}", _unknown_kind(loc[0], err.get("input"))))
            continue
        message = err["msg"].removeprefix("Value error, ")
        field, sep, rest = message.partition(": ")
        if sep and "." in field and " " not in field and (not where or field.startswith(where + ".")):
            where, message = field, rest
        got = err.get("input")
        shown = "" if isinstance(got, dict) or got is None else f" (got {got!r})"
        problems.append((where, f"{message}{shown}"))
    return problems


def _without_union_tags(loc: tuple) -> tuple:
    """("filter", "none", "max_rounds") -> ("filter", "max_rounds"): pydantic names the union member chosen."""
    if len(loc) > 1 and loc[0] in SECTION_KINDS and loc[1] in SECTION_KINDS[loc[0]]:
        return (loc[0], *loc[2:])
    return tuple(loc)


def _unknown_kind(section: str, given: Any) -> str:
    """A switch naming no kind: "unknown advantage estimator 'x'; valid: ..." (a registry's own word for its kinds)."""
    from workers.pipeline import STAGES

    switch = SWITCHED_SECTIONS[section].knob
    value = given.get(switch) if isinstance(given, dict) else None
    registry = {**STAGES, "task": TASKS}.get(section)
    what = registry.kind if registry else f"{section}.{switch}"
    return f"unknown {what} '{value}'; valid: {', '.join(sorted(SECTION_KINDS[section]))}"


def _valid_keys(loc: tuple) -> list[str]:
    """The knobs of the section that holds the unknown key at `loc`."""
    if len(loc) > 2 and loc[0] in SECTION_KINDS and loc[1] in SECTION_KINDS[loc[0]]:
        return sorted(SECTION_KINDS[loc[0]][loc[1]].model_fields)
    model: type[BaseModel] = RunConfig
    for part in loc[:-1]:
        field = model.model_fields.get(str(part))
        annotation = field.annotation if field else None
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            break
        model = annotation
    return sorted(model.model_fields)
