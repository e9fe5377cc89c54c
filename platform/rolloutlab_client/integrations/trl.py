"""Stream a TRL GRPOTrainer run into Rollout Lab: its metrics, a sample of its completions, its end.

    from rolloutlab_client.integrations.trl import RolloutLabCallback

    trainer = GRPOTrainer(model=..., reward_funcs=[...], args=GRPOConfig(..., logging_steps=1), ...)
    trainer.add_callback(RolloutLabCallback(project="gsm8k", trainer=trainer))  # ROLLOUTLAB_URL, _TOKEN
    trainer.train()

Metrics: each `on_log`, at the trainer's global step, under Rollout Lab's names where TRL's have
one (TRL_NAMES; `rewards/<fn>/...` become `reward/<fn>/...`), else under `trl/<name>`, so a TRL
run and a run of ours compare on the same charts.

Samples: GRPOTrainer keeps the prompts, completions, rewards per function and advantages of its
latest generation batch for its completions table (`trainer._logs`, what `log_completions` prints);
at each log the callback sends up to `samples_per_log` of them, once per batch. That table is TRL's
internal state (checked against trl 1.16): without `trainer=`, or if a TRL version lacks it,
only the metrics are sent. The run ends as "finished" on `on_train_end`; a training that raises
ends as "failed" when the script exits (rolloutlab_client.client's exit hook).

Imports transformers, not TRL itself, and nothing from Django.
"""

from __future__ import annotations

import logging
import math
import re
from typing import Any

from transformers import TrainerCallback

from rolloutlab_client import client
from workers import metrics as metric

logger = logging.getLogger(__name__)

# TRL's log keys -> Rollout Lab's metric names (docs: DESIGN.md, "Metric names")
TRL_NAMES = {
    "loss": metric.LOSS,
    "entropy": metric.ENTROPY,
    "kl": metric.KL_REF,
    "clip_ratio/low_mean": metric.CLIP_RATIO_LOW,
    "clip_ratio/high_mean": metric.CLIP_RATIO_HIGH,
    "grad_norm": metric.GRAD_NORM,
    "learning_rate": metric.LR,
    "reward": metric.REWARD_MEAN,
    "reward_std": metric.REWARD_STD,
    "frac_reward_zero_std": metric.FRAC_ZERO_STD,
    "step_time": metric.STEP_S,
}
SHARED_PREFIXES = (metric.COMPLETIONS_PREFIX,)  # TRL's names there are ours already


def metric_name(key: str) -> str:
    """Rollout Lab's name for one of TRL's log keys; evaluation keys (eval_*) go under eval/."""
    if key.startswith("eval_"):
        return metric.EVAL_PREFIX + metric_name(key.removeprefix("eval_"))
    if key in TRL_NAMES:
        return TRL_NAMES[key]
    if key.startswith("rewards/"):
        return metric.REWARD_PREFIX + key.removeprefix("rewards/")
    return safe_name(key if key.startswith(SHARED_PREFIXES) else f"trl/{key}")


def safe_name(text: str) -> str:
    """`text` as a valid metric name: a letter first, then letters, digits and _ @ . / - only."""
    name = re.sub(r"[^\w@./-]", "_", text)
    return (name if name[:1].isascii() and name[:1].isalpha() else f"x_{name}")[:200]


class RolloutLabCallback(TrainerCallback):
    """Reports a Trainer's logs (and, given `trainer`, a GRPOTrainer's completions) to an external run."""

    def __init__(
        self,
        project: str,
        name: str | None = None,
        config: dict[str, Any] | None = None,
        *,
        trainer=None,
        samples_per_log: int = 16,
        url: str | None = None,
        token: str | None = None,
        run: client.Run | None = None,
    ):
        self.project, self.name, self.extra_config = project, name, config or {}
        self.trainer, self.samples_per_log = trainer, samples_per_log
        self.url, self.token = url, token
        self.run = run
        self._last_batch: int | None = None

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if not state.is_world_process_zero or self.run is not None:
            return
        config = {
            "trainer": type(self.trainer).__name__ if self.trainer is not None else None,
            "model": getattr(getattr(model, "config", None), "_name_or_path", None) or type(model).__name__,
            "args": args.to_dict(),
            **self.extra_config,
        }
        name = (self.name or args.run_name or "")[:200] or None  # run_name may default to a long output_dir
        self.run = client.Run(self.project, client.jsonable(config), name,
                              url=self.url, token=self.token, total_steps=state.max_steps)  # fmt: skip

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or self.run is None:
            return
        metrics = {metric_name(k): v for k, v in (logs or {}).items() if isinstance(v, int | float)}
        try:
            self.run.log(metrics, step=state.global_step)
            samples = self.latest_samples()
            if samples:
                self.run.log_samples(samples, step=state.global_step)
        except ValueError:  # pydantic's ValidationError too: a report must never stop a long training
            logger.exception("Rollout Lab run #%s: could not report step %s", self.run.id, state.global_step)

    def on_train_end(self, args, state, control, **kwargs):
        if state.is_world_process_zero and self.run is not None:
            self.run.finish("finished")

    def latest_samples(self) -> list[dict[str, Any]]:
        """Up to samples_per_log rows of GRPOTrainer's completions table, if it holds a batch not sent yet."""
        table = getattr(self.trainer, "_logs", None)
        if not isinstance(table, dict) or not {"prompt", "completion", "rewards", "advantages"} <= table.keys():
            return []
        prompts, completions = list(table["prompt"]), list(table["completion"])
        batch = hash((tuple(map(str, prompts)), tuple(map(str, completions))))
        if not completions or batch == self._last_batch:
            return []
        self._last_batch = batch
        rewards = {fn: list(values) for fn, values in table["rewards"].items()}
        weights = getattr(self.trainer, "reward_weights", None)
        weights = weights.tolist() if weights is not None else [1.0] * len(rewards)
        advantages = list(table["advantages"])
        rows = []
        for i in range(min(self.samples_per_log, len(completions))):
            mine = {fn: values[i] for fn, values in rewards.items() if i < len(values) and finite(values[i])}
            total = sum(w * mine.get(fn, 0.0) for w, fn in zip(weights, rewards))
            mine = {safe_name(fn): v for fn, v in mine.items()}  # keyed by metric names, as the wire asks
            rows.append({
                "prompt": as_text(prompts[i]) if i < len(prompts) else "",
                "completion": as_text(completions[i]),
                "reward": total,
                "rewards": mine,
                "advantage": advantages[i] if i < len(advantages) and finite(advantages[i]) else None,
            })  # fmt: skip
        return rows


def finite(value) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


def as_text(value) -> str:
    """A prompt or completion as text: a conversation (TRL's conversational format) one message a line."""
    if isinstance(value, list):
        return "\n".join(f"{m.get('role', '?')}: {m.get('content', '')}" if isinstance(m, dict) else str(m)
                         for m in value)  # fmt: skip
    return str(value)
