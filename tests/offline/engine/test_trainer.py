"""End-to-end training on the tiny model: it updates, it is deterministic, each method's mechanic holds."""

import math

import pytest
import torch

from tests.conftest import small_config
from workers.config import METHODS
from workers.reporting import MemoryReporter, is_deterministic_metric
from workers.training.trainer import Trainer

STEP_METRICS = {
    "reward/mean", "reward/std", "reward/correct/mean", "groups/frac_zero_std", "groups/frac_all_correct",
    "groups/frac_all_wrong", "completions/mean_length", "completions/max_length", "completions/clipped_ratio",
    "policy/loss", "policy/entropy", "policy/approx_kl", "policy/clip_ratio/low", "policy/clip_ratio/high",
    "optim/grad_norm", "optim/lr", "timing/generate_s", "timing/reward_s", "timing/train_s", "timing/sync_s",
    "timing/step_s", "throughput/rollout_tokens_per_s", "counters/rollout_tokens", "counters/samples",
    "counters/wall_s", "pipeline/filter/dropped_groups", "system/rss_gb", "advantage/mean", "advantage/abs_mean",
}  # fmt: skip


def run(cfg, reporter=None):
    reporter = reporter or MemoryReporter()
    trainer = Trainer(cfg, reporter)
    state = trainer.run()
    return trainer, reporter, state


def test_training_changes_every_parameter_and_the_loss_is_finite():
    cfg = small_config(schedule={"steps": 3})
    trainer = Trainer(cfg, MemoryReporter())
    before = {name: p.detach().clone() for name, p in trainer.policy.model.named_parameters()}
    assert trainer.run() == "succeeded"
    rows = trainer.reporter.metric_rows
    assert all(math.isfinite(r["policy/loss"]) for r in rows if "policy/loss" in r)
    for name, param in trainer.policy.model.named_parameters():
        assert not torch.equal(before[name], param), f"{name} did not change"


@pytest.mark.parametrize("method", sorted(METHODS))
def test_every_method_trains_and_reports_the_metric_names(method):
    cfg = small_config(method=method, schedule={"steps": 2}, eval={"every": 2})
    _, reporter, state = run(cfg)
    assert state == "succeeded"
    step_rows = [r for r in reporter.metric_rows if "reward/mean" in r]
    assert len(step_rows) == 2
    expected = STEP_METRICS
    if cfg.environment.name != "none":  # an episode's reward is its environment's, and it reports the episodes
        expected = expected - {"reward/correct/mean"} | {"reward/environment/mean", "episodes/success"}
    missing = expected - set(step_rows[-1])
    if not step_rows[-1]["pipeline/filter/kept_groups"]:
        missing -= {n for n in STEP_METRICS if n.startswith(("policy/", "optim/", "advantage/"))}
    assert not missing
    evals = [r for r in reporter.metric_rows if "eval/pass@1" in r]
    assert [r["step"] for r in evals] == [0, 2]
    for row in evals:
        assert 0 <= row["eval/maj@k"] <= row["eval/pass@k"] <= 1  # a right majority means a right sample


def deterministic_stream(reporter):
    return [{k: v for k, v in row.items() if is_deterministic_metric(k)} for row in reporter.metric_rows]


def test_same_seed_gives_bit_identical_metrics_and_another_seed_does_not():
    cfg = lambda seed: small_config(seed=seed, schedule={"steps": 4}, eval={"every": 2})  # noqa: E731
    first, second, other = (deterministic_stream(run(cfg(s))[1]) for s in (0, 0, 1))
    assert first == second
    assert first != other
    assert len(first) == 5  # the eval at 0, then 4 steps (the evals at 2 and 4 ride in their step rows)


def test_counters_accumulate_tokens_samples_and_seconds():
    _, reporter, _ = run(small_config(schedule={"steps": 3}))
    samples = [v for _, v in reporter.series("counters/samples")]
    assert samples == [16.0, 32.0, 48.0]  # 4 prompts x 4 samples per step
    tokens = [v for _, v in reporter.series("counters/rollout_tokens")]
    assert tokens == sorted(tokens) and tokens[0] > 0
    assert reporter.series("counters/wall_s")[-1][1] > 0


def test_a_stop_request_cancels_between_phases():
    reporter = MemoryReporter(stop_after=2)
    _, _, state = run(small_config(schedule={"steps": 50}), reporter)
    assert state == "cancelled"
    assert reporter.states[-1][0] == "cancelled"
    assert len(reporter.metric_rows) == 2


def test_dapo_never_trains_on_a_group_that_is_all_right_or_all_wrong(monkeypatch):
    cfg = small_config(method="dapo", schedule={"steps": 6}, rollout={"prompts_per_step": 6})
    trainer = Trainer(cfg, MemoryReporter())
    seen = []
    original = trainer.learner.compute_advantages

    def spy(batch):
        accuracy = batch.group(batch.correct.float()).mean(-1)
        seen.append(((accuracy > 0) & (accuracy < 1)).tolist())
        return original(batch)

    monkeypatch.setattr(trainer.learner, "compute_advantages", spy)
    assert trainer.run() == "succeeded"
    dropped = sum(v for _, v in trainer.reporter.series("pipeline/filter/dropped_groups"))
    assert dropped > 0  # the filter had work to do
    assert seen and all(all(groups) for groups in seen)


def test_dapo_reports_dropped_samples_with_the_filter_reason():
    cfg = small_config(method="dapo", schedule={"steps": 4, "samples_per_step": 8})
    _, reporter, _ = run(cfg)
    fates = {s["stages"]["filter"] for s in reporter.sample_rows}
    assert "kept" in fates and "dropped: all correct or all wrong" in fates


def test_a_batch_the_filter_cannot_fill_is_reported_and_logged():
    cfg = small_config(method="dapo", filter={"max_rounds": 1}, schedule={"steps": 4})
    _, reporter, state = run(cfg)
    assert state == "succeeded"
    missing = [v for _, v in reporter.series("pipeline/filter/missing_groups")]
    kept = [v for _, v in reporter.series("pipeline/filter/kept_groups")]
    assert any(missing) and all(m + k == 4 for m, k in zip(missing, kept))
    short = [line for line in reporter.lines if "filter.max_rounds" in line]
    assert len(short) == sum(1 for m in missing if m) and "short" in short[0]


def test_each_pass_takes_exactly_the_minibatches_asked_for():
    """6 samples into 4 minibatches is 4 optimizer steps (2, 2, 1, 1), not torch.chunk's 3 (2, 2, 2)."""
    schedule = {"steps": 2, "minibatches": 4, "updates_per_batch": 2}
    cfg = small_config(rollout={"prompts_per_step": 3, "group_size": 2}, schedule=schedule)
    _, reporter, _ = run(cfg)
    assert [v for _, v in reporter.series("optim/steps")] == [8.0, 8.0]


def test_the_learning_rate_follows_the_schedule_when_minibatches_outnumber_samples():
    """2 samples into 4 minibatches: the 2 empty parts are skipped, yet every step runs at the rate
    the cosine schedule planned for its place among the 4 x 2 optimizer steps of the run."""
    cfg = small_config(
        rollout={"prompts_per_step": 1, "group_size": 2},
        schedule={"steps": 2, "minibatches": 4},
        optimizer={"schedule": "cosine", "lr": 1e-3},
    )
    trainer, reporter, _ = run(cfg)
    assert [v for _, v in reporter.series("optim/steps")] == [2.0, 2.0]
    planned = [1e-3 * trainer.learner.lr_factor(u) for u in range(8)]
    # the parts of 2 samples into 4 are (1, 1, 0, 0): optimizer steps 0, 1 and 4, 5 run
    expected = [(planned[0] + planned[1]) / 2, (planned[4] + planned[5]) / 2]
    assert [v for _, v in reporter.series("optim/lr")] == pytest.approx(expected)


def test_mc_grpo_pivot_has_zero_advantage_and_no_gradient(monkeypatch):
    cfg = small_config(method="mc-grpo", schedule={"steps": 1}, rollout={"group_size": 2, "prompts_per_step": 4})
    trainer = Trainer(cfg, MemoryReporter())
    batch = trainer.collector.collect(1, trainer.policy, trainer.backends.sampler, version=0).batch
    assert batch.group_size == 3  # G + 1
    trainer.learner.compute_advantages(batch)
    pivots = (~batch.in_loss).nonzero().flatten().tolist()
    assert len(pivots) == 4 and all(batch.advantages[p] == 0 for p in pivots)

    def params_after_update(b):
        trainer_copy = Trainer(cfg, MemoryReporter())
        trainer_copy.learner.update(b)
        return [p.detach().clone() for p in trainer_copy.policy.model.parameters()]

    # Rewrite every pivot completion: the update must not notice.
    altered = batch.select_groups(list(range(batch.num_groups)))
    for p in pivots:
        altered.tokens[p] = torch.roll(altered.tokens[p], 1)
        altered.logprobs[p] = altered.logprobs[p] - 1.0
    for a, b in zip(params_after_update(batch), params_after_update(altered)):
        assert torch.equal(a, b)


def test_kl_and_entropy_are_knobs_of_any_method():
    cfg = small_config(method="rloo", objective={"kl_coef": 0.1, "entropy_coef": 0.01}, schedule={"steps": 2})
    _, reporter, state = run(cfg)
    assert state == "succeeded"
    kl = [v for _, v in reporter.series("policy/kl_ref")]
    assert len(kl) == 2 and kl[0] == pytest.approx(0.0, abs=1e-6) and kl[1] > 0  # moves off the reference


def test_samples_carry_what_each_stage_did():
    _, reporter, _ = run(small_config(schedule={"steps": 1, "samples_per_step": 5}))
    assert len(reporter.sample_rows) == 4  # whole groups (of 4) within the budget, for the inspector to group
    sample = reporter.sample_rows[0]
    assert set(sample) >= {"prompt", "completion", "reward", "rewards", "advantage", "correct", "stages"}
    assert set(sample["stages"]) == {"generate", "filter", "replay", "advantage"}


# the update's forwards give the stored rows' entropies: the first optimizer step's, and for the rows of the second
# minibatch a forward of their own before it; recompute_old's; none (d3s masks tokens: a forward of their own)
ENTROPY_SOURCES = {
    "minibatches": {"schedule": {"minibatches": 2, "updates_per_batch": 2}},
    "recompute": {"objective": {"old_logprobs": "recompute"}, "schedule": {"minibatches": 2}},
    "token-mask": {"method": "d3s", "schedule": {}},
}


@pytest.mark.parametrize("source", ENTROPY_SOURCES)
def test_stored_entropies_are_the_policys_before_the_update_whichever_forward_gave_them(source):
    sections = ENTROPY_SOURCES[source]
    schedule = {**sections["schedule"], "steps": 2, "samples_per_step": 8}
    cfg = small_config(**{**sections, "schedule": schedule})
    trainer = Trainer(cfg, MemoryReporter())
    inspect, from_update = trainer.inspector.inspect, []

    def inspect_and_recompute(trained, generated, dropped):
        described, entropies = inspect(trained, generated, dropped)
        rows = list(entropies.samples)  # to be filled in by the update's forwards; computed here alone, before it
        from_update.extend(zip([entropies.samples[r] for r in rows], trainer.inspector.sample_entropies(trained, rows)))
        return described, entropies

    trainer.inspector.inspect = inspect_and_recompute
    assert trainer.run() == "succeeded"
    assert all(len(s["entropies"]) == s["length"] for s in trainer.reporter.sample_rows)
    assert bool(from_update) == (source != "token-mask")
    for sample, alone in from_update:
        assert sample["entropies"] == pytest.approx(alone, abs=2e-4)  # rounded to 4 decimals either way


def test_the_environment_record_is_written_before_the_first_step(tmp_path):
    reporter = MemoryReporter()
    Trainer(small_config(schedule={"steps": 1}), reporter, artifacts_dir=tmp_path).run()
    assert reporter.artifacts[0] == (str(tmp_path / "environment.json"), "environment")
    import json

    record = json.loads((tmp_path / "environment.json").read_text())
    assert record["config_hash"] == small_config(schedule={"steps": 1}).config_hash()
    assert record["seeds"] == {"run": 0, "model_init": 0}
    assert len(record["initial_weights_sha256"]) == 64 and len(record["dataset_fingerprint"]) == 64
    assert "torch" in record["packages"] and record["determinism"]["torch_threads"] == 2


def test_every_step_reports_what_it_cost_the_machine():
    from workers import metrics as metric

    reporter = MemoryReporter()
    Trainer(small_config(schedule={"steps": 3}), reporter).run()
    for row in reporter.metric_rows:
        assert 0 < row[metric.CPU_UTIL] < 100 * 64  # percent of one core, over the step
        assert 0 < row[metric.RSS_GB] < 64 and 0 < row[metric.MEM_UTIL] <= 100
        assert row[metric.RSS_GB] <= row[metric.PEAK_RSS_GB] < 64  # the high-water mark holds what is held now
        assert metric.GPU_UTIL not in row  # a CPU run has no GPU to sample


def test_the_rollout_token_budget_ends_the_run_after_the_step_that_reaches_it_and_still_evaluates():
    """Methods compared at an equal sampling budget: the step that reaches it is the last, the final evaluation
    follows; a budget never reached leaves schedule.steps in charge, and a config without it keeps its hash."""
    unbounded = run(small_config(schedule={"steps": 6}, eval={"every": 10, "size": 8}))[1]
    tokens = [v for _, v in unbounded.series("counters/rollout_tokens")]
    budget = int(tokens[2]) - 1  # reached by step 3, not by step 2
    assert tokens[1] < budget <= tokens[2]
    _, reporter, state = run(small_config(schedule={"steps": 6, "rollout_token_budget": budget},
                                          eval={"every": 10, "size": 8}))  # fmt: skip
    assert state == "succeeded" and reporter.states[-1] == ("succeeded", "3 steps")
    assert [step for step, _ in reporter.series("eval/pass@1")] == [0, 3]
    assert [v for _, v in reporter.series("counters/rollout_tokens")] == tokens[:3]  # the same steps, then a stop
    assert any(f"rollout-token budget of {budget:,} reached after step 3" in line for line in reporter.lines)
    assert run(small_config(schedule={"steps": 2, "rollout_token_budget": 10**12}))[1].states[-1][1] == "2 steps"
    plain = small_config(schedule={"steps": 6})
    assert small_config(schedule={"steps": 6, "rollout_token_budget": None}).config_hash() == plain.config_hash()
    assert small_config(schedule={"steps": 6, "rollout_token_budget": budget}).config_hash() != plain.config_hash()
