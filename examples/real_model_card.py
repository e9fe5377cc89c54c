"""A method card's "On a real model" table, read from the real-model sweep's bundles (docs/methods/real-model/).

    python examples/real_model_card.py dapo          # the dapo card's table: dapo and its grpo base, every seed kept
    python examples/real_model_card.py --list        # the cards and the runs each has so far

Each row is one variant of examples/sweep_real_model.py over the seeds whose bundle is kept: greedy pass@1 at the
end and pass@4 (IQM over the seeds with the 95% stratified-bootstrap interval, the seed count beside it), then the
observables the card's paper predicts, each IQM [interval] over the seeds' per-run values. Below it, for a card
with more than its base, the compare page's statistic for each of those figures: the probability that a run of the
method has the higher figure than a run of the base, with its 95% bootstrap interval, and last the card's verdict
line, by the rule docs/methods/README.md states (`verdict`). Nothing runs here: the sweep runs, this reads what it
kept.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
from _sweep import at_end, slug, step_mean, steps_of
from sweep_real_model import RECORD, VARIANTS

from rolloutlab.compare.stats import improvement_interval, interval, iqm, probability_of_improvement
from workers.bundle import read_bundle

BASE = "grpo G=8"
LATE_STEPS = 10  # "at the end" of a step metric: its mean over the run's last 10 steps

Rows = list[dict]
METHOD_OF = {label: overrides[0].removeprefix("method=") for label, (overrides, _) in VARIANTS.items()}


@dataclass(frozen=True)
class Observable:
    label: str
    value: Callable[[Rows], float]  # one run's figure
    digits: int = 3
    machine_bound: bool = False  # a speed: runs compare on it only where they ran on one kind of machine


def tokens_per_correct(rows: Rows) -> float:
    """Rollout tokens the run decoded per correct completion it sampled: what a right answer cost in sampling.
    Both counts are of everything generated, the groups a filter dropped included (counters/samples and
    reward/correct/mean are written from the step's whole generation), so a filtering method pays for what it drops."""
    correct, samples_before = 0.0, 0.0
    for r in steps_of(rows):
        samples = r["counters/samples"] - samples_before
        samples_before = r["counters/samples"]
        correct += samples * r["reward/correct/mean"]
    return rows[-1]["counters/rollout_tokens"] / correct if correct else float("inf")


def decoded_per_step(rows: Rows) -> float:
    return rows[-1]["counters/rollout_tokens"] / len(steps_of(rows))


def decoded_per_scored(rows: Rows) -> float:
    """Rollout tokens decoded per completion that reached the batch (ARRoL's pruned rollouts cost, never count)."""
    return rows[-1]["counters/rollout_tokens"] / rows[-1]["counters/samples"]


def length_while_limited(rows: Rows) -> float:
    """Mean completion length over the steps whose length limit was below the run's largest (SIRI's compression)."""
    steps = steps_of(rows)
    limits = [r.get("pipeline/control/max_new_tokens", float("nan")) for r in steps]
    widest = np.nanmax(limits) if not np.isnan(limits).all() else float("nan")
    seen = [r["completions/mean_length"] for r, limit in zip(steps, limits) if limit < widest]
    return float(np.mean(seen)) if seen else float("nan")


def partial_share(rows: Rows) -> float:
    """The share of a batch's rows continued from a stored prefix (APRIL's partial rollouts), over the run."""
    steps = [r for r in steps_of(rows) if "pipeline/generate/resumed_rows" in r]
    if not steps:
        return float("nan")
    rows_per_step = [r["pipeline/generate/samples_per_prompt"] * r["pipeline/filter/kept_groups"] for r in steps]
    return float(np.sum([r["pipeline/generate/resumed_rows"] for r in steps]) / np.sum(rows_per_step))


def trained_share(rows: Rows) -> float:
    """The share of the batch's completion tokens in the loss, over the run: 1 where the advantage stage masks none
    (it writes no pipeline/advantage/kept_tokens, as grpo), so the base has the figure the method is read against."""
    share = step_mean("pipeline/advantage/kept_tokens")(rows)
    return 1.0 if np.isnan(share) else share


LENGTH = Observable("mean length, last 10 steps", step_mean("completions/mean_length", LATE_STEPS), 1)
TRUNCATED = Observable("truncated share", step_mean("completions/clipped_ratio"))
ZERO_STD = Observable("zero-variance groups", step_mean("groups/frac_zero_std"))
PER_CORRECT = Observable("rollout tokens per correct sample", tokens_per_correct, 0)
PER_STEP = Observable("tokens decoded per step", decoded_per_step, 0)
UNSOLVED = Observable("pass@4 on the problems unsolved at step 0", at_end("eval/pass@k/unsolved_at_start"))
PASS_AT_1 = Observable("greedy pass@1 at the end", at_end("eval/pass@1"))
PASS_AT_4 = Observable("pass@4 at the end", at_end("eval/pass@k"))


HIGHER, LOWER = 1, -1  # the side of the base's figure that a paper predicts for its method's


@dataclass(frozen=True)
class Card:
    variants: tuple[str, ...]  # the card's rows; the base first
    observables: tuple[Observable, ...]
    paper: tuple[tuple[Observable, int], ...]  # the figures its paper predicts to move, and on which side; the first is
    # the one the verdict reads
    plotted: tuple[str, ...] = ("completions/mean_length",)  # on its compare page, beside pass@1 and the reward
    compared: tuple[str, ...] = ()  # the variants on its compare page, one per method (it groups by method): all

    def figures(self) -> tuple[Observable, ...]:
        """Each run's figures the card compares: the end accuracy, then its paper's observables."""
        return PASS_AT_1, PASS_AT_4, *self.observables

    def import_command(self, name: str) -> str:
        """The command that imports the card's runs into a platform and prints its compare page's permalink."""
        variants = self.compared or self.variants
        files = " ".join(f"docs/methods/real-model/{slug(v)}-s*.zip" for v in variants)
        metrics = ",".join(("eval/pass@1", "reward/mean", *self.plotted))
        baseline = f"&baseline={METHOD_OF[variants[0]]}" if len(variants) > 1 else ""
        return (f'python manage.py import_bundle {files} --experiment "{name} on a real model" '
                f'--view "metrics={metrics}&x=tokens{baseline}"')  # fmt: skip


ROUNDS = Observable("dynamic-sampling rounds per step", step_mean("pipeline/filter/rounds"), 2)
LENGTH_LIMITED = Observable("mean length while the limit is compressed", length_while_limited, 1)
TOKENS_PER_S = Observable("rollout tokens/s", step_mean("throughput/rollout_tokens_per_s"), 1, machine_bound=True)
PARTIAL = Observable("share of partial rows", partial_share)
ABORTED = Observable("rows aborted per step", step_mean("pipeline/control/aborted"), 1)
TRAINED = Observable("share of tokens trained", trained_share)
EXTRAS = Observable("extra rollouts per step", step_mean("pipeline/control/extra_rollouts"), 1)
BRANCHES = Observable("tree branches per step", step_mean("pipeline/generate/branches"), 1)
DISTINCT = Observable("distinct completions per group", step_mean("groups/distinct_completions"))
PER_SCORED = Observable("tokens decoded per scored rollout", decoded_per_scored, 1)
HEAD = Observable("quality head's accuracy", step_mean("pipeline/generate/head_accuracy"))
SHORTER = ((LENGTH, LOWER), (PER_CORRECT, LOWER))  # the length methods' claim

CARDS = {
    "grpo": Card((BASE,), (UNSOLVED, LENGTH, TRUNCATED, ZERO_STD, PER_CORRECT), paper=()),
    "dapo": Card((BASE, "dapo"), (TRUNCATED, ZERO_STD, ROUNDS, LENGTH),
                 paper=((TRUNCATED, LOWER), (ZERO_STD, LOWER)),
                 plotted=("completions/clipped_ratio", "groups/frac_zero_std", "completions/mean_length")),
    "grpo-lambda": Card((BASE, "grpo-lambda"), (LENGTH, PER_CORRECT, TRUNCATED), paper=SHORTER),
    "drpo": Card((BASE, "drpo"), (LENGTH, PER_CORRECT, TRUNCATED), paper=SHORTER),
    # the compressed phases' length has no grpo counterpart (grpo's limit never moves): the verdict reads the length
    # after them
    "siri": Card((BASE, "siri"), (LENGTH_LIMITED, LENGTH, PER_CORRECT), paper=SHORTER,
                 plotted=("completions/mean_length", "pipeline/control/max_new_tokens")),
    "april": Card((BASE, "april"), (TOKENS_PER_S, PARTIAL, LENGTH), paper=((TOKENS_PER_S, HIGHER),),
                  plotted=("throughput/rollout_tokens_per_s", "pipeline/generate/resumed_rows")),
    "rorecomp": Card((BASE, "rorecomp"), (PER_STEP, LENGTH, PER_CORRECT), paper=SHORTER),
    "duet": Card((BASE, "duet"), (PER_STEP, ABORTED, LENGTH), paper=((PER_STEP, LOWER),),
                 plotted=("completions/mean_length", "pipeline/control/aborted")),
    # d3s trains fewer tokens by its schedule's construction (half, relaxing to all): what its paper claims of that is
    # an equal or better policy from less, so the verdict reads pass@1 at the equal budget, the share beside it
    "d3s": Card((BASE, "d3s"), (PER_STEP, TRAINED, LENGTH), paper=((PASS_AT_1, HIGHER), (TRAINED, LOWER)),
                plotted=("completions/mean_length", "pipeline/advantage/kept_tokens")),
    # grpo at G = 3 samples as many completions a prompt as mc-grpo at G = 2 (G + 1): the equal-cost pair is compared,
    # and the paper's claim is the accuracy itself
    "mc-grpo": Card(("grpo G=2", "grpo G=3", "mc-grpo G=2"), (ZERO_STD, PER_STEP), paper=((PASS_AT_1, HIGHER),),
                    plotted=("groups/frac_zero_std",), compared=("grpo G=3", "mc-grpo G=2")),
    "dars": Card((BASE, "dars"), (UNSOLVED, EXTRAS, PER_STEP), paper=((UNSOLVED, HIGHER),),
                 plotted=("eval/pass@k/unsolved_at_start",)),
    # latr's pass@k claim rests on more diverse groups (fewer that agree and carry no gradient): both beside it
    "latr": Card((BASE, "latr"), (UNSOLVED, DISTINCT, ZERO_STD, BRANCHES, PER_STEP),
                 paper=((UNSOLVED, HIGHER), (DISTINCT, HIGHER)),
                 plotted=("eval/pass@k/unsolved_at_start", "groups/distinct_completions")),
    "arrol": Card((BASE, "arrol"), (PER_SCORED, HEAD, LENGTH), paper=((PER_SCORED, LOWER),),
                  plotted=("pipeline/generate/head_accuracy", "completions/mean_length")),
}  # fmt: skip


@dataclass(frozen=True)
class KeptRun:
    rows: Rows
    machine: str  # the machine it ran on, from its reproducibility record: step times compare only on one


@cache  # the base's runs are read once for every card
def kept_runs(variant: str, record: Path = RECORD) -> list[KeptRun]:
    """Every kept run of a variant, by seed."""
    paths = sorted(record.glob(f"{slug(variant)}-s*.zip"), key=lambda p: int(p.stem.rsplit("-s", 1)[1]))
    return [KeptRun(bundle.metric_rows(), machine(bundle.record)) for bundle in map(read_bundle, paths)]


def machine(record: dict) -> str:
    """The device a run's step times belong to: its GPU, or its CPU with the processor's generation where the record
    has it (records before it name the model only)."""
    gpus = record.get("gpu", {}).get("devices") or []
    if gpus:
        return gpus[0]
    cpu = record["cpu"]
    generation = f" ({cpu['generation']})" if cpu.get("generation") else ""
    return f"{cpu['count']}-core {cpu['model']}{generation}"


def cell(values: list[float], digits: int) -> str:
    """IQM [95% stratified-bootstrap interval] over the runs; the value alone for one run, or where all agree."""
    finite = np.array([[v] for v in values if np.isfinite(v)])
    if finite.size == 0:
        return "—"
    if np.ptp(finite) == 0:
        return f"{finite[0, 0]:.{digits}f}"
    low, high = interval(finite, iqm)
    return f"{iqm(finite):.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def card_table(name: str, record: Path = RECORD) -> str:
    card = CARDS[name]
    head = ["run", "seeds", "greedy pass@1 at step 0", *(o.label for o in card.figures()), "steps to the budget",
            "rollout tokens (k)", "s per step", "minutes of steps per run", "machine"]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for variant in card.variants:
        kept = kept_runs(variant, record)
        runs = [run.rows for run in kept]
        if not runs:
            lines.append(f"| {variant} | 0 |" + " |" * (len(head) - 2))
            continue
        figures = [
            cell([at_start(rows) for rows in runs], 3),
            *(cell([o.value(rows) for rows in runs], o.digits) for o in card.figures()),
            cell([len(steps_of(rows)) for rows in runs], 1),
            cell([rows[-1]["counters/rollout_tokens"] / 1e3 for rows in runs], 1),
            cell([step_mean("timing/step_s")(rows) for rows in runs], 1),
            cell([rows[-1]["counters/wall_s"] / 60 for rows in runs], 0),
            ", ".join(sorted({run.machine for run in kept})),
        ]
        lines.append(f"| {variant} | {len(runs)} | " + " | ".join(figures) + " |")
    table = "\n".join(lines) + "\n"
    return table if len(card.variants) == 1 else f"{table}\n{against_base(name, record)}"


def against_base(name: str, record: Path = RECORD) -> str:
    """P(a run of the variant has the higher figure than a run of the card's base) with its 95% bootstrap interval,
    per figure: the compare page's statistic, on which a verdict rests (an interval clear of 0.5 is an effect at
    these seeds, in whichever direction the paper predicts: lower for a truncated share, higher for pass@1)."""
    card = CARDS[name]
    base, *others = card.compared or card.variants
    head = [f"P(figure above {base}'s)", "seeds", *(o.label for o in card.figures())]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    theirs = kept_runs(base, record)
    for variant in others:
        ours = kept_runs(variant, record)
        seeds = f"{len(ours)} vs {len(theirs)}"
        cells = (improvement(o, ours, theirs) for o in card.figures())
        lines.append(f"| {variant} | {seeds} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def improvement(figure: Observable, ours: list[KeptRun], theirs: list[KeptRun]) -> str:
    """P(ours > theirs) [95% interval]; — where either side has no run or never shows the figure (or, for a speed,
    none on a machine the other side ran on)."""
    found = above(figure, ours, theirs)
    if found is None:
        return "—"
    chance, low, high = found
    spread = f" [{low:.2f}, {high:.2f}]" if np.isfinite(low) else ""
    return f"{chance:.2f}{spread}"


def above(figure: Observable, ours: list[KeptRun], theirs: list[KeptRun]) -> tuple[float, float, float] | None:
    """P(a run of ours has the higher figure than a run of theirs), with its 95% bootstrap interval (nan with one
    run a side); None where either side never shows the figure."""
    ours, theirs = comparable(figure, ours, theirs)
    x = [v for v in (figure.value(run.rows) for run in ours) if np.isfinite(v)]
    y = [v for v in (figure.value(run.rows) for run in theirs) if np.isfinite(v)]
    if not x or not y:
        return None
    return probability_of_improvement(x, y), *improvement_interval(x, y)


def comparable(figure: Observable, ours: list[KeptRun], theirs: list[KeptRun]) -> tuple[list[KeptRun], list[KeptRun]]:
    """The runs a figure is read off: every run, but for a speed only those of machines both sides ran on (a run on a
    twice faster processor would otherwise win by its machine)."""
    if not figure.machine_bound:
        return ours, theirs
    shared = {run.machine for run in ours} & {run.machine for run in theirs}
    return [run for run in ours if run.machine in shared], [run for run in theirs if run.machine in shared]


LEAST_SEEDS = 3  # seeds a side before a card has a verdict at all
SETTLED_AT = 5  # seeds a side before a card may say that a method helps or hurts (3 seeds' interval is their range)


def verdict(name: str, record: Path = RECORD) -> str:
    """The card's verdict by the rule docs/methods/README.md states, from P(the method's figure above the base's):
    "not shown" where pass@1 or a figure its paper predicts moved against the paper (interval clear of 0.5 on the
    other side), "effect shown" where the first figure its paper predicts moved its way, "level" where neither that
    nor pass@1 told them apart (at SETTLED_AT seeds, that figure alone); a move either way counts only at SETTLED_AT
    seeds, and "level" at 3."""
    card = CARDS[name]
    if not card.paper:
        return "the base"
    base, method = (card.compared or card.variants)[-2:]
    return reading(card, kept_runs(method, record), kept_runs(base, record))


def reading(card: Card, ours: list[KeptRun], theirs: list[KeptRun]) -> str:
    """`verdict` off the method's runs and the base's. Seeds are counted per figure, over the runs it compares: a speed
    measured on one machine kind both sides ran on counts only the runs of that kind."""
    towards = {PASS_AT_1: HIGHER, **dict(card.paper)}  # pass@1 is read beside the paper's figures, each P once
    seeds = min(min(map(len, comparable(figure, ours, theirs))) for figure in towards)
    if seeds < LEAST_SEEDS:
        return "not yet measured"
    found = {figure: above(figure, ours, theirs) for figure in towards}
    if found[card.paper[0][0]] is None:
        return "not yet measured"  # its figure has no values yet
    sides = {figure: side(found[figure], toward) for figure, toward in towards.items()}
    settled = seeds >= SETTLED_AT
    first = sides[card.paper[0][0]]
    if settled and "against" in sides.values():
        return "not shown"
    if settled and first == "toward":
        return "effect shown"
    if first == "level" and (settled or sides[PASS_AT_1] == "level"):
        return "level"
    return "not yet measured"  # a move seen at fewer than SETTLED_AT seeds: the card waits for its last seeds


def side(found: tuple[float, float, float] | None, toward: int) -> str:
    """Where P's interval lies: "toward" the paper's side of 0.5, "against" it, or "level" (it holds 0.5)."""
    if found is None or not np.isfinite(found[1]):
        return "level"
    _, low, high = found
    if low <= 0.5 <= high:
        return "level"
    return "toward" if (low > 0.5) == (toward == HIGHER) else "against"


def at_start(rows: Rows) -> float:
    return float(next(r["eval/pass@1"] for r in rows if "eval/pass@1" in r))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("card", nargs="?", choices=sorted(CARDS))
    parser.add_argument("--list", action="store_true", help="the cards and how many runs of each variant are kept")
    parser.add_argument("--record", type=Path, default=RECORD, help="the folder of the sweep's bundles")
    parser.add_argument("--import-command", action="store_true",
                        help="the command that imports the card's runs and prints its compare permalink")  # fmt: skip
    args = parser.parse_args()
    if args.list or not args.card:
        for name, card in CARDS.items():
            counts = ", ".join(f"{v}: {len(list(args.record.glob(f'{slug(v)}-s*.zip')))}" for v in card.variants)
            print(f"{name}: {counts}")
        return
    if args.import_command:
        print(CARDS[args.card].import_command(args.card))
        return
    print(card_table(args.card, args.record))
    print(f"On a real model: **{verdict(args.card, args.record)}** (the verdicts' rule: docs/methods/README.md)")


if __name__ == "__main__":
    main()
