"""The tasks as RunConfig knows them: names, summaries and each task's own knobs (no numpy, no torch here).

RunConfig's `task` section is a union of these knob models told apart by `task.name`
(workers/config/schema.py), as the pipeline stages are: a task's knobs exist, validate and
appear in the launch form exactly when it is chosen. A task's code is imported only by
`TASKS.get(name)`, when a worker builds the task.

Each model also answers `problem_space()`: how many distinct problems the task can draw
(None for a file), which RunConfig checks eval.size against without importing the task.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from workers.knobs import Knobs
from workers.registry import Registry
from workers.tasks.counting import canonical_problem_count, expression_count

TASKS: Registry[type] = Registry("task")


class GeneratedTaskKnobs(Knobs):
    """A task that draws its problems; the tiny model warm-starts on an easier slice of them."""

    digits: int = Field(1, ge=1, le=6, description="The most digits an operand may have.")
    operands: int = Field(3, ge=2, le=8, description="The most operands per expression.")
    operators: str = Field("+-", max_length=8, description="The operators that may appear, from '+-*'.")
    warmup_digits: int = Field(
        1,
        ge=1,
        le=6,
        description="The easier slice the tiny model is warm-started on draws operands of at most this many "
        "digits; a share of full-difficulty problems is mixed in.",
    )
    warmup_operands: int = Field(2, ge=2, le=8, description="Operands (numbers) per problem in the easier slice.")
    warmup_full_share: float = Field(
        0.5, ge=0, le=1, description="Share of full-difficulty problems in the warm-start data."
    )

    @field_validator("operators")
    @classmethod
    def _known_operators(cls, ops: str) -> str:
        if not ops or set(ops) - set("+-*"):
            raise ValueError(f"'{ops}' must be a non-empty subset of '+-*'")
        return "".join(sorted(set(ops), key="+-*".index))

    def problem_space(self) -> int | None:
        raise NotImplementedError


class ArithKnobs(GeneratedTaskKnobs):
    min_operands: int | None = Field(
        None,
        ge=2,
        le=8,
        description="The fewest operands per expression; unset, every expression has task.operands. With it set, "
        "lengths vary from problem to problem (see length_tail).",
    )
    length_tail: float = Field(
        1.0,
        gt=0,
        le=1,
        description="With min_operands: P(k operands) is proportional to length_tail^(k - min_operands); 1 draws "
        "every count equally often, 0.5 halves the share at each extra operand: a long tail of long problems "
        "(and, for chain, of long completions).",
    )

    @model_validator(mode="after")
    def _operand_range(self) -> ArithKnobs:
        if self.min_operands is not None and self.min_operands > self.operands:
            raise ValueError(f"task.min_operands ({self.min_operands}) is above task.operands ({self.operands})")
        return self

    def operand_range(self) -> list[int]:
        """The operand counts a problem may have, fewest first."""
        return list(range(self.min_operands or self.operands, self.operands + 1))

    def problem_space(self) -> int:
        """Distinct prompts: operand values x operator choices (an expression's order matters here)."""
        return expression_count(self.digits, self.operand_range(), self.operators)


class ChainKnobs(ArithKnobs):
    shortcut_share: float = Field(
        0.0,
        ge=0,
        le=1,
        description="Share of the warm-start derivations that skip steps (each intermediate step left out with "
        "probability 1/2), so the warm-started model writes full and shortened derivations of one problem: "
        "lengths vary within a group, and a length-aware method has something to choose from.",
    )


class CountdownKnobs(GeneratedTaskKnobs):
    operands: int = Field(3, ge=2, le=8, description="The numbers given, each to be used once.")

    def problem_space(self) -> int:
        """Distinct problems: the order in which the numbers are listed does not make another one."""
        return canonical_problem_count(self.digits, self.operands, self.operators)


class FinalAnswerKnobs(Knobs):
    """How a completion's final answer is found and judged (workers/tasks/answers.py)."""

    verifier: Literal["numeric", "math-verify"] = Field(
        "numeric",
        description="numeric: the marked answer must be a number equal to the reference (2.50 = 5/2; thousands "
        "separators and $ allowed). math-verify: Hugging Face's math-verify compares it symbolically (LaTeX, "
        "fractions, units and \\text{} ignored).",
    )
    answer_position: Literal["last", "first"] = Field(
        "last", description="Which marked answer (#### x or \\boxed{x}) counts when a completion writes several."
    )
    extraction: Literal["strict", "flexible"] = Field(
        "strict",
        description="strict: only a marked answer (#### x or \\boxed{x}) counts; a completion without one is wrong. "
        "flexible: a completion without a mark is judged by its last number (answer_position first: its first), "
        "as lm-evaluation-harness's flexible-extract reads GSM8K. The format reward asks for the mark either way.",
    )


class WordProblemKnobs(FinalAnswerKnobs):
    """A story of one to four events that change a count, and the question how many there are at the end."""

    steps: int = Field(2, ge=1, le=4, description="The most events (operations) a story has.")
    min_steps: int = Field(1, ge=1, le=4, description="The fewest events a story has.")
    max_number: int = Field(20, ge=5, le=10_000, description="Counts and numbers stay between 1 and this.")
    operations: str = Field(
        "+-",
        max_length=4,
        description="The events a story may tell: + (gets more), - (gives away), * (k times as many), / (shares "
        "equally, keeps one share). + and - are always among them, so that every count can change.",
    )
    distractors: int = Field(
        1, ge=0, le=3, description="The most sentences per story whose numbers do not matter to the answer."
    )

    @field_validator("operations")
    @classmethod
    def _known_operations(cls, ops: str) -> str:
        if set(ops) - set("+-*/") or not {"+", "-"} <= set(ops):
            raise ValueError(f"'{ops}' must hold + and -, and may add * and /")
        return "".join(sorted(set(ops), key="+-*/".index))

    @model_validator(mode="after")
    def _step_range(self) -> WordProblemKnobs:
        if self.min_steps > self.steps:
            raise ValueError(f"task.min_steps: {self.min_steps} is above task.steps ({self.steps})")
        return self

    def problem_space(self) -> int:
        """At most: starts x numbers, then per event its templates x numbers, the distractors' placements, and the
        questions (names and things do not make another problem)."""
        from workers.tasks.stories import DISTRACTORS, EVENTS, QUESTIONS, STARTS

        events = sum(len(EVENTS[op]) for op in self.operations) * self.max_number
        stories = sum(events**k for k in range(self.min_steps, self.steps + 1))
        distractor = 1 + len(DISTRACTORS) * (self.steps + 2) * self.max_number
        return len(STARTS) * self.max_number * stories * distractor**self.distractors * len(QUESTIONS)


class FileTaskKnobs(FinalAnswerKnobs):
    path: str | None = Field(None, max_length=4096, description="The training file (required).")
    eval_path: str | None = Field(
        None, max_length=4096, description="A held-out file; without one, eval.size examples of `path` are held out."
    )
    question_field: str = Field(
        "question",
        max_length=256,
        description="The field holding the question. With both fields at their defaults, a file with MATH's "
        "fields is read as MATH (problem, solution).",
    )
    answer_field: str = Field(
        "answer", max_length=256, description="The field holding the answer (its final result after #### or in "
        "\\boxed{})."
    )  # fmt: skip

    @model_validator(mode="after")
    def _needs_a_path(self) -> FileTaskKnobs:
        if not self.path:
            raise ValueError(f"task '{getattr(self, 'name', 'file')}' needs task.path, the dataset file")
        return self

    def problem_space(self) -> None:
        """A file holds what it holds: its size is checked when it is read (and at launch, in DATA_ROOTS)."""
        return None


TASKS.declare(
    "arith",
    "workers.tasks.arith:ArithTask",
    summary="Integer expressions (47-8*3=), answered with the result.",
    knobs=ArithKnobs,
)
TASKS.declare(
    "chain",
    "workers.tasks.chain:ChainTask",
    summary="arith's expressions worked one operation at a time (3+4-2=7-2=5), so completions grow with the "
    "expression.",
    knobs=ChainKnobs,
)
TASKS.declare(
    "word-problems",
    "workers.tasks.word_problems:WordProblemTask",
    summary="Generated multi-step word problems in natural language with worked solutions, answered after #### "
    "(for real instruct models).",
    knobs=WordProblemKnobs,
)
TASKS.declare(
    "countdown",
    "workers.tasks.countdown:CountdownTask",
    summary="Reach a target from given numbers (3 7 12->33: 3*7+12).",
    knobs=CountdownKnobs,
)
TASKS.declare(
    "jsonl",
    "workers.tasks.qa_files:JsonlTask",
    summary="Question/answer records, one JSON object a line, with GSM8K '#### 42' or \\boxed{42} answers.",
    knobs=FileTaskKnobs,
)
TASKS.declare(
    "parquet",
    "workers.tasks.qa_files:ParquetTask",
    summary="Question/answer rows of a parquet file, with GSM8K '#### 42' or \\boxed{42} answers.",
    knobs=FileTaskKnobs,
)
