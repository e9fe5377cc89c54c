"""RunConfig's JSON Schemas: the launch form's (with the presets and each component's knobs) and the API's."""

from __future__ import annotations

import functools
from dataclasses import asdict
from typing import Any

from workers.config.presets import METHODS
from workers.config.schema import SECTION_KINDS, SWITCHED_SECTIONS, RunConfig


def json_schema() -> dict[str, Any]:
    """RunConfig's JSON Schema, with the method presets listed for the launch form."""
    schema = RunConfig.model_json_schema()
    schema["x-methods"] = {name: {"description": p.summary, "preset": p.overrides} for name, p in METHODS.items()}
    schema["x-components"] = {section: _kinds(schema, section) for section in SECTION_KINDS}
    schema["x-switches"] = {section: asdict(switch) for section, switch in SWITCHED_SECTIONS.items()}
    return schema


def _kinds(schema: dict[str, Any], section: str) -> dict[str, dict[str, Any]]:
    """Each kind of a switched section: its own knobs (the switch left out) and the $ref of its schema.

    A section switched by a callable (the model: any name but 'tiny' is a directory) has no discriminator
    mapping in JSON Schema; its members are listed in the union's order, which is SECTION_KINDS' order."""
    switch = SWITCHED_SECTIONS[section].knob
    refs = [member["$ref"] for member in schema["properties"][section]["oneOf"]]
    return {
        kind: {"knobs": sorted(set(model.model_fields) - {switch}), "$ref": ref}
        for (kind, model), ref in zip(SECTION_KINDS[section].items(), refs, strict=True)
    }


@functools.cache
def input_schema() -> dict[str, Any]:
    """The JSON Schema of a run config as a client sends it, self-contained for the API's OpenAPI document.

    RunConfig's schema with every $ref written out in place (the document has no $defs of its own), a switched
    section's kinds as anyOf (a section given without its switch keeps its preset's or the default kind, so more
    than one member may fit) and no discriminator; every section and knob optional, as resolve() lays what is given
    over the method's preset.
    """
    schema = RunConfig.model_json_schema()
    definitions = schema.pop("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, list):
            return [inline(item) for item in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            target = inline(definitions[node["$ref"].rsplit("/", 1)[-1]])
            return {**target, **{k: inline(v) for k, v in node.items() if k != "$ref"}}
        out = {k: inline(v) for k, v in node.items() if k not in ("discriminator", "required")}
        if "oneOf" in out:
            out["anyOf"] = out.pop("oneOf")
        return out

    return inline(schema)
