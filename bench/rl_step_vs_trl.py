"""Seconds per RL step: Rollout Lab's trainer against TRL's GRPOTrainer, alternating in one process.

Both train the same warm-started tiny model (a copy each) on the same task with
the same batch: 16 prompts x G=8 completions of at most 8 new tokens, one
optimizer step per batch, GRPO loss, no KL. TRL drives the loop; after each of
its steps a callback runs one step of ours, so both see the same machine state.
The first steps of each are warm-up and not counted.

The peer is configured as a competent user would on this CPU: float32 (TRL's default
bf16 autocast has no fast kernels here), no gradient checkpointing (TRL's default; a
model this small has no memory to save), torch's own thread count, which ours uses too.
Our trainer's deterministic-kernel setting is scoped to its own steps (workers/repro.py),
so it no longer leaks into the peer's. The peer's settings are printed; `--peer-alone`
times the peer's loop with none of our steps between its own, to cross-check its figure.

    python bench/rl_step_vs_trl.py [--steps 30] [--peer-alone]

Needs the dev extra (pip install -e '.[dev]'), which brings TRL for the TRL integration's tests.
Last line: {"bench": "rl_step_vs_trl", "ours": s, "peer": s, "unit": "s/step", "ratio": ours/peer}
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
WARMUP = 3
BATCH = ["rollout.prompts_per_step=16", "rollout.group_size=8", "rollout.max_new_tokens=8"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=30, help="timed steps of each trainer")
    parser.add_argument("--peer-alone", action="store_true", help="time TRL only, with none of our steps between")
    options = parser.parse_args()
    steps, alone = options.steps + WARMUP, options.peer_alone

    os.environ.setdefault("ROLLOUTLAB_CACHE", str(REPO / ".cache" / "rolloutlab"))
    import torch
    import trl
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from workers.config import load_config
    from workers.reporting import MemoryReporter
    from workers.training.trainer import Trainer

    threads = torch.get_num_threads()  # torch's default, which a TRL user keeps; ours is told the same
    overrides = [*BATCH, "eval.every=0", "schedule.minibatches=1", f"resources.threads={threads}"]
    cfg = load_config(REPO / "examples" / "grpo-arith.yaml", overrides)
    ours = Trainer(cfg, MemoryReporter())
    task = ours.task

    def correct(prompts, completions, answer, **_):
        return [
            float(a == (c.strip() if c.strip().lstrip("-").isdigit() else None)) for c, a in zip(completions, answer)
        ]

    from datasets import Dataset

    examples = task.train_batch(16 * steps * 2, np.random.default_rng(1))
    dataset = Dataset.from_list([{"prompt": e.prompt, "answer": e.answer} for e in examples])
    with tempfile.TemporaryDirectory() as scratch:
        args = GRPOConfig(
            output_dir=scratch,
            per_device_train_batch_size=16 * 8,  # completions per step: 16 prompts x G = 8
            num_generations=8,
            max_completion_length=8,
            learning_rate=cfg.optimizer.lr,
            beta=0.0,
            loss_type="grpo",
            num_iterations=1,
            max_steps=steps,
            use_cpu=True,
            report_to="none",
            logging_steps=10_000,
            save_strategy="no",
            disable_tqdm=True,
            seed=0,
            dataloader_num_workers=0,
            bf16=False,  # float32, as ours: this CPU has no fast bf16 kernels
            gradient_checkpointing=False,
        )
        print(
            f"peer: TRL {trl.__version__} GRPOTrainer, bf16={args.bf16}, gradient_checkpointing="
            f"{args.gradient_checkpointing}, torch threads {torch.get_num_threads()}, deterministic algorithms "
            f"{torch.are_deterministic_algorithms_enabled()}; ours: resources.threads {cfg.resources.threads}"
            + (" (peer alone: ours not stepped)" if alone else "")
        )
        times = {"ours": [], "trl": []}

        class Alternate(TrainerCallback):
            """After each TRL step, time it, then run and time one step of ours."""

            mark = None

            def on_step_begin(self, *_, **__):
                if self.mark is None:
                    self.mark = time.perf_counter()

            def on_step_end(self, _args, state, *_, **__):
                times["trl"].append(time.perf_counter() - self.mark)
                if alone:
                    self.mark = time.perf_counter()
                    return
                started = time.perf_counter()
                ours.step(state.global_step)
                times["ours"].append(time.perf_counter() - started)
                self.mark = time.perf_counter()

        peer = GRPOTrainer(
            model=copy.deepcopy(ours.policy.model),
            reward_funcs=[correct],
            args=args,
            train_dataset=dataset,
            processing_class=ours.policy.tokenizer,
            callbacks=[Alternate()],
        )
        peer.train()

    trl_s = statistics.median(times["trl"][WARMUP:])
    if alone:
        print(f"steps timed: {len(times['trl']) - WARMUP}; median s/step TRL alone {trl_s:.4f}")
        print(json.dumps({"bench": "rl_step_vs_trl", "peer_alone": trl_s, "unit": "s/step"}))
        return
    ours_s = statistics.median(times["ours"][WARMUP:])
    peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(f"steps timed: {len(times['ours']) - WARMUP} each; median s/step ours {ours_s:.4f}, TRL {trl_s:.4f}")
    print(f"peak RSS of the process (both trainers): {peak_gb:.2f} GB", file=sys.stderr)
    print(
        json.dumps(
            {"bench": "rl_step_vs_trl", "ours": ours_s, "peer": trl_s, "unit": "s/step", "ratio": ours_s / trl_s}
        )
    )


if __name__ == "__main__":
    main()
