"""Does bf16 pay on this CPU? A real model's training forward and backward, float32 against bf16 autocast.

The learner's update of the SmolLM2 example (LoRA rank 16 on SmolLM2-135M-Instruct): a batch of --rows
completions of --tokens tokens after a word problem's chat prompt, forwarded through the learner's own path
(training/forwards.py) and back-propagated, timed in float32 and under torch.autocast(bfloat16), alternating;
the median of --reps. Also how far bf16's log-probabilities are from float32's (mean |gap| per token), which is
what an on-policy ratio would see.

    python bench/train_step_precision.py [--rows 32] [--tokens 128] [--reps 3]

Last line: {"bench": "train_step_precision", "ours": s (bf16 autocast), "peer": s (float32), "unit": "s/update",
"ratio": bf16 / float32, "logprob_gap": ...}
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parent.parent
TESTBED = REPO / "examples" / "grpo-smollm2-word-problems.yaml"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=32)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("ROLLOUTLAB_CACHE", str(REPO / ".cache" / "rolloutlab"))
    torch.set_num_threads(2)

    from workers.config import load_config
    from workers.models.policy import load_policy
    from workers.rollout.hf import left_pad
    from workers.tasks import build_task

    cfg = load_config(TESTBED)
    task = build_task(cfg)
    policy = load_policy(cfg, task, torch.device("cpu"))
    model = policy.model.train()
    questions = task.train_batch(max(1, args.rows // cfg.rollout.group_size), np.random.default_rng(0))
    prompts = [policy.encode_prompt(e.prompt) for e in questions for _ in range(cfg.rollout.group_size)][: args.rows]
    ids, attention = left_pad(prompts, policy.pad_id, torch.device("cpu"))
    generator = torch.Generator().manual_seed(0)
    vocab = model.get_input_embeddings().weight.shape[0]
    completion = torch.randint(0, vocab, (len(prompts), args.tokens), generator=generator)
    full = torch.cat([ids, completion], 1)
    mask = torch.cat([attention, torch.ones_like(completion)], 1)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    width = ids.shape[1]

    def update(autocast: bool) -> tuple[float, torch.Tensor]:
        context = torch.autocast("cpu", dtype=torch.bfloat16) if autocast else contextlib.nullcontext()
        model.zero_grad(set_to_none=True)
        started = time.perf_counter()
        with context:
            logits = model(input_ids=full[:, :-1], attention_mask=mask[:, :-1], position_ids=positions[:, :-1]).logits
        logprobs = torch.log_softmax(logits[:, width - 1 :].float(), -1).gather(-1, completion[..., None])[..., 0]
        logprobs.mean().backward()
        return time.perf_counter() - started, logprobs.detach()

    update(False), update(True)  # warm-up
    times = {"float32": [], "bf16": []}
    for _ in range(args.reps):
        seconds, exact = update(False)
        times["float32"].append(seconds)
        seconds, rounded = update(True)
        times["bf16"].append(seconds)
    fp32, bf16 = statistics.median(times["float32"]), statistics.median(times["bf16"])
    gap = float((rounded - exact).abs().mean())
    has_bf16 = "avx512_bf16" in Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else None
    print(f"SmolLM2-135M-Instruct + LoRA r{cfg.model.lora_rank}, {len(prompts)} rows x ({width} prompt + "
          f"{args.tokens}) tokens, CPU with 2 threads (avx512_bf16: {has_bf16})")  # fmt: skip
    print(f"median s per forward+backward: float32 {fp32:.2f}, bf16 autocast {bf16:.2f}; mean |logprob gap| {gap:.4f}")
    figures = {"ours": bf16, "peer": fp32, "unit": "s/update", "ratio": bf16 / fp32, "logprob_gap": gap}
    print(json.dumps({"bench": "train_step_precision", **figures}))


if __name__ == "__main__":
    main()
