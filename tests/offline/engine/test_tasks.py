"""Tasks and verifiers: arith, countdown (parsed, never eval'd), and question/answer files."""

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from workers.config import resolve
from workers.errors import DatasetError
from workers.tasks import Example, build_task
from workers.tasks.expressions import ParseError, parse
from workers.tasks.qa_files import final_answer


def arith(**task):
    return build_task(resolve({"task": {"name": "arith", **task}, "eval": {"size": 50}}))


def test_arith_answers_respect_operator_precedence():
    task = arith(digits=2, operands=3, operators="+-*")
    for example in task.train_batch(200, np.random.default_rng(0)):
        text = example.prompt.rstrip("=")
        assert example.answer == str(int(parse(text).value))
    assert task.is_correct(Example("2+3*4=", "14"), "14")
    assert parse("2+3*4").value == 14 and parse("2-3-4").value == -5


def test_arith_never_trains_on_held_out_problems():
    task = arith(digits=1, operands=2)
    held_out = {e.prompt for e in task.eval_examples()}
    assert len(held_out) == 50
    drawn = {e.prompt for e in task.train_batch(2000, np.random.default_rng(1))}
    drawn |= {p for p, _ in task.warmup_pairs(2000, np.random.default_rng(2))}
    assert not drawn & held_out


def test_arith_held_out_split_does_not_depend_on_the_run_seed():
    a = build_task(resolve({"seed": 1, "eval": {"size": 30}})).eval_examples()
    b = build_task(resolve({"seed": 2, "eval": {"size": 30}})).eval_examples()
    assert a == b


def test_arith_verifier_is_exact():
    task = arith()
    example = Example("7-9=", "-2")
    assert task.is_correct(example, "-2") and task.is_correct(example, " -2 ")
    assert not task.is_correct(example, "2") and not task.is_correct(example, "-2x")
    assert task.answer_key(example, "007") == "7"


def test_arith_warmup_slice_is_easier():
    task = arith(digits=2, operands=3, operators="+-", warmup_digits=1, warmup_operands=2, warmup_full_share=0.0)
    for prompt, answer in task.warmup_pairs(100, np.random.default_rng(0)):
        numbers = prompt.rstrip("=").replace("-", "+").split("+")
        assert len(numbers) == 2 and all(len(n) == 1 for n in numbers)
        assert answer == str(int(parse(prompt.rstrip("=")).value))


def test_parser_refuses_anything_but_arithmetic():
    for text in ["__import__('os')", "2**8", "1;2", "abs(3)", "3 4", "(1+2", "1/0", ""]:
        with pytest.raises(ParseError):
            parse(text)
    assert parse(" (1 + 2) * -3 ").value == -9
    assert parse("7/2").value.denominator == 2


def countdown():
    return build_task(resolve({"task": {"name": "countdown", "digits": 1, "operands": 3}, "eval": {"size": 20}}))


def test_countdown_problems_are_solvable_and_the_verifier_checks_numbers():
    task = countdown()
    rng = np.random.default_rng(0)
    for prompt, solution in task.warmup_pairs(50, rng):
        numbers, target = prompt.rstrip(":").split("->")
        example = Example(prompt, target, tuple(int(n) for n in numbers.split()))
        if len(example.numbers) == 3:
            assert task.is_correct(example, solution)
    example = Example("3 7 2->23:", "23", (3, 7, 2))
    assert task.is_correct(example, "3*7+2")
    assert task.is_correct(example, "(7*3)+2")
    assert not task.is_correct(example, "21+2")  # uses a number not given
    assert not task.is_correct(example, "3*7+2+0")  # an extra number
    assert not task.is_correct(example, "3*7")  # not every number used
    assert not task.is_correct(example, "3*7+2=23x")
    assert task.answer_key(example, "3+7+2") == "12"


def test_countdown_target_is_reachable_for_training_problems():
    task = countdown()
    for example in task.train_batch(50, np.random.default_rng(3)):
        assert int(example.answer) > 0 and len(example.numbers) == 3


def test_no_countdown_eval_problem_is_a_reordering_of_a_training_one():
    """The numbers' order does not change a countdown problem: held out means held out in every order."""
    task = build_task(resolve({"task": {"name": "countdown", "digits": 1, "operands": 3}}))  # eval.size 200
    problem = lambda e: (tuple(sorted(e.numbers)), e.answer)  # noqa: E731
    held_out = [problem(e) for e in task.eval_examples()]
    assert len(held_out) == len(set(held_out)) == 200  # no two eval problems are one problem either
    seen = {problem(e) for e in task.train_batch(20_000, np.random.default_rng(0))}
    for prompt, _ in task.warmup_pairs(5_000, np.random.default_rng(1)):
        numbers, target = prompt.rstrip(":").split("->")
        seen.add((tuple(sorted(int(n) for n in numbers.split())), target))
    assert len(seen) > 200  # training still draws plenty of distinct problems
    assert not seen & set(held_out)


def test_countdown_problem_space_counts_problems_not_orderings():
    from workers.tasks.countdown import canonical_problem_count

    # two 1-digit numbers with + and -: each pair {a, b} gives a + b and |a - b| when positive
    pairs = [(a, b) for a in range(1, 10) for b in range(a, 10)]
    assert canonical_problem_count(1, 2, "+-") == sum(1 + (a != b) for a, b in pairs)


def test_final_answer_reads_gsm8k_and_boxed_forms():
    assert final_answer("so 3+4=7\n#### 7") == "7"
    assert final_answer("#### 1,234") == "1234"
    assert final_answer("the answer is \\boxed{42}.") == "42"
    assert final_answer("\\boxed{\\frac{1}{2}}") == "1/2"
    assert final_answer("#### 2.50") == "5/2"
    assert final_answer("first \\boxed{1} then #### 2") == "2"  # the last one counts
    assert final_answer("no final answer") is None


def write_jsonl(path, rows):
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")


def qa_rows(n):
    return [{"question": f"What is {i} plus 1?", "answer": f"{i} + 1 = {i + 1}\n#### {i + 1}"} for i in range(n)]


def file_task(name, path, **extra):
    return build_task(resolve({"task": {"name": name, "path": str(path), **extra}, "eval": {"size": 5}}))


def test_jsonl_task_holds_out_eval_and_verifies_numbers(tmp_path):
    path = tmp_path / "qa.jsonl"
    write_jsonl(path, qa_rows(30))
    task = file_task("jsonl", path)
    evals = task.eval_examples()
    train = task.train_batch(25, np.random.default_rng(0))
    assert len(evals) == 5 and not {e.prompt for e in evals} & {e.prompt for e in train}
    assert len({e.prompt for e in train}) == 25  # an epoch without replacement
    example = evals[0]
    assert task.is_correct(example, f"... #### {example.answer}")
    assert task.is_correct(example, f"so \\boxed{{{example.answer}}}")
    assert not task.is_correct(example, f"{example.answer}")  # no final-answer marker


def test_parquet_task_reads_the_same_records(tmp_path):
    path = tmp_path / "qa.parquet"
    pq.write_table(pa.Table.from_pylist(qa_rows(30)), path)
    task = file_task("parquet", path)
    assert len(task.eval_examples()) == 5
    assert task.fingerprint() == file_task("parquet", path).fingerprint()


def test_missing_file_is_named(tmp_path):
    with pytest.raises(DatasetError, match="missing.jsonl: no such dataset file"):
        file_task("jsonl", tmp_path / "missing.jsonl")


def test_malformed_jsonl_line_is_named_by_file_and_line(tmp_path):
    path = tmp_path / "qa.jsonl"
    lines = [json.dumps(r) for r in qa_rows(10)]
    lines[6] = '{"question": "broken", "answer": '
    path.write_text("\n".join(lines))
    with pytest.raises(DatasetError, match=r"qa.jsonl:7: not valid JSON"):
        file_task("jsonl", path)


def test_record_without_answer_field_is_named(tmp_path):
    path = tmp_path / "qa.jsonl"
    rows = qa_rows(10)
    del rows[2]["answer"]
    write_jsonl(path, rows)
    with pytest.raises(DatasetError, match=r"qa.jsonl:3: missing text field 'answer'"):
        file_task("jsonl", path)


def test_answer_without_final_number_is_named(tmp_path):
    path = tmp_path / "qa.jsonl"
    rows = qa_rows(10)
    rows[4]["answer"] = "five"
    write_jsonl(path, rows)
    with pytest.raises(DatasetError, match=r"qa.jsonl:5: answer has no final number"):
        file_task("jsonl", path)


def test_custom_field_names_and_separate_eval_file(tmp_path):
    train, held = tmp_path / "train.jsonl", tmp_path / "eval.jsonl"
    rename = lambda rows: [{"q": r["question"], "a": r["answer"]} for r in rows]  # noqa: E731
    write_jsonl(train, rename(qa_rows(8)))
    write_jsonl(held, rename(qa_rows(3)))
    task = file_task("jsonl", train, eval_path=str(held), question_field="q", answer_field="a")
    assert len(task.eval_examples()) == 3


def test_fingerprint_changes_when_the_file_changes(tmp_path):
    path = tmp_path / "qa.jsonl"
    write_jsonl(path, qa_rows(30))
    before = file_task("jsonl", path).fingerprint()
    write_jsonl(path, qa_rows(31))
    assert file_task("jsonl", path).fingerprint() != before


def test_the_data_sets_own_fields_are_read_as_they_are_gsm8k_and_math(tmp_path):
    """GSM8K's question/answer, and MATH's problem/solution (MATH-500 adds a bare answer field, not needed)."""
    gsm8k, math = tmp_path / "gsm8k.jsonl", tmp_path / "math.parquet"
    write_jsonl(gsm8k, [{"question": f"What is {i} + 1?", "answer": f"{i} + 1 = {i + 1}\n#### {i + 1}"}
                        for i in range(12)])  # fmt: skip
    rows = [{"problem": f"Compute ${i}/2$.", "solution": f"Halve it: $\\boxed{{\\frac{{{i}}}{{2}}}}$.",
             "answer": f"\\frac{{{i}}}{{2}}", "level": "Level 1"} for i in range(1, 13)]  # fmt: skip
    pq.write_table(pa.Table.from_pylist(rows), math)
    held = file_task("jsonl", gsm8k).eval_examples()
    assert all(e.prompt == f"What is {int(e.answer) - 1} + 1?\n" for e in held) and len(held) == 5
    boxed = file_task("parquet", math, verifier="math-verify")
    assert boxed.instruction.endswith("within \\boxed{}.")  # a chat model is asked for MATH's answer format
    for example in boxed.eval_examples():
        i = int(example.prompt.removeprefix("Compute $").split("/")[0])
        assert boxed.is_correct(example, f"so $\\boxed{{\\frac{{{2 * i}}}{{4}}}}$")  # i/2 written otherwise
        assert not boxed.is_correct(example, f"so $\\boxed{{{i + 1}}}$")


def test_a_file_in_neither_layout_names_the_field_and_the_layouts_it_knows(tmp_path):
    path = tmp_path / "qa.jsonl"
    write_jsonl(path, [{"prompt": "What is 1 + 1?", "response": "#### 2"}] * 12)
    with pytest.raises(DatasetError, match=r"qa.jsonl:1: missing text field 'question' \(GSM8K's question/answer or "
                       r"MATH's problem/solution"):  # fmt: skip
        file_task("jsonl", path)
