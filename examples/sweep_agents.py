"""The agent methods against GRPO on the calculator environment, 5 seeds each (docs/methods/<method>.md).

The tiny model learns the calculator in about 20 steps (docs/environments/calculator.md), so the sweep stops at 30
and reads what the papers predict before the end: success at equal environment steps (`episodes/success` averaged
over the steps, the area under the training curve) and the share of turns that call the tool; pass@1 is held-out
greedy success every 10 steps.

python examples/sweep_agents.py --seeds 5 --target 0.95          # 40 runs; --only gigpo runs a part
"""

from pathlib import Path

from _sweep import main

BASE = Path(__file__).with_name("grpo-calculator.yaml")
SETTINGS = ["schedule.steps=30", "eval.every=10", "resources.threads=1"]  # two runs at a time, a core each
OBSERVABLE = "episodes/success"
METHODS = ["grpo", "gigpo", "hgpo", "salt", "gated-rewards", "spa-rl", "treeps", "trace"]
VARIANTS = {method: ([f"method={method}", *SETTINGS], OBSERVABLE) for method in METHODS}
DIAGNOSTICS = [
    "episodes/success",
    "episodes/turns_mean",
    "episodes/well_formed_turns",
    "counters/rollout_tokens",
    "pipeline/advantage/turns_in_shared_states",
]

if __name__ == "__main__":
    main(BASE, VARIANTS, "runs/sweep-agents", DIAGNOSTICS)
