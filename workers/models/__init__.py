"""The policy: a causal LM and its tokenizer: built-in `tiny`, a packaged model, or a local directory.

This package's __init__, shape, directory and packaged modules import no torch: the web side checks a
config's model with them. The network itself is loaded by workers.models.policy (torch):

    policy = load_policy(cfg, task, device)   # workers.models.policy; never downloads anything
    ids = policy.encode_prompt("12+34=")
"""

from __future__ import annotations

import os
from pathlib import Path

from workers.errors import ConfigError

# Nothing is ever downloaded at run time: every model comes from the cache or a local directory.
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def cache_root() -> Path:
    """$ROLLOUTLAB_CACHE, or ~/.cache/rolloutlab: the one place the CLI, the platform's workers and `make demo`
    keep warm-started and unpacked models, so that a model is built once per machine whichever of them needs it
    first."""
    return Path(os.environ.get("ROLLOUTLAB_CACHE") or Path.home() / ".cache" / "rolloutlab")


def check_model_source(cfg) -> None:
    """Fail before the run starts if model.name names no model this machine can load: neither 'tiny', an installed
    packaged model, nor a directory holding a model, a tokenizer with an end-of-sequence token and (for chat
    prompts) a chat template."""
    from workers.models.directory import model_directory_problems
    from workers.models.packaged import PACKAGED_MODELS, gguf_file

    name = cfg.model.name
    if name == "tiny":
        return
    if name in PACKAGED_MODELS:
        gguf_file(name)  # raises, saying what to install, when its package is missing
        return
    if not Path(name).exists():
        packaged = ", ".join(map(repr, PACKAGED_MODELS))
        raise ConfigError(f"model.name: '{name}' is neither 'tiny' nor a directory holding a saved model (nor a "
                          f"packaged model: {packaged})")  # fmt: skip
    problems = model_directory_problems(Path(name), chat=cfg.prompt.format == "chat")
    if problems:
        raise ConfigError(f"model.name: '{name}' cannot be used: {'; '.join(problems)}")
