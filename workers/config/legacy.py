"""The flat task, model and resources sections of the configs written before each kind owned its knobs. Frozen.

Until then every config carried every knob of these three sections whatever its kind (a jsonl task
had `digits`, a directory model had `hidden_size`, a local run had `rollout_actors`), each at its
default unless set, and a config's hash is the sha256 of that whole shape. So that every run
launched before keeps its hash, a section's canonical JSON (RunConfig.canonical_json) is still
this flat form: the chosen kind's knobs laid over these defaults. The same table tells
workers/config/migrate.py which knobs of an old config it may drop (those at these values).

Never add to it or change it: a knob a kind gains later is not listed here, so it changes the
hashes of the configs that set it, as every new knob does, and leaves every older hash alone.
"""

from __future__ import annotations

# section -> knob -> its default before the switch (floats written as floats: 1.0 hashes as "1.0", 1 as "1")
FLAT_DEFAULTS: dict[str, dict[str, object]] = {
    "task": {
        "digits": 1,
        "operands": 3,
        "min_operands": None,
        "length_tail": 1.0,
        "shortcut_share": 0.0,
        "operators": "+-",
        "warmup_digits": 1,
        "warmup_operands": 2,
        "warmup_full_share": 0.5,
        "path": None,
        "eval_path": None,
        "question_field": "question",
        "answer_field": "answer",
    },
    "model": {
        "hidden_size": 128,
        "layers": 4,
        "heads": 4,
        "init_seed": 0,
        "warmup_steps": 250,
        "warmup_lr": 3e-3,
        "warmup_batch_size": 64,
    },
    "resources": {
        "nodes": 1,
        "rollout_actors": 2,
        "actor_cpus": 1.0,
        "actor_gpus": 0.0,
        "learner_gpus": 1.0,
    },
}


# Knobs and sections added after configs were first hashed, with the value every older config computed with: each
# is hashed only when a config sets it to something else (RunConfig.canonical_json), so an older config keeps its
# hash and a config that uses the new knob gets a hash of its own. Add a new knob of an existing kind here; never
# change a value.
ADDED_KNOBS: dict[str, dict[str, object]] = {
    "model": {
        "lora_rank": 0,
        "lora_alpha": 32.0,
        "lora_target_modules": "all-linear",
        "attn_implementation": "sdpa",
        "gradient_checkpointing": False,
        "autocast": "none",
    },
    "task": {"verifier": "numeric", "answer_position": "last", "extraction": "strict"},
    "schedule": {"micro_batch_tokens": 0, "rollout_lag": None, "rollout_token_budget": None},
    "prompt": {"examples": []},
}
ADDED_SECTIONS = {"prompt", "environment"}  # hashed only when a knob of theirs is set
