"""What a model directory holds, read from its JSON files alone (no torch, no transformers: the web side asks too).

A directory written by `save_pretrained` (model and tokenizer) holds config.json, the tokenizer's files
(tokenizer.json, or tokenizer_config.json beside a vocabulary) and, for an instruct model, a chat template
(chat_template.jinja, chat_template.json, or `chat_template` in tokenizer_config.json). A run needs the first two,
an end-of-sequence token to end a completion, and the chat template when its prompts are rendered as chat.

    missing = model_directory_problems(Path("/models/smollm2"), chat=True)   # [] when a run can use it
"""

from __future__ import annotations

import json
from pathlib import Path

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")
CHAT_TEMPLATE_FILES = ("chat_template.jinja", "chat_template.json")


def read_json(path: Path) -> dict:
    """A JSON object file's content; {} when it is missing or not a JSON object."""
    try:
        content = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return content if isinstance(content, dict) else {}


def has_chat_template(path: Path) -> bool:
    if any((path / name).is_file() for name in CHAT_TEMPLATE_FILES):
        return True
    return bool(read_json(path / "tokenizer_config.json").get("chat_template"))


def has_eos_token(path: Path) -> bool:
    """An end-of-sequence token named by the tokenizer (or, failing that, an id in the model's configs)."""
    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        if read_json(path / name).get("eos_token"):
            return True
    configs = ("config.json", "generation_config.json")
    return any(read_json(path / name).get("eos_token_id") is not None for name in configs)


def model_directory_problems(path: Path, chat: bool) -> list[str]:
    """What keeps a run from using the model in `path`, one phrase each; [] when nothing does.

    chat: whether the run asks for the chat template (prompt.format 'chat'; 'auto' falls back to plain text)."""
    if not path.is_dir():
        return [f"'{path}' is not a directory"]
    problems = []
    if not (path / "config.json").is_file():
        problems.append("it holds no config.json (save the model with save_pretrained)")
    if not any((path / name).is_file() for name in TOKENIZER_FILES):
        problems.append("it holds no tokenizer (save the tokenizer with save_pretrained into the same directory)")
    elif not has_eos_token(path):
        problems.append("its tokenizer has no end-of-sequence token, so a completion could never end")
    if chat and not problems and not has_chat_template(path):
        problems.append("its tokenizer has no chat template, and prompt.format is 'chat' (set it to 'plain')")
    return problems


def saved_models(root: Path, depth: int = 2, limit: int = 200) -> list[Path]:
    """The model directories (holding config.json) at most `depth` levels under root, sorted; at most `limit`."""
    found: list[Path] = []
    level = [root]
    for _ in range(depth + 1):
        found += [folder for folder in level if (folder / "config.json").is_file()]
        level = [child for folder in level for child in _subfolders(folder)]
        if len(found) >= limit:
            break
    return sorted(found)[:limit]


def _subfolders(folder: Path) -> list[Path]:
    try:
        return sorted(child for child in folder.iterdir() if child.is_dir() and not child.name.startswith("."))
    except OSError:
        return []
