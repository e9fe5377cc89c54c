"""Components of different methods combine in one run: each stage is chosen on its own."""

from tests.conftest import small_config
from workers.reporting import MemoryReporter
from workers.training.trainer import Trainer


def test_mopps_selection_with_mc_grpo_advantages_dynamic_sampling_and_overlong_filtering():
    cfg = small_config(
        method="mc-grpo",  # pivot generation and the median advantage
        control={"name": "mopps", "candidates_per_prompt": 4},
        filter={"name": "dynamic-sampling", "max_rounds": 2, "overlong": True},
        schedule={"steps": 4},
    )
    trainer = Trainer(cfg, MemoryReporter())
    assert trainer.run() == "succeeded"
    rows = trainer.reporter.metric_rows
    assert all(r["pipeline/generate/samples_per_prompt"] == 5 for r in rows)  # G + 1
    assert all(0 < r["pipeline/control/predicted_pass_rate"] < 1 for r in rows)
    assert any(r["pipeline/filter/dropped_groups"] > 0 for r in rows)
    trained = [r for r in rows if "policy/loss" in r]
    assert trained and all(r["pipeline/advantage/left_out"] >= r["pipeline/filter/kept_groups"] for r in trained)
    # one pivot per kept group is left out; the rest carry MC-GRPO's MAD-scaled advantages
    shown = [s["advantage"] for s in trainer.reporter.sample_rows if s["advantage"] is not None]
    assert shown and max(abs(a) for a in shown) >= 1000


def test_april_generation_with_vade_selection_and_mc_grpo_advantages():
    cfg = small_config(
        method="mc-grpo",  # the median advantage with MAD scale; its pivot is the median of each odd group
        generate={"name": "april", "oversample": 2.0},  # replaces mc-grpo's G+1 pivot generation ...
        rollout={"group_size": 5, "max_new_tokens": 12},  # ... so the group is drawn as G+1 = 5 directly
        control={"name": "vade", "candidates_per_prompt": 4},
        model={"warmup_steps": 0},  # an untrained policy: long, ragged completions, so rows are carried over
        schedule={"steps": 4},
    )
    trainer = Trainer(cfg, MemoryReporter())
    assert trainer.run() == "succeeded"
    rows = trainer.reporter.metric_rows
    assert all(r["pipeline/filter/kept_groups"] == cfg.rollout.prompts_per_step for r in rows)
    assert sum(r["pipeline/generate/resumed_rows"] for r in rows) > 0  # APRIL continued completions
    assert all(0 < r["pipeline/control/sampled_variance"] <= 0.25 for r in rows)  # VADE chose the prompts
    assert rows[0]["pipeline/control/unseen_share"] == 1.0
    # MC-GRPO: one pivot per group out of the loss, the others with MAD-scaled advantages
    assert all(r["pipeline/advantage/left_out"] >= r["pipeline/filter/kept_groups"] for r in rows)
    assert trainer.state.data_stream.examples == 4 * 2 + 4 * 3  # VADE picked every prompt APRIL put in flight
