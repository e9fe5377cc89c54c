"""RunConfig: the one declarative, validated description of a training run.

It is the seam between the web side and the worker: JSON in Postgres, YAML on
disk, and its JSON Schema drives the launch form, so the `description` of every
field of schema.py is also the help text a user reads in the browser.

    cfg = load_config("examples/grpo-arith.yaml", overrides=["seed=7"])
    cfg.config_hash()   # sha256 of the canonical JSON

A *method* is a named preset (a partial RunConfig, see METHODS); the file or
the overrides may change any knob it sets. Resolution order, last wins:
defaults < method preset < YAML file < --set overrides.

    schema.py    the sections and RunConfig          presets.py   the method presets (METHODS)
    loading.py   YAML, overrides, presets -> resolve  problems.py  validation errors, by field
    export.py    the JSON Schemas (launch form, API)  migrate.py   older configs in today's shape
    legacy.py    the frozen flat shape old hashes are taken of
"""

from workers.config.export import input_schema, json_schema
from workers.config.loading import (
    MAX_DEPTH,
    apply_override,
    deep_merge,
    lay_over,
    lay_over_preset,
    load_config,
    read_yaml,
    resolve,
    shape_problems,
)
from workers.config.migrate import upgrade
from workers.config.presets import METHODS, method_names
from workers.config.problems import validation_problems
from workers.config.schema import (
    NOT_HASHED,
    SECTION_KINDS,
    STAGE_DEFAULTS,
    STAGE_KNOBS,
    SWITCHED_SECTIONS,
    RunConfig,
    kind_of,
)
from workers.errors import ConfigError

__all__ = [
    "MAX_DEPTH",
    "METHODS",
    "NOT_HASHED",
    "SECTION_KINDS",
    "STAGE_DEFAULTS",
    "STAGE_KNOBS",
    "SWITCHED_SECTIONS",
    "ConfigError",
    "RunConfig",
    "apply_override",
    "deep_merge",
    "input_schema",
    "json_schema",
    "kind_of",
    "lay_over",
    "lay_over_preset",
    "load_config",
    "method_names",
    "read_yaml",
    "resolve",
    "shape_problems",
    "upgrade",
    "validation_problems",
]
