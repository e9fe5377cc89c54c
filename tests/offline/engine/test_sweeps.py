"""The sweep runner of examples/ (examples/_sweep.py), which the method cards' sweeps are spread over sittings
with: a run stopped part way goes on from its resume checkpoint, and a run whose bundle a sitting before kept
counts as done on a machine that never ran it."""

import importlib
import shutil
import sys

import pytest
import yaml

from tests.conftest import REPO
from tests.offline.engine.test_cli import SMALL, deterministic_rows
from workers.bundle import read_bundle

EXAMPLES = REPO / "examples"


@pytest.fixture
def sweep(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    return importlib.import_module("_sweep")


@pytest.fixture
def base(tmp_path):
    path = tmp_path / "base.yaml"
    config = {**SMALL, "schedule": {"steps": 6, "checkpoint_every": 4, "save_final": False},
              "eval": {"every": 3, "size": 8, "k": 1}}  # fmt: skip
    path.write_text(yaml.safe_dump(config))
    return path


def test_a_run_stopped_part_way_goes_on_from_its_checkpoint_and_ends_as_the_undisturbed_one(sweep, base, tmp_path):
    whole = sweep.run(base, tmp_path / "whole", ["rollout.temperature=0.9"], seed=1)
    again = sweep.run(base, tmp_path / "again", ["rollout.temperature=0.9"], seed=1)
    assert deterministic_rows(again) == deterministic_rows(whole)
    # as if the sitting ended during step 6: the run is not done, its resume checkpoint of step 4 is there
    status = again / "status.jsonl"
    lines = [line for line in status.read_text().splitlines() if '"succeeded"' not in line]
    status.write_text("\n".join(lines) + "\n")
    assert sorted(p.name for p in (again / "resume").iterdir()) == ["step-00000004.pt"]
    sweep.run(base, again, ["rollout.temperature=0.9"], seed=1)
    assert "resumed from the checkpoint of step 4" in (again / "log.txt").read_text()
    assert deterministic_rows(again) == deterministic_rows(whole)
    assert yaml.safe_load((again / "config.yaml").read_text())["rollout"]["temperature"] == 0.9


def test_a_finished_runs_bundle_is_kept_and_counts_as_done_in_a_later_sitting(sweep, base, tmp_path, monkeypatch,
                                                                              capsys):  # fmt: skip
    record, variants = tmp_path / "record", {"plain": ([], "reward/mean"), "hotter": (["rollout.temperature=1.2"],
                                                                                       "reward/mean")}  # fmt: skip
    monkeypatch.setattr(sys, "argv", ["sweep", "--seeds", "1", "--parallel", "1", "--out", str(tmp_path / "runs")])
    sweep.main(base, variants, "unused", record=record)
    first = capsys.readouterr().out
    assert sorted(p.name for p in record.iterdir()) == ["hotter-s0.zip", "plain-s0.zip"]
    bundle = read_bundle(record / "hotter-s0.zip")
    assert bundle.config["rollout"]["temperature"] == 1.2 and bundle.config["seed"] == 0
    assert [row["step"] for row in bundle.metric_rows()][-1] == 6
    shutil.rmtree(tmp_path / "runs")  # another machine: only what was committed
    sweep.main(base, variants, "unused", record=record)
    assert capsys.readouterr().out == first  # the same table, from the bundles
    assert not (tmp_path / "runs").exists()  # and nothing ran
    plain = read_bundle(record / "plain-s0.zip").metric_rows()
    start, end = plain[0]["eval/pass@1"], plain[-1]["eval/pass@1"]  # a 6-step run evaluated at 0, 3 and 6
    assert [row["step"] for row in plain if "eval/pass@1" in row] == [0, 3, 6]
    assert f"| plain | {start:.3f} | {(plain[3]['eval/pass@1'] + end) / 2:.3f} [" in first


@pytest.fixture
def cards(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    return importlib.import_module("real_model_card")


def test_every_card_reads_variants_of_the_real_model_sweep_and_says_its_verdict(cards):
    """Issue 33: each card's table rows are variants the sweep runs, and each card carries a verdict line, the one
    docs/methods/README.md's "real model" column shows ("not yet measured" until its runs are in)."""
    from workers.doc_tables import real_model_verdict

    sweep = importlib.import_module("sweep_real_model")
    for name, card in cards.CARDS.items():
        assert set(card.variants) <= set(sweep.VARIANTS), name
        assert real_model_verdict(REPO / "docs" / "methods" / f"{name}.md") != "—", name


def test_a_cards_table_is_the_iqm_over_the_kept_bundles_of_each_variant(cards, tmp_path):
    from rolloutlab.compare.stats import improvement_interval, interval, iqm

    record = tmp_path / "record"
    record.mkdir()
    kept = sorted(cards.RECORD.glob("grpo-G-8-s*.zip"))[:3]
    for seed, bundle in enumerate(kept[:2]):
        shutil.copy(bundle, record / f"grpo-G-8-s{seed}.zip")
    shutil.copy(kept[2], record / "dapo-s0.zip")  # one run of the variant: its figures alone, no interval
    table = cards.card_table("dapo", record).splitlines()
    assert table[0].startswith("| run | seeds | greedy pass@1 at step 0 | greedy pass@1 at the end |")
    base, dapo = table[2].split(" | "), table[3].split(" | ")
    finals = [[read_bundle(b).metric_rows()[-1]["eval/pass@1"]] for b in kept]
    low, high = interval(finals[:2], iqm)
    assert base[:2] == ["| grpo G=8", "2"] and base[3] == f"{iqm(finals[:2]):.3f} [{low:.3f}, {high:.3f}]"
    assert dapo[:2] == ["| dapo", "1"] and dapo[3] == f"{finals[2][0]:.3f}"
    assert base[-1].rstrip(" |") == read_bundle(kept[0]).record["cpu"]["model"].join(["2-core ", ""])
    assert cards.card_table("mc-grpo", record).splitlines()[2].startswith("| grpo G=2 | 0 |")  # none kept yet
    # below it, the compare page's statistic against the base: P(dapo's run scores above a base run's)
    against = table[table.index("") + 1 :]
    assert against[0].startswith("| P(figure above grpo G=8's) | seeds | greedy pass@1 at the end |")
    above = sum((finals[2][0] > f[0]) + 0.5 * (finals[2][0] == f[0]) for f in finals[:2]) / 2
    assert against[2].startswith(f"| dapo | 1 vs 2 | {above:.2f} | ")  # one run: no interval
    low, high = improvement_interval([0.3, 0.4], [0.1, 0.2, 0.35])  # 0.3 beats 2 of 3, 0.4 all 3: P = 5/6
    figure = cards.Observable("a figure", lambda rows: rows)  # each run's "rows" its figure itself

    def runs(*figures: float) -> list:
        return [cards.KeptRun(f, "one machine") for f in figures]

    assert cards.improvement(figure, runs(0.3, 0.4), runs(0.1, 0.2, 0.35)) == f"0.83 [{low:.2f}, {high:.2f}]"
    assert cards.improvement(figure, runs(0.3, 0.4), runs(float("nan"))) == "—"  # the base never shows it


def test_a_verdict_says_a_method_helps_or_hurts_only_at_five_seeds_and_level_from_three(cards, tmp_path):
    """The rule of docs/methods/README.md, read off P(the method's figure above the base's): dapo's 5 runs truncate
    less than every grpo run (effect shown); at 3 seeds the same move is not yet a verdict; the base's own runs
    relabelled as the method are level; swapped, the move is against the paper (not shown)."""
    kept = {v: sorted(cards.RECORD.glob(f"{v}-s*.zip")) for v in ("grpo-G-8", "dapo")}

    def record_of(name: str, base: str, method: str, seeds: int) -> str:
        record = tmp_path / name
        record.mkdir()
        for seed in range(seeds):
            shutil.copy(kept[base][seed], record / f"grpo-G-8-s{seed}.zip")
            shutil.copy(kept[method][seed], record / f"dapo-s{seed}.zip")
        return cards.verdict("dapo", record)

    assert record_of("five", "grpo-G-8", "dapo", 5) == "effect shown"
    assert record_of("three", "grpo-G-8", "dapo", 3) == "not yet measured"
    assert record_of("same", "grpo-G-8", "grpo-G-8", 3) == "level"
    assert record_of("swapped", "dapo", "grpo-G-8", 5) == "not shown"
    assert record_of("two", "grpo-G-8", "dapo", 2) == "not yet measured"
    assert cards.verdict("grpo") == "the base"
    assert cards.side((0.1, 0.0, 0.3), cards.LOWER) == "toward"
    assert cards.side((0.9, 0.7, 1.0), cards.LOWER) == "against"
    assert cards.side((0.6, 0.3, 0.9), cards.HIGHER) == "level" and cards.side(None, cards.HIGHER) == "level"


def speed_runs(cards, machine: str, *speeds: float) -> list:
    """One-step runs on a machine, each at its rollout tokens/s, all at the same greedy pass@1."""
    step = {"step": 1, "completions/mean_length": 20}
    evaluation = {"step": 2, "eval/pass@1": 0.2}
    return [cards.KeptRun([{**step, "throughput/rollout_tokens_per_s": s}, evaluation], machine) for s in speeds]


def test_a_speed_compares_only_runs_on_a_machine_both_sides_ran_on(cards):
    """Rollout tokens/s is the machine's as much as the method's: a method's runs on a slow processor are read
    against the base's runs on that processor, not its runs on one twice as fast."""
    ours = speed_runs(cards, "2-core AMD EPYC (family 23 model 1, avx2)", 60, 70)
    theirs = speed_runs(cards, "2-core AMD EPYC (family 25 model 17, avx512)", 100, 110) + speed_runs(
        cards, ours[0].machine, 50, 55
    )
    assert cards.above(cards.TOKENS_PER_S, ours, theirs)[0] == 1.0  # above both runs on its own machine
    anywhere = cards.Observable("rollout tokens/s", cards.TOKENS_PER_S.value)  # the same figure, not machine-bound
    assert cards.above(anywhere, ours, theirs)[0] == 0.5
    assert cards.above(cards.TOKENS_PER_S, ours, theirs[:2]) is None  # no base run on its machine: no comparison
    assert cards.improvement(cards.TOKENS_PER_S, ours, theirs[:2]) == "—"
    assert cards.machine({"cpu": {"model": "AMD EPYC", "generation": "family 23 model 1, avx2", "count": 2}}) == (
        ours[0].machine
    )
    assert cards.machine({"gpu": {"devices": ["NVIDIA H200"]}, "cpu": {"model": "x", "count": 16}}) == "NVIDIA H200"


def test_a_speeds_verdict_counts_the_seeds_of_the_machines_both_sides_ran_on(cards):
    """april's figure is rollout tokens/s: five base runs on another processor and one on april's do not make three
    seeds a side, so three april runs level with that one base run are no verdict yet; three base runs on april's
    machine are."""
    here, elsewhere = (
        "2-core Intel(R) Xeon(R) Processor (family 6 model 167, avx512)",
        "2-core AMD EPYC (family 25 model 1, avx2)",
    )
    april = speed_runs(cards, here, 50, 52, 54)
    assert cards.reading(
        cards.CARDS["april"], april, speed_runs(cards, elsewhere, 30, 31, 32, 33, 34) + speed_runs(cards, here, 52)
    ) == ("not yet measured")
    assert (
        cards.reading(
            cards.CARDS["april"], april, speed_runs(cards, elsewhere, 30, 31) + speed_runs(cards, here, 51, 52, 53)
        )
        == "level"
    )


def test_a_run_that_masks_no_token_trains_every_one(cards):
    assert cards.trained_share([{"step": 1, "completions/mean_length": 20}]) == 1.0  # grpo: no such stage
    steps = [
        {"step": s, "completions/mean_length": 20, "pipeline/advantage/kept_tokens": k} for s, k in [(1, 0.5), (2, 0.7)]
    ]
    assert cards.trained_share(steps) == 0.6


def test_every_figure_a_paper_predicts_is_one_its_card_shows(cards):
    for name, card in cards.CARDS.items():
        assert {figure for figure, _ in card.paper} <= set(card.figures()), name


def test_tokens_per_correct_sample_counts_each_steps_samples_at_its_pass_rate(cards):
    rows = [{"step": 0, "eval/pass@1": 0.1},
            {"step": 1, "completions/mean_length": 20, "counters/samples": 64, "reward/correct/mean": 0.25,
             "counters/rollout_tokens": 1280},
            {"step": 2, "completions/mean_length": 30, "counters/samples": 96, "reward/correct/mean": 0.5,
             "counters/rollout_tokens": 2240}]  # fmt: skip
    assert cards.tokens_per_correct(rows) == 2240 / (64 * 0.25 + 32 * 0.5)
    assert cards.decoded_per_step(rows) == 1120
    assert cards.step_mean("completions/mean_length", last=1)(rows) == 30


def test_each_cards_real_model_table_is_the_one_its_kept_bundles_give(cards):
    """A card's real-model table is what examples/real_model_card.py reads from the committed bundles: a run added
    (or a bundle changed) without the card's table following fails here."""
    texts = {name: (REPO / "docs" / "methods" / f"{name}.md").read_text() for name in cards.CARDS}
    tabled = [name for name, text in texts.items() if "| run | seeds |" in text]
    assert {"grpo", "dapo"} <= set(tabled)
    for name in tabled:
        assert cards.card_table(name) in texts[name], f"python examples/real_model_card.py {name}: not the card's table"


def test_each_cards_verdict_is_the_rules_reading_of_its_kept_bundles(cards):
    """The "real model" column of docs/methods/README.md (each card's verdict line) is what the rule reads from the
    committed runs: a card cannot claim an effect its runs do not show."""
    from workers.doc_tables import real_model_verdict

    for name in cards.CARDS:
        assert real_model_verdict(REPO / "docs" / "methods" / f"{name}.md") == cards.verdict(name), name
