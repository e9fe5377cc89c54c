"""The `chain` task: arith worked step by step, with a long tail of completion lengths (task knobs)."""

import numpy as np
import pytest

from workers.config import resolve
from workers.errors import ConfigError
from workers.tasks import Example, build_task, problem_space
from workers.tasks.chain import derivation
from workers.tasks.expressions import parse


def chain(**task):
    return build_task(resolve({"task": {"name": "chain", **task}, "eval": {"size": 50}}))


def test_each_step_does_one_operation_multiplication_first_and_keeps_the_value():
    assert derivation("3+4*2-5") == ["3+8-5", "11-5", "6"]
    assert derivation("3-7+2") == ["-4+2", "-2"]
    assert derivation("2*3*4-1") == ["6*4-1", "24-1", "23"]
    rng = np.random.default_rng(0)
    task = chain(operands=6, operators="+-*")
    for example in task.train_batch(300, rng):
        steps = derivation(example.prompt.rstrip("="))
        assert len(steps) == example.prompt.count("+") + example.prompt.count("-") + example.prompt.count("*")
        assert all(parse(step).value == int(example.answer) for step in steps)
        assert steps[-1] == example.answer


def test_the_warm_start_teaches_the_whole_chain_and_the_verifier_reads_its_last_number():
    task = chain(operands=4)
    prompt, target = task.warmup_pairs(1, np.random.default_rng(3))[0]
    assert target == "=".join(derivation(prompt.rstrip("=")))
    example = Example("3+4*2-5=", "6")
    assert task.is_correct(example, "3+8-5=11-5=6") and task.format_ok(example, "3+8-5=11-5=6")
    assert task.is_correct(example, "6"), "a skipped step is not penalised: the outcome is what counts"
    assert task.is_correct(example, "3+8-5=7=6"), "an outcome verifier does not check the steps"
    assert not task.is_correct(example, "3+8-5=11-5=7") and not task.is_correct(example, "3+8-5=11-5")
    assert not task.format_ok(example, "3+8-5=11-=6") and task.answer_key(example, "3+8-5=11-=6") == "6"


def test_min_operands_and_length_tail_give_a_long_tail_of_completion_lengths():
    fixed = chain(operands=6)
    tail = chain(operands=6, min_operands=2, length_tail=0.5)
    rng = np.random.default_rng(0)
    fixed_counts = {e.prompt.count("+") + e.prompt.count("-") + 1 for e in fixed.train_batch(500, rng)}
    assert fixed_counts == {6}
    counts = np.array([e.prompt.count("+") + e.prompt.count("-") + 1 for e in tail.train_batch(4000, rng)])
    share = [float(np.mean(counts == k)) for k in range(2, 7)]
    expected = np.array([0.5**i for i in range(5)]) / sum(0.5**i for i in range(5))
    assert np.allclose(share, expected, atol=0.03), share
    lengths = np.array([len(tail.target(e)) for e in tail.train_batch(2000, rng)])
    assert np.percentile(lengths, 99) > 3 * np.median(lengths), "the longest completions are far above the median"


def test_the_operand_range_counts_in_the_problem_space_and_the_held_out_split():
    one = resolve({"task": {"name": "chain", "operands": 3}}).task
    ranged = resolve({"task": {"name": "chain", "operands": 3, "min_operands": 2}}).task
    assert problem_space(one) == 10**3 * 2**2
    assert problem_space(ranged) == 10**3 * 2**2 + 10**2 * 2
    task = chain(operands=5, min_operands=2, length_tail=0.5)
    held_out = {e.prompt for e in task.eval_examples()}
    drawn = {e.prompt for e in task.train_batch(3000, np.random.default_rng(1))}
    drawn |= {p for p, _ in task.warmup_pairs(3000, np.random.default_rng(2))}
    assert not drawn & held_out


def test_a_fixed_operand_count_draws_exactly_the_arith_stream_it_drew_before():
    """min_operands unset draws no count, so existing arith configs keep their problems (pinned streams)."""
    arith = build_task(resolve({"task": {"name": "arith", "operands": 3}, "eval": {"size": 50}}))
    same = build_task(resolve({"task": {"name": "arith", "operands": 3, "min_operands": 3}, "eval": {"size": 50}}))
    a, b = arith.train_batch(100, np.random.default_rng(7)), same.train_batch(100, np.random.default_rng(7))
    assert a == b and arith.fingerprint() == same.fingerprint()


@pytest.mark.parametrize(
    "task, message",
    [
        ({"name": "countdown", "min_operands": 2}, "only arith and chain"),
        ({"name": "chain", "operands": 3, "min_operands": 4}, "above task.operands"),
        ({"name": "chain", "length_tail": 0}, "greater than 0"),
    ],
)
def test_operand_range_knobs_are_checked_at_the_edge(task, message):
    with pytest.raises(ConfigError, match=message):
        resolve({"task": task})


def test_shortcut_share_warm_starts_on_derivations_of_different_lengths_for_one_problem():
    task = chain(operands=5, shortcut_share=0.5)
    example = Example("1+2+3+4+5=", "15")
    full = "=".join(derivation("1+2+3+4+5"))
    rng = np.random.default_rng(0)
    targets = [task.target(example, rng) for _ in range(400)]
    assert sum(t == full for t in targets) > 200, "about half are whole, and a shortened one may keep every step"
    shortened = {t for t in targets if t != full}
    assert len(shortened) >= 6 and all(t.endswith("=15") or t == "15" for t in shortened)
    assert all(task.is_correct(example, t) for t in shortened)
    assert all(set(t.split("=")) <= set(full.split("=")) for t in shortened), "steps are left out, never changed"
    assert chain(operands=5).target(example, np.random.default_rng(0)) == full
    assert chain(operands=5).fingerprint() != task.fingerprint()


def test_shortcut_share_is_refused_for_tasks_without_a_derivation():
    with pytest.raises(ConfigError, match="only chain has"):
        resolve({"task": {"name": "arith", "shortcut_share": 0.5}})
