"""`jsonl` and `parquet`: question/answer files in the GSM8K or boxed answer format.

Each record has a question and an answer whose final result is written `#### 42` (GSM8K) or `\\boxed{42}`
(MATH). The data sets' own fields are read as they are (GSM8K's question and answer, MATH's problem and
solution), others through task.question_field and task.answer_field. The completion is judged by the same
rule: its last (task.answer_position) `#### x` or `\\boxed{x}` must equal the reference,
numerically or by math-verify (task.verifier; workers/tasks/answers.py).

    {"question": "Tom has 3 apples...", "answer": "3 + 4 = 7\\n#### 7"}

A missing file, a line that is not JSON, a record without the fields, or an
answer without a final number raises DatasetError naming the file and line.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from workers.errors import DatasetError
from workers.tasks import Example, sha256_lines
from workers.tasks.answers import FinalAnswerVerifier, final_answer

HOLDOUT_SEED = 3_000_003

# The fields of the data sets' own files: GSM8K's question/answer (`#### 42`), and MATH's problem/solution (the
# worked solution ends in \boxed{}; MATH-500's extra bare `answer` field is not needed). A file read with the
# default fields is read in the first of these layouts its first record has.
LAYOUTS = (("question", "answer"), ("problem", "solution"))
DEFAULT_FIELDS = LAYOUTS[0]


INSTRUCTIONS = {
    "####": "Solve the problem step by step, then give the final answer after ####.",
    "boxed": "Solve the problem step by step, then put the final answer within \\boxed{}.",
}


class QATask(FinalAnswerVerifier):
    """Question/answer records; their final answers checked by the numeric verifier or math-verify (answers.py)."""

    def __init__(self, cfg):
        task = cfg.task
        self.verifier, self.answer_position, self.extraction = task.verifier, task.answer_position, task.extraction
        self.question_field, self.answer_field = task.question_field, task.answer_field
        records = self.read(Path(task.path))
        self.sources = [Path(task.path)]
        if task.eval_path:
            self.sources.append(Path(task.eval_path))
            self._train, self._eval = records, self.read(Path(task.eval_path))
        else:
            if len(records) <= cfg.eval.size:
                raise DatasetError(
                    f"{task.path}: {len(records)} records cannot hold out eval.size={cfg.eval.size} "
                    "and still train; lower eval.size or give task.eval_path"
                )
            order = np.random.default_rng(HOLDOUT_SEED).permutation(len(records))
            held = set(int(i) for i in order[: cfg.eval.size])
            self._eval = [r for i, r in enumerate(records) if i in held]
            self._train = [r for i, r in enumerate(records) if i not in held]
        self._cursor, self._order = 0, None
        self._full_answers = {e.prompt: text for e, text in self._train + self._eval}
        # a chat model is asked for the answer format of the references: \boxed{} if most of them use it
        boxed = sum("\\boxed{" in text for _, text in self._train)
        self.instruction = INSTRUCTIONS["boxed" if 2 * boxed > len(self._train) else "####"]

    # ------------------------------------------------------------------ reading
    def read(self, path: Path) -> list[tuple[Example, str]]:
        if not path.is_file():
            raise DatasetError(f"{path}: no such dataset file")
        rows = list(self.rows(path))
        if not rows:
            raise DatasetError(f"{path}: holds no records")
        fields = self.fields_of(rows[0][1])
        return [self.to_example(path, where, row, fields) for where, row in rows]

    def fields_of(self, first) -> tuple[str, str]:
        """The (question, answer) fields of a file: the task's, or with the defaults the layout (GSM8K's, MATH's)
        its first record has."""
        chosen = (self.question_field, self.answer_field)
        if chosen != DEFAULT_FIELDS or not isinstance(first, dict):
            return chosen
        return next((layout for layout in LAYOUTS if all(field in first for field in layout)), chosen)

    def to_example(self, path: Path, where: str, row, fields: tuple[str, str]) -> tuple[Example, str]:
        if not isinstance(row, dict):
            raise DatasetError(f"{path}:{where}: a record must be an object with fields")
        question_field, answer_field = fields
        for field in fields:
            if not isinstance(row.get(field), str) or not row[field].strip():
                hint = "" if fields != DEFAULT_FIELDS else " (GSM8K's question/answer or MATH's problem/solution; " \
                    "set task.question_field and task.answer_field for others)"  # fmt: skip
                raise DatasetError(f"{path}:{where}: missing text field '{field}'{hint}")
        answer_text = row[answer_field]
        answer = final_answer(answer_text)
        if answer is None:
            raise DatasetError(f"{path}:{where}: answer has no final number as '#### 42' or \\boxed{{42}}")
        return Example(prompt=row[question_field].strip() + "\n", answer=answer), answer_text

    # ------------------------------------------------------------------ the Task protocol
    def train_batch(self, n: int, rng: np.random.Generator) -> list[Example]:
        """Epochs without replacement: every record is seen once before any is seen twice."""
        batch = []
        while len(batch) < n:
            if self._order is None or self._cursor == len(self._order):
                self._order, self._cursor = rng.permutation(len(self._train)), 0
            batch.append(self._train[int(self._order[self._cursor])][0])
            self._cursor += 1
        return batch

    def eval_examples(self) -> list[Example]:
        return [example for example, _ in self._eval]

    def warmup_pairs(self, n: int, rng: np.random.Generator) -> list[tuple[str, str]]:
        """The easier slice: the shorter half of the training answers, worked solutions included."""
        by_length = sorted(self._train, key=lambda pair: len(pair[1]))
        easy = by_length[: max(1, len(by_length) // 2)]
        return [(easy[int(i)][0].prompt, easy[int(i)][1]) for i in rng.integers(0, len(easy), n)]

    def fingerprint(self) -> str:
        digest = hashlib.sha256()
        for source in self.sources:
            digest.update(source.read_bytes())
        return sha256_lines([self.name, digest.hexdigest(), *(e.prompt for e, _ in self._eval)])


class JsonlTask(QATask):
    """One JSON object per line with question and answer fields."""

    name = "jsonl"

    def rows(self, path: Path):
        with path.open(encoding="utf-8") as lines:
            for number, line in enumerate(lines, start=1):
                if not line.strip():
                    continue
                try:
                    yield f"{number}", json.loads(line)
                except json.JSONDecodeError as exc:
                    raise DatasetError(f"{path}:{number}: not valid JSON ({exc.msg})") from None


class ParquetTask(QATask):
    """A parquet table with question and answer columns."""

    name = "parquet"

    def rows(self, path: Path):
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(path)
        except Exception as exc:  # pyarrow raises several types for a damaged file
            raise DatasetError(f"{path}: not a readable parquet file ({exc})") from None
        for number, row in enumerate(table.to_pylist(), start=1):
            yield f"row {number}", row
