"""The prompt a run's model will read, rendered on the web side, where neither torch nor transformers is imported
(transformers' tokenizers import torch): the launch form shows it for a training example as the config stands.

A chat template is a Jinja template in the model's directory; it is rendered here as transformers renders it (a
sandboxed environment with trimmed blocks, loop controls, `raise_exception`, `strftime_now` and a `tojson` that
keeps non-ASCII text, the tokenizer's special tokens as variables), and tests compare the two on the same model.

    preview = prompt_preview(cfg, model_dir)   # a Preview, or None when there is nothing to read the template from
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np

from workers.models.directory import CHAT_TEMPLATE_FILES, read_json
from workers.models.prompts import chat_messages, plain_text, task_instruction, uses_chat


@dataclass(frozen=True)
class Preview:
    question: str  # a training example's question, as the task writes it
    rendered: str  # what the model reads
    chat: bool  # rendered through the chat template


def chat_template(directory: Path) -> str | None:
    """The template's source: chat_template.jinja, chat_template.json or tokenizer_config.json's entry."""
    if (directory / CHAT_TEMPLATE_FILES[0]).is_file():
        return (directory / CHAT_TEMPLATE_FILES[0]).read_text(encoding="utf-8")
    for name in (CHAT_TEMPLATE_FILES[1], "tokenizer_config.json"):
        template = read_json(directory / name).get("chat_template")
        if isinstance(template, str):
            return template
    return None


def special_tokens(directory: Path) -> dict[str, str]:
    """bos_token, eos_token, ... as the tokenizer names them (a string, or an added token's `content`)."""
    config = {**read_json(directory / "special_tokens_map.json"), **read_json(directory / "tokenizer_config.json")}
    tokens = {}
    for key in ("bos_token", "eos_token", "unk_token", "pad_token"):
        value = config.get(key)
        value = value.get("content") if isinstance(value, dict) else value
        if isinstance(value, str):
            tokens[key] = value
    return tokens


def render_chat_template(template: str, messages: list[dict], tokens: dict[str, str]) -> str:
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message):
        raise ValueError(message)

    environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    environment.filters["tojson"] = lambda value, indent=None, **_: json.dumps(value, ensure_ascii=False, indent=indent)
    environment.globals.update(raise_exception=raise_exception, strftime_now=lambda f: datetime.now().strftime(f))
    return environment.from_string(template).render(
        messages=messages, add_generation_prompt=True, tools=None, documents=None, **tokens
    )


def prompt_preview(cfg, directory: Path | None) -> Preview | None:
    """The prompt of the first training example the run would draw. `directory`: the model's saved directory
    (None for the tiny model, which reads plain text); None when a chat template is wanted but not readable."""
    from workers.tasks import build_task

    task = build_task(cfg)
    question = task.train_batch(1, np.random.default_rng(cfg.seed))[0].prompt
    template = chat_template(directory) if directory is not None else None
    chat = uses_chat(cfg.prompt.format, template is not None)
    p = cfg.prompt
    instruction = task_instruction(p, task.instruction, chat)
    if not chat:
        return Preview(question, plain_text(p.system, p.template, instruction, question, p.examples), chat=False)
    if template is None:
        return None
    messages = chat_messages(p.system, p.template, instruction, question, p.examples)
    return Preview(question, render_chat_template(template, messages, special_tokens(directory)), chat=True)
