"""The policy network and its tokenizer, loaded on torch: the built-in `tiny`, a packaged model, or any causal LM
from a directory; with LoRA adapters when the config asks (workers/models/adapters.py).

policy = load_policy(cfg, task, device)   # never downloads anything (workers.models sets HF_HUB_OFFLINE)
ids = policy.encode_prompt("12+34=")      # the question as the model reads it (workers/models/prompts.py)
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
from dataclasses import dataclass
from pathlib import Path

import torch

from workers.errors import ConfigError
from workers.models import adapters
from workers.models.directory import model_directory_problems
from workers.models.prompts import Prompts
from workers.models.shape import SPECIALS


def quiet_transformers() -> None:
    """transformers draws a progress bar for every save and load; our own bar is the one that matters."""
    from transformers.utils import logging

    logging.disable_progress_bar()
    logging.set_verbosity_error()


@dataclass
class Policy:
    model: torch.nn.Module
    tokenizer: object  # a transformers tokenizer
    eos_id: int  # the token that ends a completion: the chat template's end of turn, or the end of sequence
    pad_id: int
    source: str  # "tiny@<cache key>" or the directory it was loaded from
    prompts: Prompts
    autocast: torch.dtype | None = None  # model.autocast: the dtype of the forwards' matrix products, None = dtype

    def computing(self) -> contextlib.AbstractContextManager:
        """The context every forward of the policy runs in: torch.autocast under model.autocast, else nothing."""
        return autocast_context(self.device, self.autocast)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def encode_prompt(self, question: str) -> list[int]:
        """The token ids of a task's question as the model reads it (chat template or plain)."""
        return list(self.prompts.encode(question))

    def render_prompt(self, question: str) -> str:
        return self.prompts.render(question)

    def reference(self) -> torch.nn.Module | adapters.WithoutAdapters:
        """The frozen initial policy a KL penalty measures against: with adapters, the network with them off;
        otherwise a copy of the weights as they are now (call it before training)."""
        if adapters.has_adapters(self.model):
            return adapters.WithoutAdapters(self.model)
        reference = copy.deepcopy(self.model).eval()
        for p in reference.parameters():
            p.requires_grad_(False)
        return reference

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    def decode_completions(self, generations) -> list[str]:
        """The text of every completion of a rollout.Generations, special tokens dropped."""
        rows, lengths = generations.tokens.cpu(), generations.lengths.tolist()
        return [self.decode(row[:length].tolist()) for row, length in zip(rows, lengths)]

    def weights_fingerprint(self) -> str:
        """sha256 over every parameter and buffer, by name: equal weights, equal hash."""
        digest = hashlib.sha256()
        for name, tensor in sorted(self.model.state_dict().items()):
            digest.update(name.encode())
            digest.update(tensor.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
        return digest.hexdigest()


DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def autocast_context(device: torch.device, dtype: torch.dtype | None) -> contextlib.AbstractContextManager:
    """torch.autocast on the device's type with `dtype`, or a context that changes nothing when it is None."""
    return torch.autocast(device.type, dtype=dtype) if dtype is not None else contextlib.nullcontext()


def preload() -> None:
    """Import what loading a policy imports lazily (transformers' model classes: seconds of imports).

    A prefork worker calls this in its parent, so that each fresh child it forks for a run
    inherits them loaded, and is ready for a cancel or its first step seconds sooner."""
    import tokenizers  # noqa: F401
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast  # noqa: F401


def load_policy(cfg, task, device: torch.device) -> Policy:
    quiet_transformers()
    instruction = task.instruction
    if cfg.model.name == "tiny":
        from workers.models.tiny import tiny_network_and_tokenizer

        model, tokenizer, source = tiny_network_and_tokenizer(cfg, task)
        policy = Policy(
            model=model,
            tokenizer=tokenizer,
            eos_id=SPECIALS.index("<eos>"),
            pad_id=SPECIALS.index("<pad>"),
            source=source,
            prompts=Prompts(tokenizer, cfg.prompt, instruction, "the tiny model"),
        )
    else:
        policy = pretrained_policy(cfg, model_directory(cfg.model.name), instruction)
    policy.model.to(device=device, dtype=DTYPES[cfg.model.dtype])
    policy.autocast = DTYPES.get(getattr(cfg.model, "autocast", "none"))
    disable_dropout(policy.model)
    if getattr(cfg.model, "gradient_checkpointing", False):
        # non-reentrant: the adapters' gradients flow although the frozen embeddings' outputs need none
        policy.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if getattr(cfg.model, "lora_rank", 0):
        policy.model = adapters.with_adapters(policy.model, cfg.model)
    return policy


def model_directory(name: str) -> str:
    """The directory a model.name loads from: a packaged model's copy in the cache (made on first use), or itself."""
    from workers.models.packaged import PACKAGED_MODELS, materialize

    return str(materialize(name)) if name in PACKAGED_MODELS else name


def disable_dropout(model: torch.nn.Module) -> None:
    """Turn every dropout of the network off, in train() mode too.

    The sampler scores a completion in eval() mode and the trainer rescores it in
    train() mode; with dropout on, the two disagree and an on-policy ratio is not 1
    (RL fine-tuning in TRL and verl turns it off for the same reason). Dropout lives
    in nn.Dropout modules, in float attributes that attention kernels read at call
    time (Llama's `attention_dropout`), and in the config the model was built from.
    """
    config = getattr(model, "config", None)
    if config is not None:
        for key, value in list(vars(config).items()):
            if _is_dropout_rate(key, value):
                setattr(config, key, 0.0)
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
        for key, value in list(vars(module).items()):
            if _is_dropout_rate(key, value):
                setattr(module, key, 0.0)


def _is_dropout_rate(name: str, value) -> bool:
    return isinstance(value, float) and not isinstance(value, bool) and ("dropout" in name or "pdrop" in name)


def pretrained_policy(cfg, path: str, instruction: str) -> Policy:
    """Any causal LM saved with save_pretrained; local files only, so nothing is downloaded."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    problems = model_directory_problems(Path(path), chat=cfg.prompt.format == "chat")
    if problems:
        raise ConfigError(f"model.name: '{path}' cannot be used: {'; '.join(problems)}")
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    if tokenizer.eos_token_id is None:
        raise ConfigError(f"model.name: the tokenizer in '{path}' has no end-of-sequence token")
    prompts = Prompts(tokenizer, cfg.prompt, instruction, f"'{path}'")
    model = AutoModelForCausalLM.from_pretrained(
        path, local_files_only=True, attn_implementation=cfg.model.attn_implementation
    )
    end_of_turn = prompts.end_of_turn_id()
    eos_id = end_of_turn if end_of_turn is not None else tokenizer.eos_token_id
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    source = str(Path(path).resolve())
    return Policy(model=model, tokenizer=tokenizer, eos_id=eos_id, pad_id=pad_id, source=source, prompts=prompts)
