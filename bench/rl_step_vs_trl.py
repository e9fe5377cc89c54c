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
    python bench/rl_step_vs_trl.py --testbed examples/grpo-smollm2-word-problems.yaml --steps 4 --warmup 1 \
        --parts 4 [--peer-alone]

With a real model's testbed (SmolLM2-135M-Instruct), the batch is the testbed's (prompts x G, max_new_tokens,
temperature), both sides train LoRA adapters of its rank, alpha and target modules on a float32 base, and TRL is
given conversational prompts, which it renders with the same chat template: the same system message, question
and answer instruction as ours (the rendered texts are compared before the run). The reward is the task's own
correctness check on both sides. `--parts N` bounds memory as each side's users would: TRL forwards and
back-propagates per_device_train_batch_size = batch / N completions at a time with gradient_accumulation_steps N
(it still generates the whole batch at once), ours takes schedule.micro_batch_tokens = batch / N rows x (the longest
prompt + max_new_tokens), so a part of short completions holds more rows. Either way one optimizer step per batch.

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
    parser.add_argument("--testbed", default="examples/grpo-arith.yaml", help="the config whose model and task train")
    parser.add_argument("--warmup", type=int, default=WARMUP, help="first steps of each trainer, not timed")
    parser.add_argument("--parts", type=int, default=1, help="forward/backward passes per optimizer step (memory)")
    options = parser.parse_args()
    warmup, alone = options.warmup, options.peer_alone
    steps = options.steps + warmup

    os.environ.setdefault("ROLLOUTLAB_CACHE", str(REPO / ".cache" / "rolloutlab"))
    import torch
    import trl
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from workers.config import load_config
    from workers.reporting import MemoryReporter
    from workers.tasks import Example
    from workers.training.trainer import Trainer

    threads = torch.get_num_threads()  # torch's default, which a TRL user keeps; ours is told the same
    base = load_config(REPO / options.testbed)
    real = base.model.name != "tiny"
    batch = [] if real else BATCH  # a real model's testbed keeps its own batch and lengths
    overrides = [*batch, "eval.every=0", "schedule.minibatches=1", "schedule.save_final=false",
                 "schedule.checkpoint_every=0", f"resources.threads={threads}"]  # fmt: skip
    cfg = load_config(REPO / options.testbed, overrides)
    rollout = cfg.rollout
    prompts_per_step, group = rollout.prompts_per_step, rollout.group_size
    rows_per_part = -(-prompts_per_step * group // options.parts)
    if options.parts > 1:
        ours = Trainer(cfg, MemoryReporter())  # only to measure the prompts' width
        examples = ours.task.train_batch(prompts_per_step * steps * 2, np.random.default_rng(1))
        width = max(len(ours.policy.encode_prompt(e.prompt)) for e in examples)
        budget = rows_per_part * (width + rollout.max_new_tokens)
        cfg = load_config(REPO / options.testbed, [*overrides, f"schedule.micro_batch_tokens={budget}"])
        del ours
    ours = Trainer(cfg, MemoryReporter())
    task = ours.task

    def correct(prompts, completions, answer, **_):
        texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]  # conversational: a message
        if real:
            return [float(task.is_correct(Example(prompt="", answer=a), t)) for t, a in zip(texts, answer)]
        return [float(a == (c.strip() if c.strip().lstrip("-").isdigit() else None)) for c, a in zip(texts, answer)]

    from datasets import Dataset

    examples = task.train_batch(prompts_per_step * steps * 2, np.random.default_rng(1))
    dataset = Dataset.from_list([{"prompt": peer_prompt(ours.policy, e.prompt), "answer": e.answer} for e in examples])
    peer_model, peft_config = peer_network(ours, cfg)
    with tempfile.TemporaryDirectory() as scratch:
        args = GRPOConfig(
            output_dir=scratch,
            per_device_train_batch_size=rows_per_part,  # x gradient_accumulation_steps = prompts x G per step
            gradient_accumulation_steps=options.parts,
            num_generations=group,
            max_completion_length=rollout.max_new_tokens,
            temperature=rollout.temperature,
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
            + f", per_device_train_batch_size {args.per_device_train_batch_size} x gradient_accumulation_steps "
            f"{args.gradient_accumulation_steps}, schedule.micro_batch_tokens {cfg.schedule.micro_batch_tokens}"
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
            model=peer_model,
            reward_funcs=[correct],
            args=args,
            train_dataset=dataset,
            processing_class=ours.policy.tokenizer,
            callbacks=[Alternate()],
            peft_config=peft_config,
        )
        check_same_prompt(peer, ours.policy, examples[0].prompt)
        peer.train()

    trl_s = statistics.median(times["trl"][warmup:])
    if alone:
        print(f"steps timed: {len(times['trl']) - warmup}; median s/step TRL alone {trl_s:.4f}")
        print(json.dumps({"bench": "rl_step_vs_trl", "peer_alone": trl_s, "unit": "s/step"}))
        return
    ours_s = statistics.median(times["ours"][warmup:])
    peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(f"steps timed: {len(times['ours']) - warmup} each; median s/step ours {ours_s:.4f}, TRL {trl_s:.4f}")
    print(f"peak RSS of the process (both trainers): {peak_gb:.2f} GB", file=sys.stderr)
    print(
        json.dumps(
            {"bench": "rl_step_vs_trl", "ours": ours_s, "peer": trl_s, "unit": "s/step", "ratio": ours_s / trl_s}
        )
    )


def peer_prompt(policy, question: str):
    """What TRL is given for a question: the conversation our chat prompt renders, or our plain prompt's text."""
    from workers.models.prompts import chat_messages

    prompts = policy.prompts
    if not prompts.chat:
        return prompts.render(question)
    return chat_messages(prompts.system, prompts.template, prompts.instruction, question, prompts.examples)


def peer_network(ours, cfg):
    """The peer's model and LoRA config: a copy of our tiny network; for a real model, the same saved directory
    loaded afresh in float32 with a peft LoraConfig of our rank, alpha and target modules (TRL wraps it)."""
    if cfg.model.name == "tiny":
        return copy.deepcopy(ours.policy.model), None
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM

    from workers.models.policy import model_directory

    model = AutoModelForCausalLM.from_pretrained(model_directory(cfg.model.name), local_files_only=True)
    targets = cfg.model.lora_target_modules
    lora = LoraConfig(
        r=cfg.model.lora_rank,
        lora_alpha=cfg.model.lora_alpha,
        lora_dropout=0.0,
        target_modules=targets if targets == "all-linear" else targets.split(","),
        task_type="CAUSAL_LM",
    )
    return model, lora if cfg.model.lora_rank else None


def check_same_prompt(peer, policy, question: str) -> None:
    """Both sides read the same prompt text: TRL's chat rendering of the conversation equals ours."""
    prompt = peer_prompt(policy, question)
    if isinstance(prompt, list):
        theirs = policy.tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)
        assert theirs == policy.prompts.render(question), "the peer would read another prompt"


if __name__ == "__main__":
    main()
