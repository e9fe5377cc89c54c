"""RunConfig's JSON Schemas: the launch form's (with the presets and each component's knobs) and the API's."""

from __future__ import annotations

import functools
from typing import Any

from workers.config.presets import METHODS
from workers.config.schema import STAGE_KNOBS, RunConfig


def json_schema() -> dict[str, Any]:
    """RunConfig's JSON Schema, with the method presets listed for the launch form."""
    schema = RunConfig.model_json_schema()
    schema["x-methods"] = {name: {"description": p.summary, "preset": p.overrides} for name, p in METHODS.items()}
    schema["x-components"] = {
        stage: {name: {"knobs": sorted(set(model.model_fields) - {"name"})} for name, model in members.items()}
        for stage, members in STAGE_KNOBS.items()
    }
    return schema


@functools.cache
def input_schema() -> dict[str, Any]:
    """The JSON Schema of a run config as a client sends it, self-contained for the API's OpenAPI document.

    RunConfig's schema with every $ref written out in place (the document has no $defs of its own), a stage's
    components as anyOf (a stage given without `name` keeps its preset's or the default component, so more than
    one member may fit) and no discriminator; every section and knob optional, as resolve() lays what is given
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
