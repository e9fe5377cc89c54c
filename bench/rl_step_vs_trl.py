"""Seconds per RL step: Rollout Lab's trainer against TRL's GRPOTrainer, alternating in one process.

Both train the same warm-started tiny model (a copy each) on the same task with
the same batch: 16 prompts x G=8 completions of at most 8 new tokens, one
optimizer step per batch, GRPO loss, no KL. TRL drives the loop; after each of
its steps a callback runs one step of ours, so both see the same machine state.
The first steps of each are warm-up and not counted.

    python bench/rl_step_vs_trl.py [--steps 30]

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
    steps = parser.parse_args().steps + WARMUP

    os.environ.setdefault("ROLLOUTLAB_CACHE", str(REPO / ".cache" / "rolloutlab"))
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from workers.config import load_config
    from workers.reporting import MemoryReporter
    from workers.trainer import Trainer

    cfg = load_config(REPO / "examples" / "grpo-arith.yaml", [*BATCH, "eval.every=0", "schedule.minibatches=1"])
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

    ours_s = statistics.median(times["ours"][WARMUP:])
    trl_s = statistics.median(times["trl"][WARMUP:])
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
