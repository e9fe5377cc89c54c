"""The launch form, generated from RunConfig's JSON Schema: a new knob appears without a template change.

`form_sections(values, errors)` lays the schema out as sections of fields for the
template; `parse_form(post)` turns the submitted strings back into a raw config
dict that RunConfig validates (pydantic converts "8" to 8, "1e-3" to 0.001).

A switched section (a pipeline stage, the task, the model, the resources: SWITCHED_SECTIONS) is a union
of its kinds' knob models chosen by one knob (`name`, or resources' `executor`): the form shows that
switch and every knob of every kind, each marked with the kinds that own it (the page shows only the
chosen one's), and parse_form sends only the chosen kind's knobs.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from jinja2 import TemplateError
from pydantic import Field, ValidationError

from rolloutlab.execution.data_paths import saved_model_paths
from rolloutlab.execution.limits import form_ceilings
from rolloutlab.execution.services import validate_config
from rolloutlab.inputs import Id, Name, ProjectName, Strict, Tags, UserInputError, depth_exceeds, field_errors
from rolloutlab.runs.access import get_run_for_user
from rolloutlab.runs.models import Kind
from workers import estimates, schedule_checks
from workers.config import METHODS, SWITCHED_SECTIONS, json_schema, kind_of, resolve, shape_problems
from workers.errors import ConfigError, UserError
from workers.models.packaged import PACKAGED_MODELS, unpacked
from workers.models.preview import prompt_preview as preview_of

MAX_JSON_FIELD = 20_000  # characters of one JSON knob (e.g. reward weights)
MAX_YAML = 100_000  # characters of a whole config pasted in the YAML editor

SCHEMA = json_schema()
# a switched section whose switch takes any value (a model's directory): what its picker offers beside the kinds
SUGGESTIONS = {"model": saved_model_paths}

SECTION_ORDER = [
    "model", "prompt", "task", "environment", "reward", "rollout", "generate", "filter", "control", "replay",
    "advantage", "objective", "optimizer", "schedule", "eval", "resources",
]  # fmt: skip


@dataclass
class FormField:
    name: str  # "rollout.group_size"
    label: str
    help: str
    widget: str  # number, text, select, checkbox, json
    value: Any
    error: str = ""
    choices: list[str] = field(default_factory=list)
    nullable: bool = False
    minimum: float | None = None
    maximum: float | None = None
    step: str = "any"
    components: list[str] = field(default_factory=list)  # a switched section's knob: the kinds that own it
    limit: str = ""  # the deployment's ceiling on this knob, if any
    descriptions: dict[str, str] = field(default_factory=dict)  # a kind select: each choice's one line
    suggestions: list[str] = field(default_factory=list)  # a text field's picker (a datalist): e.g. saved models
    empty: Any = None  # a json field's value when left blank: {} for an object, [] for a list

    @property
    def form_value(self) -> str | bool:
        """What the form's input holds for this value: checked or not, else its text."""
        return bool(self.value) if self.widget == "checkbox" else self.shown

    @property
    def shown(self) -> str:
        if self.widget == "json":
            return json.dumps(self.value, indent=1)
        return "" if self.value is None else str(self.value)


@dataclass
class FormSection:
    name: str
    help: str
    fields: list[FormField]
    switch: str = ""  # a switched section: the field that chooses its kind ("resources.executor")
    kinds: list[str] = field(default_factory=list)  # ... and the kinds it may choose
    other: str = ""  # ... the kind of a value that names none (a model's directory: "pretrained")


def _describe(prop: dict) -> tuple[dict, bool]:
    """The non-null branch of an Optional field, and whether null is allowed."""
    options = prop.get("anyOf")
    if options:
        concrete = [o for o in options if o.get("type") != "null"]
        return {**prop, **concrete[0]}, len(concrete) < len(options)
    return prop, False


def make_field(name: str, prop: dict, value: Any, error: str) -> FormField:
    prop, nullable = _describe(prop)
    kind = prop.get("type")
    made = FormField(name=name, label=name.split(".")[-1], help=prop.get("description", ""), widget="text",
                     value=value, error=error, nullable=nullable)  # fmt: skip
    if "enum" in prop or "const" in prop:
        made.widget, made.choices = "select", [str(c) for c in prop.get("enum", [prop.get("const")])]
    elif kind == "boolean":
        made.widget = "checkbox"
    elif kind in ("integer", "number"):
        made.widget = "number"
        made.step = "1" if kind == "integer" else "any"
        made.minimum = prop.get("minimum", prop.get("exclusiveMinimum"))
        made.maximum = prop.get("maximum", prop.get("exclusiveMaximum"))
    elif kind in ("object", "array"):
        made.widget = "json"
        made.empty = [] if kind == "array" else {}
    return made


def _definition(ref: str) -> dict:
    return SCHEMA["$defs"][ref.split("/")[-1]]


def section_kinds(section: str) -> tuple[list[str], dict[str, tuple[dict, list[str]]]]:
    """A switched section's kinds, and each knob's schema (from its first owner) with the kinds owning it."""
    switch = SWITCHED_SECTIONS[section].knob
    knobs: dict[str, tuple[dict, list[str]]] = {}
    for kind, about in SCHEMA["x-components"][section].items():
        for knob, prop in _definition(about["$ref"])["properties"].items():
            if knob != switch:
                knobs.setdefault(knob, (prop, []))[1].append(kind)
    return list(SCHEMA["x-components"][section]), knobs


def kind_summaries(section: str) -> dict[str, str]:
    """Each kind of a switched section with its one-line description (the schema's description of its switch)."""
    switch = SWITCHED_SECTIONS[section].knob
    summaries = {}
    for kind, about in SCHEMA["x-components"][section].items():
        described = _definition(about["$ref"])["properties"][switch].get("description", "")
        summaries[kind] = described.split(": ", 1)[-1]
    return summaries


def switch_field(section: str, value: str, kinds: list[str], errors: dict[str, str]) -> FormField:
    """The field that chooses a section's kind: a select of the kinds, or text where any value names one (a model's
    directory)."""
    switch = SWITCHED_SECTIONS[section]
    name = f"{section}.{switch.knob}"
    if switch.other:
        ref = SCHEMA["x-components"][section][switch.other]["$ref"]
        help_text = _definition(ref)["properties"][switch.knob].get("description", "")
        return FormField(name=name, label=switch.knob, help=help_text, widget="text", value=value,
                         error=errors.get(name, ""), suggestions=[*(k for k in kinds if k != switch.other),
                         *SUGGESTIONS.get(section, list)()])  # fmt: skip
    return FormField(name=name, label=switch.knob, help=SCHEMA["properties"][section].get("description", ""),
                     widget="select", value=value, error=errors.get(name, ""), choices=kinds,
                     descriptions=kind_summaries(section))  # fmt: skip


def switched_section(section: str, given: dict, errors: dict[str, str]) -> FormSection:
    """A switched section: its switch, then every kind's knobs, each marked with the kinds that own it."""
    switch = SWITCHED_SECTIONS[section]
    kinds, knobs = section_kinds(section)
    chosen = kind_of(section, given)
    picker = switch_field(section, given.get(switch.knob) or switch.default, kinds, errors)
    if errors.get(section):  # a problem that spans the section, e.g. heads vs hidden_size
        picker.error = (picker.error + " " + errors[section]).strip()
    fields = [picker]
    for knob, (prop, owners) in knobs.items():
        value = given.get(knob, prop.get("default")) if chosen in owners else prop.get("default")
        made = make_field(f"{section}.{knob}", prop, value, errors.get(f"{section}.{knob}", ""))
        made.components = owners
        fields.append(made)
    help_text = SCHEMA["properties"][section].get("description", "")
    return FormSection(section, help_text, fields, switch=picker.name, kinds=kinds, other=switch.other or "")


def form_sections(values: dict, errors: dict[str, str]) -> list[FormSection]:
    top = SCHEMA["properties"]
    general = [make_field("seed", top["seed"], values.get("seed"), errors.get("seed", ""))]
    sections = [FormSection("run", "The seed of this run.", general)]
    for section in SECTION_ORDER:
        given = values.get(section, {})
        if section in SWITCHED_SECTIONS:
            sections.append(switched_section(section, given, errors))
            continue
        ref = top[section]["$ref"].split("/")[-1]
        props = SCHEMA["$defs"][ref]["properties"]
        fields = [
            make_field(f"{section}.{knob}", prop, given.get(knob), errors.get(f"{section}.{knob}", ""))
            for knob, prop in props.items()
        ]
        if errors.get(section):  # a problem that spans the section, e.g. heads vs hidden_size
            fields[0].error = (fields[0].error + " " + errors[section]).strip()
        sections.append(FormSection(section, top[section].get("description", ""), fields))
    show_ceilings(sections)
    return sections


def form_values(values: dict) -> dict[str, str | bool]:
    """Every field's input value for a config (see FormField.form_value)."""
    return {f.name: f.form_value for section in form_sections(values, {}) for f in section.fields}


@functools.cache
def preset_values() -> dict[str, Any]:
    """What the launch form needs to switch presets without a reload and to mark what a preset sets: grpo's value
    of every field, and each method's fields that differ from it."""
    base = form_values(resolve({"method": "grpo"}).model_dump(mode="json"))
    presets = {}
    for method in METHODS:
        values = form_values(resolve({"method": method}).model_dump(mode="json"))
        presets[method] = {name: value for name, value in values.items() if base.get(name) != value}
    return {"base": base, "presets": presets}


def parse_yaml(text: str) -> tuple[dict, dict[str, str]]:
    """A raw config from the YAML editor, and what is wrong with the text itself (the config is validated later).

    Bounded: MAX_YAML characters, and no anchors or aliases (a few lines of aliases expand into a huge config)."""
    problem = "config_yaml"
    if len(text) > MAX_YAML:
        return {}, {problem: f"at most {MAX_YAML} characters"}
    try:
        if any(isinstance(event, (yaml.AliasEvent,)) or getattr(event, "anchor", None) for event in yaml.parse(text)):
            return {}, {problem: "YAML anchors and aliases are not accepted: write each value out"}
        raw = yaml.safe_load(text) if text.strip() else {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        return {}, {problem: f"not valid YAML{where}: {getattr(exc, 'problem', None) or exc}"}
    if not isinstance(raw, dict):
        return {}, {problem: "a run config is a mapping of sections to knobs (e.g. rollout: {group_size: 8})"}
    shape = shape_problems(raw)  # before the form, the presets or the warnings read any of it
    if shape:
        return {}, shape
    return raw, {}


def check_config(raw: dict) -> tuple[Any, dict[str, str]]:
    """The resolved RunConfig and no problems, or None and the config's problems by field, as the launch would
    report them: through the one entry point a launch passes (its data paths, the deployment's limits)."""
    try:
        return validate_config(raw), {}
    except ConfigError as exc:
        return None, exc.fields or {"config_yaml": str(exc)}


def show_ceilings(sections: list[FormSection]) -> None:
    """Each knob the deployment bounds says so beside its own help."""
    ceilings = form_ceilings()
    for f in (f for section in sections for f in section.fields):
        if f.name in ceilings:
            f.limit = ceilings[f.name]


def parse_form(post) -> tuple[dict, dict[str, str]]:
    """A raw config dict from the submitted form, and the errors found before validation."""
    raw: dict[str, Any] = {"method": post.get("method") or None}
    errors: dict[str, str] = {}
    for section in form_sections({}, {}):
        chosen = posted_kind(section, post)
        for f in section.fields:
            if f.components and chosen not in f.components:
                continue  # a knob of a kind that was not chosen
            value = parse_value(f, post, errors)
            if "." in f.name:
                head, knob = f.name.split(".", 1)
                raw.setdefault(head, {})[knob] = value
            else:
                raw[f.name] = value
    return raw, errors


def posted_kind(section: FormSection, post) -> str:
    """The kind the submitted form chose for a switched section ("" for a section that is not switched)."""
    if not section.switch:
        return ""
    value = post.get(section.switch)
    return kind_of(section.name, {section.switch.split(".", 1)[1]: value} if value is not None else {})


def parse_value(f: FormField, post, errors: dict[str, str]) -> Any:
    if f.widget == "checkbox":
        return f.name in post
    text = post.get(f.name, "")
    if f.widget == "json":
        if len(text) > MAX_JSON_FIELD or depth_exceeds(text, 16):
            errors[f.name] = f"at most {MAX_JSON_FIELD} characters, nested at most 16 deep"
            return f.empty
        try:
            return json.loads(text) if text.strip() else f.empty
        except json.JSONDecodeError as exc:
            errors[f.name] = f"not valid JSON ({exc.msg})"
        except ValueError:  # e.g. an integer of thousands of digits
            errors[f.name] = "not valid JSON (a number out of range)"
        return f.empty
    if text.strip() == "" and f.nullable:
        return None
    return text.strip()


def duration_estimate(values: dict) -> str:
    """How long the form's config would take, roughly (workers.estimates); nothing while the config is invalid."""
    try:
        return estimates.described(resolve(values))
    except ConfigError:
        return ""


def prompt_preview(values: dict) -> dict[str, str]:
    """The prompt the form's config would give its model for a training example ({question, rendered}), or why
    there is none to show; nothing while the config is invalid (its errors say why)."""
    try:
        cfg = validate_config(values)  # its paths resolved inside the deployment's roots
    except ConfigError:
        return {}
    if cfg.model.name in PACKAGED_MODELS and not (unpacked(cfg.model.name) / "config.json").is_file():
        return {"note": "shown once a first run has unpacked the model"}
    directory = None if cfg.model.name == "tiny" else unpacked_or_directory(cfg.model.name)
    try:
        preview = preview_of(cfg, directory)
    except (UserError, TemplateError, ValueError) as exc:  # a dataset file that does not read, a broken template
        return {"note": f"no preview: {exc}"}
    if preview is None:
        return {"note": "no preview: the model's chat template cannot be read"}
    return {"question": preview.question, "rendered": preview.rendered}


def unpacked_or_directory(name: str) -> Path:
    return unpacked(name) if name in PACKAGED_MODELS else Path(name)


def schedule_warnings(values: dict) -> list[str]:
    """The knobs the form's config leaves inert (workers.schedule_checks); none while the config is invalid."""
    try:
        return schedule_checks.warnings(resolve(values))
    except ConfigError:
        return []


class LaunchQuery(Strict):
    """The launch form's query: ?from=<run id> (its config) or ?method=<preset>."""

    from_: Id | None = Field(None, alias="from")
    method: Name | None = None


class LaunchFields(Strict):
    """What the launch and sweep forms send beside the knobs."""

    model_config = Strict.model_config | {"extra": "ignore"}  # the knobs are parse_form's
    name: Name = ""
    tags: Tags = []
    project: ProjectName = "default"

    @classmethod
    def from_post(cls, post) -> LaunchFields:
        values = {key: post.get(key) for key in ("name", "project") if post.get(key)}
        values["tags"] = [t.strip() for t in post.get("tags", "").split(",") if t.strip()]
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            raise UserInputError("invalid launch fields", field_errors(exc)) from None


def launch_defaults(user, query: LaunchQuery) -> dict:
    """Form values: a run's config (?from=<id>, one the user may see), else a method's preset over the defaults."""
    if query.from_ is not None:
        run = get_run_for_user(user, query.from_)
        if run.kind != Kind.TRAINER:  # an external run's config is its script's own JSON, not a RunConfig
            raise UserInputError(
                f"run {run.id} was reported by a script: its config is the script's, not one Rollout Lab launches",
                {"from": "a run Rollout Lab trained"},
            )
        return run.config
    method = query.method if query.method in METHODS else "grpo"
    return resolve({"method": method}).model_dump(mode="json")


class ShareForm(Strict):
    """How long a share link opens."""

    model_config = Strict.model_config | {"extra": "ignore"}  # the CSRF token comes along
    days: int = Field(7, ge=1, le=90)

    @classmethod
    def from_post(cls, post) -> ShareForm:
        try:
            return cls.model_validate({"days": post.get("days") or 7})
        except ValidationError as exc:
            raise UserInputError("invalid share link", field_errors(exc)) from None
