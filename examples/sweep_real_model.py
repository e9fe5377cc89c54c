"""The method cards on a real model (docs/methods/*.md, "On a real model"): each preset against its base on
SmolLM2-135M-Instruct over word problems (examples/real-model-sweep.yaml), every run ended by the same rollout-token
budget, so a method is compared with grpo at an equal sampling cost. The grpo runs are the base of every card.

Where a preset's knob is counted in steps or tokens of the tiny testbed, it is set for this one (about 40 steps of
completions of about 25 tokens), and the card says so: SIRI's cycle (two compress-expand cycles in the run),
D3S's relaxation (over the run), ARRoL's check (after 8 tokens, a third of an answer, not 2 of a 1-3 token one),
DAPO's overlong zone (13 of the 64 tokens: the paper's fifth of the limit, 4,096 of 20,480).
MC-GRPO is run at G = 2 (3 samples a prompt) against grpo at G = 2 and at G = 3 (the same samples), with 24
prompts a step so that a step holds about as many samples as the base's.

    python examples/sweep_real_model.py --only G=8 --seeds 5      # the base (the first thing to run)
    python examples/sweep_real_model.py --only dapo --seeds 5     # then a card; runs already done are kept

Each finished run's bundle is written to docs/methods/real-model/ and counts as done in a later sitting, on this
machine or another (commit them); a run stopped part way goes on from its last resume checkpoint (every 10 steps).

A run takes 25-75 minutes on a 2-core CPU, as measured so far: 19-60 minutes of steps (a method that decodes fewer
tokens a step takes more steps to the budget; an AMD EPYC of the Zen 4 generation is about a sixth faster a step
than the Intel Xeon of family 6 model 207, and one host of the Zen 3 model took 2.5 times as long a step as
another), two evaluations of 2-9 minutes and a minute to load the model. Run one
at a time there (--parallel 1; each uses both cores), and start one only where the sitting has the hour: a
checkpoint lives under --out, which a later sitting on another machine does not have.
"""

from pathlib import Path

from _sweep import main

BASE = Path(__file__).with_name("real-model-sweep.yaml")
RECORD = Path(__file__).resolve().parents[1] / "docs" / "methods" / "real-model"  # each finished run's bundle
SMALL_GROUPS = ["rollout.prompts_per_step=24"]
VARIANTS = {
    "grpo G=8": (["method=grpo"], "eval/pass@k/unsolved_at_start"),
    "dapo": (["method=dapo", "reward.overlong_buffer=13"], "completions/clipped_ratio"),
    "grpo-lambda": (["method=grpo-lambda"], "completions/mean_length"),
    "drpo": (["method=drpo"], "completions/mean_length"),
    "siri": (["method=siri", "control.period=20"], "pipeline/control/max_new_tokens"),
    "april": (["method=april"], "throughput/rollout_tokens_per_s"),
    "rorecomp": (["method=rorecomp"], "completions/mean_length"),
    "duet": (["method=duet"], "pipeline/control/aborted"),
    "d3s": (["method=d3s", "advantage.relax_steps=40"], "pipeline/advantage/kept_tokens"),
    "grpo G=2": (["method=grpo", "rollout.group_size=2", *SMALL_GROUPS], "groups/frac_zero_std"),
    "grpo G=3": (["method=grpo", "rollout.group_size=3", *SMALL_GROUPS], "groups/frac_zero_std"),
    "mc-grpo G=2": (["method=mc-grpo", "rollout.group_size=2", *SMALL_GROUPS], "groups/frac_zero_std"),
    "dars": (["method=dars"], "eval/pass@k/unsolved_at_start"),
    "latr": (["method=latr"], "eval/pass@k/unsolved_at_start"),
    "arrol": (["method=arrol", "generate.check_at=8"], "pipeline/generate/head_accuracy"),
}
DIAGNOSTICS = [
    "completions/mean_length", "completions/clipped_ratio", "reward/correct/mean", "groups/frac_zero_std",
    "throughput/rollout_tokens_per_s", "timing/step_s", "pipeline/control/extra_rollouts", "pipeline/generate/branches",
]  # fmt: skip

if __name__ == "__main__":
    main(BASE, VARIANTS, "runs/sweep-real-model", DIAGNOSTICS, record=RECORD)
