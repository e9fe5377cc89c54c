"""Peak memory of a tiny-model training: `python -m workers run` against TRL's GRPOTrainer.

Ours runs the tiny example (examples/grpo-arith.yaml, evaluation included) for
--steps steps; TRL runs the same warm-started model on batches of the same size
(64 prompts x G=8, <= 8 new tokens) for as many steps. Each runs in its own
process, and the figure is that process's peak resident set size.

    python bench/peak_memory.py [--steps 40]

Last line: {"bench": "peak_memory", "ours": GB, "peer": GB, "unit": "GB", "ratio": ours/peer}
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BUDGET_GB = 1.5

TRL_RUN = """
import sys, copy, tempfile, numpy as np
from trl import GRPOConfig, GRPOTrainer
from datasets import Dataset
from workers.config import load_config
from workers.models.policy import load_policy
from workers.tasks import build_task
import torch
cfg = load_config(sys.argv[1], sys.argv[3:])
task = build_task(cfg)
policy = load_policy(cfg, task, torch.device("cpu"))
prompts, group = cfg.rollout.prompts_per_step, cfg.rollout.group_size
examples = task.train_batch(prompts * int(sys.argv[2]), np.random.default_rng(1))
data = Dataset.from_list([{"prompt": e.prompt, "answer": e.answer} for e in examples])
def correct(prompts, completions, answer, **_):
    return [float(c.strip() == a) for c, a in zip(completions, answer)]
with tempfile.TemporaryDirectory() as out:
    args = GRPOConfig(output_dir=out, per_device_train_batch_size=prompts * group, num_generations=group,
                      max_completion_length=cfg.rollout.max_new_tokens,
                      learning_rate=cfg.optimizer.lr, beta=0.0, loss_type="grpo", max_steps=int(sys.argv[2]),
                      use_cpu=True, report_to="none", save_strategy="no", disable_tqdm=True, logging_steps=10_000)
    GRPOTrainer(model=policy.model, reward_funcs=[correct], args=args, train_dataset=data,
                processing_class=policy.tokenizer).train()
"""


# A fresh launcher per measurement: RUSAGE_CHILDREN is a maximum over all children ever waited for.
LAUNCHER = """
import resource, subprocess, sys
subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def peak_gb(command: list[str]) -> float:
    """Run a command to completion in its own launcher; return its peak resident set size in GB."""
    out = subprocess.run(
        [sys.executable, "-c", LAUNCHER, *command], check=True, cwd=REPO, capture_output=True, text=True
    )
    return int(out.stdout.split()[-1]) / 2**20


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=40)
    steps = parser.parse_args().steps
    os.environ.setdefault("ROLLOUTLAB_CACHE", str(REPO / ".cache" / "rolloutlab"))
    example = str(REPO / "examples" / "grpo-arith.yaml")
    batch = [f"schedule.steps={steps}", f"eval.every={steps}"]
    with tempfile.TemporaryDirectory() as out:
        sets = [arg for override in batch for arg in ("--set", override)]
        cmd = [sys.executable, "-m", "workers", "run", example, "--out", f"{out}/run", "--no-progress", *sets]
        ours = peak_gb(cmd)
    peer = peak_gb([sys.executable, "-c", TRL_RUN, example, str(steps), *batch])
    print(f"peak RSS: ours {ours:.2f} GB (budget {BUDGET_GB} GB), TRL GRPOTrainer {peer:.2f} GB")
    print(json.dumps({"bench": "peak_memory", "ours": ours, "peer": peer, "unit": "GB", "ratio": ours / peer}))
    if ours > BUDGET_GB:
        sys.exit(f"peak memory {ours:.2f} GB is over the {BUDGET_GB} GB budget")


if __name__ == "__main__":
    main()
