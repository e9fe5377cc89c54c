"""The built-in `tiny` model: a small Llama network with a character tokenizer.

It is built from a seed and warm-started by a short supervised phase on the
task's easier slice, so RL starts from a model that is right sometimes (there
is a signal) and wrong often (there is something to learn). The result is
cached under $ROLLOUTLAB_CACHE (default ~/.cache/rolloutlab) by a hash of
everything that shapes it, so the second run with the same model starts at once.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from pathlib import Path

import numpy as np
import torch

from workers import progress, stopping
from workers.environments import build_environment
from workers.models import cache_root
from workers.models.shape import CHARSET, MAX_POSITIONS, SPECIALS


def char_tokenizer():
    """One token per character; <bos> is prepended to every encoded text."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate(SPECIALS + CHARSET)}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    core.decoder = decoders.Fuse()
    core.post_processor = processors.TemplateProcessing(single="<bos> $A", special_tokens=[("<bos>", 1)])
    return PreTrainedTokenizerFast(
        tokenizer_object=core, bos_token="<bos>", eos_token="<eos>", pad_token="<pad>", unk_token="<unk>"
    )


def tiny_network(cfg, vocab_size: int):
    from transformers import LlamaConfig, LlamaForCausalLM

    m = cfg.model
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=m.hidden_size,
        intermediate_size=m.hidden_size * 3,
        num_hidden_layers=m.layers,
        num_attention_heads=m.heads,
        num_key_value_heads=m.heads,
        max_position_embeddings=MAX_POSITIONS,
        tie_word_embeddings=True,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    )
    torch.manual_seed(m.init_seed)
    return LlamaForCausalLM(config)


def cache_key(cfg, task) -> str:
    """Everything that shapes the warm-started weights, and nothing else (not the run seed)."""
    import transformers

    shape = {
        "model": cfg.model.model_dump(exclude={"name", "dtype"}),
        "task": cfg.flat("task"),  # the flat form of before the task owned its knobs: cached models keep their keys
        "data": task.fingerprint(),
        "charset": "".join(CHARSET),
        "versions": [torch.__version__, transformers.__version__],
        "threads": cfg.resources.threads,  # CPU float reductions may depend on it
    }
    if cfg.environment.name != "none":  # its warm-up shows episodes (and keys made before environments hold)
        shape["environment"] = cfg.environment.model_dump()
    return hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()[:20]


def tiny_network_and_tokenizer(cfg, task):
    """The warm-started tiny model (built and cached on first use) and its tokenizer; policy.py wraps them."""
    from transformers import LlamaForCausalLM, PreTrainedTokenizerFast

    key = cache_key(cfg, task)
    path = cache_root() / "tiny" / key
    if not (path / "config.json").is_file():
        build_tiny(cfg, task, path)
    model = LlamaForCausalLM.from_pretrained(path, local_files_only=True)
    tokenizer = PreTrainedTokenizerFast.from_pretrained(path, local_files_only=True)
    return model, tokenizer, f"tiny@{key}"


def build_tiny(cfg, task, path: Path) -> None:
    """Initialise, warm-start and save atomically: a concurrent builder never sees a half-written model."""
    tokenizer = char_tokenizer()
    model = tiny_network(cfg, len(tokenizer))
    warm_start(model, tokenizer, task, cfg)
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=path.name + ".", dir=path.parent))
    model.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    try:
        staging.rename(path)
    except OSError:  # another process finished first; its copy is identical
        shutil.rmtree(staging, ignore_errors=True)


def warm_start(model, tokenizer, task, cfg) -> None:
    """Supervised next-token training on (prompt, answer) pairs; loss on the answer and <eos> only."""
    m = cfg.model
    if m.warmup_steps == 0:
        return
    rng = np.random.default_rng(m.init_seed)
    torch.manual_seed(m.init_seed)
    environment = build_environment(cfg, task)  # with one, some examples are shown as episodes
    optimizer = torch.optim.AdamW(model.parameters(), lr=m.warmup_lr, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / 20) * max(0.1, 1 - step / m.warmup_steps)
    )
    model.train()
    with progress.phase("warming up the model", total=m.warmup_steps, unit="steps") as warm_up:
        for _ in range(m.warmup_steps):
            stopping.checkpoint()
            pairs = task.warmup_pairs(m.warmup_batch_size, rng)
            if environment is not None:
                pairs = environment.demonstrations(pairs, rng)
            inputs, labels = sft_batch(tokenizer, pairs)
            loss = model(input_ids=inputs, labels=labels).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad(set_to_none=True)
            warm_up.advance()
    model.eval()


def sft_batch(tokenizer, pairs: list[tuple[str, str]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded inputs (B, T) and labels with -100 everywhere but the answer and <eos>."""
    rows, targets = [], []
    for prompt, answer in pairs:
        prompt_ids = tokenizer(prompt)["input_ids"]
        answer_ids = tokenizer(answer, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        ids = (prompt_ids + answer_ids)[:MAX_POSITIONS]
        rows.append(ids)
        targets.append(([-100] * len(prompt_ids) + answer_ids)[:MAX_POSITIONS])
    width = max(len(r) for r in rows)
    inputs = torch.full((len(rows), width), tokenizer.pad_token_id)  # (B, T)
    labels = torch.full((len(rows), width), -100)  # (B, T)
    for i, (ids, target) in enumerate(zip(rows, targets)):
        inputs[i, : len(ids)] = torch.tensor(ids)
        labels[i, : len(target)] = torch.tensor(target)
    return inputs, labels
