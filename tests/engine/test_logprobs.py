"""The trainer scores a completion exactly as the sampler did, and only completion tokens carry gradient.

On-policy, the ratio pi / pi_old must be 1: any gap between the sampler's log-probabilities
and the trainer's (dropout, padding, another dtype or engine) shows up as clipping and
zero-gradient sequences that the method never asked for.
"""

import pytest
import torch

from tests.conftest import small_config
from tests.engine.test_models import save_gpt2_with_bpe
from workers.reporting import MemoryReporter
from workers.trainer import Trainer, recomputes_old_logprobs


def trainer_and_batch(cfg):
    trainer = Trainer(cfg, MemoryReporter())
    batch = trainer.collect(1).batch
    trainer.compute_advantages(batch)
    return trainer, batch


def trainer_logprobs(trainer, batch):
    """The trainer's own log-probabilities of every completion, in train() mode as during an update."""
    rows = batch.in_loss.nonzero().flatten()
    inputs = trainer.training_inputs(batch, rows)
    trainer.policy.model.train()
    with torch.no_grad():
        logprobs = trainer.token_logprobs(trainer.policy.model, inputs)[0]
    return logprobs, inputs


def test_trainer_and_sampler_agree_on_padded_prompts_and_completions():
    cfg = small_config(
        model={"warmup_steps": 0},  # random weights: completions of every length, most cut off
        task={"digits": 2, "operands": 3},
        rollout={"prompts_per_step": 8, "max_new_tokens": 6},
    )
    trainer, batch = trainer_and_batch(cfg)
    assert len({len(p) for p in batch.prompt_ids}) > 1  # prompts are left-padded to each other
    assert len(set(batch.lengths.tolist())) > 1  # and completions right-padded
    logprobs, inputs = trainer_logprobs(trainer, batch)
    gap = (logprobs - inputs["old_logprobs"]).abs() * inputs["mask"]
    assert gap.max() < 1e-5


def test_dropout_is_off_so_an_on_policy_ratio_is_one(tmp_path):
    """A GPT-2 saved with dropout 0.1 everywhere: with dropout on in train(), ~15% of tokens fall
    outside [0.8, 1.2] on a fully on-policy step."""
    save_gpt2_with_bpe(tmp_path / "gpt2", small_config(model={"warmup_steps": 0}))
    from transformers import AutoConfig

    assert AutoConfig.from_pretrained(tmp_path / "gpt2").resid_pdrop == 0.1
    cfg = small_config(model={"name": str(tmp_path / "gpt2")}, rollout={"prompts_per_step": 8, "max_new_tokens": 6})
    trainer, batch = trainer_and_batch(cfg)
    assert not any(m.p for m in trainer.policy.model.modules() if isinstance(m, torch.nn.Dropout))
    logprobs, inputs = trainer_logprobs(trainer, batch)
    ratio = torch.exp(logprobs - inputs["old_logprobs"])[inputs["mask"] > 0]
    assert ratio.numel() > 50
    assert (ratio - 1).abs().max() < 1e-4


def test_old_logprobs_are_recomputed_by_default_unless_a_float32_policy_samples_itself():
    assert not recomputes_old_logprobs(small_config())
    assert recomputes_old_logprobs(small_config(model={"dtype": "bfloat16"}))
    assert recomputes_old_logprobs(small_config(objective={"old_logprobs": "recompute"}))
    assert not recomputes_old_logprobs(small_config(model={"dtype": "bfloat16"}, objective={"old_logprobs": "sampler"}))


class SkewedSampler:
    """Stands in for a sampler with other numerics than the trainer's (vLLM, or bf16 kernels on a
    GPU, which this machine has not): the hf backend's samples, with each log-probability off by a
    fixed pseudo-random amount of the size bf16 rounding gives."""

    def __init__(self, backend):
        self.backend, self.noise = backend, torch.Generator().manual_seed(7)

    def generate(self, prompts, n, params, generator, **request):
        out = self.backend.generate(prompts, n, params, generator, **request)
        out.logprobs = (out.logprobs + 0.02 * torch.randn(out.logprobs.shape, generator=self.noise)) * out.mask
        return out

    def sync_weights(self):
        pass

    def release_memory(self):
        pass


def gspo_first_step(old_logprobs, dtype="float32"):
    cfg = small_config(
        method="gspo",
        model={"dtype": dtype},
        objective={"old_logprobs": old_logprobs},
        rollout={"prompts_per_step": 8},
        schedule={"steps": 1, "minibatches": 1},  # the first update alone: gspo's preset brings 4
    )
    trainer = Trainer(cfg, MemoryReporter())
    trainer.backend = SkewedSampler(trainer.backend)
    trainer.run()
    return trainer.reporter.metric_rows[-1]


def test_recomputed_old_logprobs_make_the_first_update_exactly_on_policy():
    """GSPO's +-3e-4 range: sampler numbers a little off clip most sequences out of the gradient;
    the trainer's own recomputed numbers clip none, and the gap is reported."""
    skewed = gspo_first_step("sampler")
    recomputed = gspo_first_step("recompute")
    clipped = lambda row: row["policy/clip_ratio/low"] + row["policy/clip_ratio/high"]  # noqa: E731
    assert clipped(skewed) > 0.2
    assert clipped(recomputed) == 0
    assert recomputed["policy/sequence_ratio_mean"] == 1.0
    assert recomputed["policy/sampler_logprob_diff"] == pytest.approx(0.02 * (2 / torch.pi) ** 0.5, rel=0.25)
    assert "policy/sampler_logprob_diff" not in skewed


def test_a_bfloat16_policy_recomputes_and_starts_on_policy():
    row = gspo_first_step("auto", dtype="bfloat16")
    assert row["policy/clip_ratio/low"] + row["policy/clip_ratio/high"] == 0
    assert row["policy/sequence_ratio_mean"] == 1.0 and row["policy/sampler_logprob_diff"] > 0


def test_no_token_after_the_end_and_no_prompt_token_receives_gradient():
    """The loss reaches the network only through the logits that predict completion tokens up to
    and including the end-of-sequence token; padding on either side sends nothing back."""
    cfg = small_config(model={"warmup_steps": 0}, task={"digits": 2, "operands": 3}, rollout={"prompts_per_step": 8})
    trainer, batch = trainer_and_batch(cfg)
    model = trainer.policy.model
    rows = batch.in_loss.nonzero().flatten()
    inputs = trainer.training_inputs(batch, rows)
    inputs["advantages"] = torch.linspace(0.5, 1.5, len(rows))  # every row pushes (untrained, most are 0)
    captured = {}

    def keep(name):
        def hook(module, args, output):
            output.retain_grad()
            captured[name] = output

        return hook

    handles = [
        model.get_input_embeddings().register_forward_hook(keep("embeddings")),  # (B, L+T, C)
        model.get_output_embeddings().register_forward_hook(keep("logits")),  # (B, T+1, V)
    ]
    model.train()
    logprobs, _ = trainer.token_logprobs(model, inputs)
    for handle in handles:
        handle.remove()
    trainer.stages.objective(trainer_loss_inputs(trainer, logprobs, inputs)).loss.backward()

    mask = inputs["mask"] > 0  # (B, T)
    assert (~mask).any() and mask.any()
    logit_grad = captured["logits"].grad.abs().sum(-1)  # (B, T+1): position t predicts completion token t
    assert (logit_grad[:, :-1][mask] > 0).all()
    assert (logit_grad[:, :-1][~mask] == 0).all() and (logit_grad[:, -1] == 0).all()

    attended = inputs["attention_mask"] > 0  # (B, L+T): real prompt and completion tokens
    embedding_grad = captured["embeddings"].grad.abs().sum(-1)  # (B, L+T)
    assert (~attended).any()
    assert (embedding_grad[~attended] == 0).all()  # left padding and everything after the end


def trainer_loss_inputs(trainer, logprobs, inputs):
    from workers.pipeline.objective.base import aggregator
    from workers.pipeline.stages import LossInputs

    mask = inputs["mask"]
    aggregate = aggregator(trainer.cfg.objective.aggregation, mask, trainer.cfg.rollout.max_new_tokens)
    return LossInputs(logprobs, inputs["old_logprobs"], inputs["advantages"], mask, aggregate)
