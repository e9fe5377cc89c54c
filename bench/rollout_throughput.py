"""Rollout tokens per second: a rollout backend (hf, or vllm on a GPU) against transformers' own `generate`.

Both sample the same prompts with the same model: n completions per prompt at
temperature 1, up to --new-tokens each. Ours also returns every token's
log-probability (the objective needs it); `generate` is asked for tokens only.
Runs alternate; the median of --reps is reported.

    python bench/rollout_throughput.py                          # the tiny example's model, CPU
    python bench/rollout_throughput.py --model 1024x12 --device cuda --dtype bfloat16 --prompts 64 --new-tokens 256
    python bench/rollout_throughput.py --backend vllm --model 1024x12 --device cuda --dtype bfloat16 ...  # .[gpu]
    python bench/rollout_throughput.py --testbed examples/long-tail.yaml --prompts 32 --n 4 --new-tokens 40
    python bench/rollout_throughput.py --testbed examples/grpo-smollm2-word-problems.yaml --model testbed \
        --prompts 4 --n 8 --new-tokens 128 --reps 3       # SmolLM2-135M-Instruct, chat prompts

--model is `testbed` (alias `tiny`: the --testbed config's own model, warm-started tiny or a real one, prompts
from its task as that model reads them) or WIDTHxLAYERS for a randomly
initialised Llama of that shape with the character tokenizer (nothing is downloaded).
The vllm engine runs as its users run it for throughput: CUDA graphs captured, prefix caching on.
Last line: {"bench": "rollout_throughput", "backend": ..., "ours": tok/s, "peer": tok/s, "unit": "tokens/s",
"ratio": ours/peer}
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parent.parent


def build_policy(spec: str, device: torch.device, dtype: str, testbed: str):
    from workers.config import load_config
    from workers.models.policy import DTYPES, Policy, load_policy
    from workers.models.prompts import Prompts
    from workers.models.tiny import char_tokenizer, tiny_network
    from workers.tasks import build_task

    cfg = load_config(REPO / testbed, [f"model.dtype={dtype}"])
    task = build_task(cfg)
    if spec in ("testbed", "tiny"):
        return load_policy(cfg, task, device), task
    width, layers = (int(x) for x in spec.split("x"))
    shaped = load_config(None, base={"model": {"hidden_size": width, "layers": layers, "heads": max(1, width // 64)}})
    tokenizer = char_tokenizer()
    model = tiny_network(shaped, len(tokenizer)).to(device=device, dtype=DTYPES[dtype]).eval()
    prompts = Prompts(tokenizer, cfg.prompt, task.instruction, f"random {spec}")
    return Policy(model=model, tokenizer=tokenizer, eos_id=2, pad_id=0, source=f"random {spec}", prompts=prompts), task


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", choices=["hf", "vllm"], default="hf")
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--new-tokens", type=int, default=8)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--testbed", default="examples/grpo-arith.yaml", help="the config of the task and tiny model")
    args = parser.parse_args()
    os.environ.setdefault("ROLLOUTLAB_CACHE", str(REPO / ".cache" / "rolloutlab"))
    torch.set_num_threads(2)

    from workers.rollout import SamplingParams, build_backend
    from workers.rollout.hf import left_pad

    device = torch.device(args.device)
    policy, task = build_policy(args.model, device, args.dtype, args.testbed)
    prompts = [policy.encode_prompt(e.prompt) for e in task.train_batch(args.prompts, np.random.default_rng(0))]
    backend, params = build_backend(args.backend, policy), SamplingParams(args.new_tokens, 1.0)
    generator = torch.Generator(device).manual_seed(0)
    ids, attention = left_pad(prompts, policy.pad_id, device)

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    def ours() -> float:
        sync()
        started = time.perf_counter()
        out = backend.generate(prompts, args.n, params, generator)
        tokens = float(out.mask.sum())
        sync()
        return tokens / (time.perf_counter() - started)

    @torch.no_grad()
    def peer() -> float:
        sync()
        started = time.perf_counter()
        out = policy.model.generate(
            input_ids=ids, attention_mask=attention, do_sample=True, temperature=1.0, top_k=0, top_p=1.0,
            max_new_tokens=args.new_tokens, num_return_sequences=args.n, eos_token_id=policy.eos_id,
            pad_token_id=policy.pad_id,
        )  # fmt: skip
        completions = out[:, ids.shape[1] :]
        ended = (completions == policy.eos_id).cumsum(-1)
        tokens = float(((ended - (completions == policy.eos_id).long()) == 0).sum())  # up to and with the EOS
        sync()
        return tokens / (time.perf_counter() - started)

    ours(), peer()  # warm-up
    rates = {"ours": [], "peer": []}
    for _ in range(args.reps):
        rates["ours"].append(ours())
        rates["peer"].append(peer())
    mine, theirs = statistics.median(rates["ours"]), statistics.median(rates["peer"])
    label = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU, 2 threads"
    shape = f"{args.prompts} prompts x {args.n}, {args.new_tokens} new tokens"
    print(f"{args.model} ({args.testbed}) on {label}, {args.dtype}: {shape}")
    print(f"median tokens/s: {args.backend} backend {mine:,.0f}, transformers generate {theirs:,.0f}")
    figures = {"ours": mine, "peer": theirs, "unit": "tokens/s", "ratio": mine / theirs}
    print(json.dumps({"bench": "rollout_throughput", "backend": args.backend, **figures}))


if __name__ == "__main__":
    main()
