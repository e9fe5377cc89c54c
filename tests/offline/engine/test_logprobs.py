"""The trainer scores a completion exactly as the sampler did, and only completion tokens carry gradient.

On-policy, the ratio pi / pi_old must be 1: any gap between the sampler's log-probabilities
and the trainer's (dropout, padding, another dtype or engine) shows up as clipping and
zero-gradient sequences that the method never asked for.
"""

import pytest
import torch

from tests.conftest import small_config
from tests.offline.engine.test_models import save_gpt2_with_bpe
from workers import metrics as metric
from workers.reporting import MemoryReporter
from workers.training.learner import recomputes_old_logprobs
from workers.training.microbatch import token_parts
from workers.training.trainer import Trainer


def trainer_and_batch(cfg):
    trainer = Trainer(cfg, MemoryReporter())
    batch = trainer.collector.collect(1, trainer.policy, trainer.backends.sampler, version=0).batch
    trainer.learner.compute_advantages(batch)
    return trainer, batch


def trainer_logprobs(trainer, batch):
    """The trainer's own log-probabilities of every completion, in train() mode as during an update."""
    rows = batch.in_loss.nonzero().flatten()
    inputs = trainer.learner.training_inputs(batch, rows)
    trainer.policy.model.train()
    with torch.no_grad():
        logprobs = trainer.learner.forwards.logprobs(trainer.policy.model, inputs)[0]
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


def test_a_token_left_out_of_the_loss_stays_in_the_context_of_the_tokens_after_it():
    # an advantage's token_mask (d3s's top tokens) narrows the loss, never the attention: the kept tokens are
    # scored in the context they were sampled in, so the first update is on policy for them too
    cfg = small_config(model={"warmup_steps": 0}, rollout={"max_new_tokens": 6})
    trainer, batch = trainer_and_batch(cfg)
    every_other = torch.zeros_like(batch.mask, dtype=torch.bool)
    every_other[:, ::2] = True
    batch.token_mask = every_other & batch.mask.bool()
    logprobs, inputs = trainer_logprobs(trainer, batch)
    rows = batch.in_loss.nonzero().flatten()
    assert torch.equal(inputs["mask"], (batch.mask * batch.token_mask)[rows])
    assert torch.equal(inputs["attention_mask"][:, -batch.mask.shape[1] :], batch.mask[rows].long())
    gap = (logprobs - inputs["old_logprobs"]).abs() * batch.mask[rows]  # every sampled token, kept or not
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
    trainer.backends.own = SkewedSampler(trainer.backends.own)
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
    cfg = small_config(
        model={"warmup_steps": 0},
        task={"digits": 2, "operands": 3},
        rollout={"prompts_per_step": 8, "max_new_tokens": 8},  # long enough that some end before the last token
    )
    trainer, batch = trainer_and_batch(cfg)
    model = trainer.policy.model
    rows = batch.in_loss.nonzero().flatten()
    inputs = trainer.learner.training_inputs(batch, rows)
    inputs["advantages"] = torch.linspace(0.5, 1.5, len(rows))  # every row pushes (untrained, most are 0)
    captured = {"embeddings": [], "logits": []}  # one per forward: the prompts', then the completions'

    def keep(name):
        def hook(module, args, output):
            output.retain_grad()
            captured[name].append(output)

        return hook

    handles = [
        model.get_input_embeddings().register_forward_hook(keep("embeddings")),  # (P, L, C), (B, T-1, C)
        model.get_output_embeddings().register_forward_hook(keep("logits")),  # (P, 1, V), (B, T-1, V)
    ]
    model.train()
    logprobs, _ = trainer.learner.forwards.logprobs(model, inputs)
    for handle in handles:
        handle.remove()
    trainer.stages.objective(trainer_loss_inputs(trainer, logprobs, inputs)).loss.backward()

    mask = inputs["mask"] > 0  # (B, T)
    assert (~mask).any() and mask.any()
    prompt_logits, completion_logits = (out.grad.abs().sum(-1) for out in captured["logits"])  # (P, 1), (B, T-1)
    assert (prompt_logits > 0).all()  # a prompt's last position predicts its rows' first tokens
    assert (completion_logits[mask[:, 1:]] > 0).all()  # completion position t predicts token t+1
    assert (completion_logits[~mask[:, 1:]] == 0).all()

    prompt_embeddings, completion_embeddings = (out.grad.abs().sum(-1) for out in captured["embeddings"])
    padding = inputs["prompt_mask"] == 0  # (P, L): left padding
    assert padding.any()
    assert (prompt_embeddings[padding] == 0).all() and (prompt_embeddings[~padding] > 0).all()
    after_end = ~mask[:, :-1]  # (B, T-1): tokens after the end-of-sequence token (the last one is never fed)
    assert after_end.any()
    assert (completion_embeddings[after_end] == 0).all()


def trainer_loss_inputs(trainer, logprobs, inputs):
    from workers.pipeline.objective.base import aggregator
    from workers.pipeline.stages import LossInputs

    mask = inputs["mask"]
    aggregate = aggregator(trainer.cfg.objective.aggregation, mask, trainer.cfg.rollout.max_new_tokens)
    return LossInputs(logprobs, inputs["old_logprobs"], inputs["advantages"], mask, aggregate)


def test_length_buckets_give_the_same_logprobs_entropies_and_gradient_over_fewer_positions():
    cfg = small_config(
        model={"warmup_steps": 0},  # random weights: completions of every length up to the limit
        rollout={"prompts_per_step": 8, "max_new_tokens": 24},
    )
    trainer, batch = trainer_and_batch(cfg)
    model, rows = trainer.policy.model, batch.in_loss.nonzero().flatten()
    inputs = trainer.learner.training_inputs(batch, rows)
    inputs["advantages"] = torch.linspace(-1.0, 1.0, len(rows))
    ends = (torch.arange(len(rows)) * 7) % 24 + 1  # a row's completion ends after 1 to 24 tokens
    inputs["mask"] *= (torch.arange(24) < ends[:, None]).to(inputs["mask"].dtype)
    width = inputs["prompt_ids"].shape[1]
    inputs["attention_mask"][:, width:] = inputs["mask"].long()
    inputs["position_ids"] = (inputs["attention_mask"].cumsum(-1) - 1).clamp(min=0)
    fed = []
    model.register_forward_pre_hook(lambda _, args, kwargs: fed.append(kwargs["input_ids"].numel()), with_kwargs=True)
    results = {}
    model.train()
    for buckets in (1, 4):
        trainer.learner.forwards.length_buckets = buckets  # schedule.length_buckets
        fed.clear()
        model.zero_grad()
        logprobs, entropy = trainer.learner.forwards.logprobs(model, inputs, with_entropy=True)
        trainer.stages.objective(trainer_loss_inputs(trainer, logprobs, inputs)).loss.backward()
        grads = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
        results[buckets] = (logprobs.detach(), entropy.detach(), grads, sum(fed), len(fed))
    mask = inputs["mask"] > 0
    (one_lp, one_ent, one_grad, one_positions, one_forwards), (lp, ent, grad, positions, forwards) = results.values()
    assert one_forwards == 2 and forwards == 8  # prompts, then completions: once, and once per bucket
    assert positions < 0.8 * one_positions  # the padding the buckets leave out
    torch.testing.assert_close(lp[mask], one_lp[mask], atol=1e-5, rtol=0)
    torch.testing.assert_close(ent[mask], one_ent[mask], atol=1e-5, rtol=0)
    assert (lp[~mask] == 0).sum() > 0  # past a row's last token its bucket computes nothing
    torch.testing.assert_close(grad, one_grad, atol=1e-6, rtol=1e-4)


def captured_step(trainer, inputs, chunk):
    """One optimizer step on `chunk` whose gradients are kept (and whose parameters are left as they were)."""
    model, grads = trainer.policy.model, []
    trainer.learner.optimizer.step = lambda: grads.append([p.grad.clone() for p in model.parameters()])
    model.train()
    stats = trainer.learner.optimizer_step(inputs, chunk, update=0)
    return stats, torch.cat([g.flatten() for g in grads[0]])


def test_micro_batches_bounded_by_tokens_give_the_one_forward_loss_and_gradient_for_a_coupled_objective():
    # token-mean couples rows (one sum over the chunk), the entropy and KL terms add to the loss: the gradient
    # through the leaves must carry every term, part by part
    cfg = small_config(
        model={"warmup_steps": 0},
        rollout={"prompts_per_step": 8, "max_new_tokens": 24},
        objective={"aggregation": "token-mean", "entropy_coef": 0.01, "kl_coef": 0.05},
    )
    trainer, batch = trainer_and_batch(cfg)
    rows = batch.in_loss.nonzero().flatten()
    inputs = trainer.learner.training_inputs(batch, rows)
    inputs["advantages"] = torch.linspace(-1.0, 1.0, len(rows))
    inputs["staleness"] = torch.zeros(len(rows), dtype=torch.long)  # every row fresh, as update() says
    chunk = torch.arange(len(rows))
    width = inputs["prompt_ids"].shape[1]
    budget = 4 * (width + 24)  # at most four rows of the longest length per part
    fed = []
    trainer.policy.model.register_forward_pre_hook(
        lambda _, args, kwargs: fed.append(kwargs["input_ids"].shape), with_kwargs=True
    )
    one_stats, one_grad = captured_step(trainer, inputs, chunk)
    forwards_of_one = len(fed)
    trainer.cfg.schedule.micro_batch_tokens = budget
    parts = trainer.learner.micro_batches(inputs, chunk)
    assert len(parts) >= len(rows) // 4 and sorted(torch.cat(parts).tolist()) == chunk.tolist()
    fed.clear()
    stats, grad = captured_step(trainer, inputs, chunk)
    completions = [shape for shape in fed if shape[1] > 0 and shape[0] > 1][1::2]  # a prompt forward, then its rows
    assert len(fed) == 2 * 2 * len(parts) and forwards_of_one == 2  # each part: without, then with gradient
    assert max(rows_ * (width + length + 1) for rows_, length in completions) <= budget
    assert stats[metric.LOSS] == pytest.approx(one_stats[metric.LOSS], abs=1e-6)
    torch.testing.assert_close(grad, one_grad, atol=1e-6, rtol=1e-4)


def test_token_parts_hold_every_row_once_within_the_budget_unless_a_row_alone_is_longer():
    extents = torch.tensor([5, 1, 30, 12, 12, 3, 0, 7])
    parts = token_parts(extents, prompt_width=4, budget=40)
    assert sorted(torch.cat(parts).tolist()) == list(range(8))
    for part in parts:
        longest = int(extents[part].max())
        assert len(part) * (4 + longest) <= 40 or len(part) == 1
    assert [extents[p].tolist() for p in parts] == [[30], [12, 12], [7, 5, 3], [1, 0]]


def test_a_checkpointed_network_forwards_prompt_and_completion_at_once_with_the_same_logprobs_and_gradient():
    cfg = small_config(model={"warmup_steps": 0}, rollout={"prompts_per_step": 8, "max_new_tokens": 12})
    trainer, batch = trainer_and_batch(cfg)
    model, rows = trainer.policy.model, batch.in_loss.nonzero().flatten()
    inputs = trainer.learner.training_inputs(batch, rows)
    inputs["advantages"] = torch.linspace(-1.0, 1.0, len(rows))
    model.train()
    results, fed = [], []
    model.register_forward_pre_hook(lambda _, args, kwargs: fed.append(kwargs["input_ids"].shape), with_kwargs=True)
    for checkpointed in (False, True):
        if checkpointed:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        trainer.learner.forwards.one_forward = checkpointed  # model.gradient_checkpointing sets both
        model.zero_grad()
        logprobs, _ = trainer.learner.forwards.logprobs(model, inputs)
        trainer.stages.objective(trainer_loss_inputs(trainer, logprobs, inputs)).loss.backward()
        results.append((logprobs.detach(), torch.cat([p.grad.flatten() for p in model.parameters()])))
    prompts, completions, whole = fed  # the prompts once, the completions on their cache; then one forward
    assert whole == (len(rows), prompts[1] + completions[1]) and prompts[0] < len(rows)
    mask = inputs["mask"] > 0
    torch.testing.assert_close(results[1][0][mask], results[0][0][mask], atol=1e-5, rtol=0)
    torch.testing.assert_close(results[1][1], results[0][1], atol=1e-6, rtol=1e-4)
