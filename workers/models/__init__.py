"""The policy: a causal LM and its tokenizer, built-in `tiny` or loaded from a local directory.

This package and workers.models.shape import no torch: the web side checks a config's model
with them. The network itself is loaded by workers.models.policy (torch):

    policy = load_policy(cfg, task, device)   # workers.models.policy; never downloads anything
    ids = policy.encode_prompt("12+34=")
"""

from __future__ import annotations

import os
from pathlib import Path

from workers.errors import ConfigError

# Nothing is ever downloaded at run time: every model comes from the cache or a local directory.
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def check_model_source(cfg) -> None:
    """Fail before the run starts if model.name is neither 'tiny' nor a model directory."""
    name = cfg.model.name
    if name != "tiny" and not (Path(name) / "config.json").is_file():
        raise ConfigError(f"model.name: '{name}' is neither 'tiny' nor a directory holding a saved model (config.json)")
