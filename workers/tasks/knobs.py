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


class LookupKnobs(Knobs):
    """Multi-hop questions about a generated corpus of invented entities, one short page each."""

    documents: int = Field(
        300,
        ge=40,
        le=3000,
        description="Pages in the generated corpus, one invented entity each (people, cities, organisations, "
        "countries) with its relations.",
    )
    world_seed: int = Field(
        0,
        ge=0,
        le=2**31 - 1,
        description="Seed of the generated corpus, kept apart from the run seed so that every run of a config "
        "searches the same world.",
    )
    hops: int = Field(
        2,
        ge=2,
        le=3,
        description="Relations a question chains (the mentor of the founder of X: 2), so pages needed to answer it.",
    )
    warmup_hops: int = Field(
        1, ge=1, le=3, description="Hops of the questions the tiny model is warm-started on (at most task.hops)."
    )
    warmup_full_share: float = Field(
        0.5, ge=0, le=1, description="Share of task.hops questions mixed into the warm-start data."
    )

    def problem_space(self) -> int:
        """The distinct questions of task.hops hops the generated world asks (it is built to count them)."""
        from workers.tasks.lookup import question_count

        return question_count(self.world_seed, self.documents, self.hops)


class GridPuzzleKnobs(Knobs):
    """Sokoban-like puzzles: push every box onto a target (workers/tasks/grid.py)."""

    size: int = Field(
        6,
        ge=5,
        le=9,
        description="The board's side in cells, its border of walls included (6: 4 x 4 cells inside). The tiny "
        "model reads the board in every observation: (size + 1) x size characters.",
    )
    boxes: int = Field(1, ge=1, le=3, description="Boxes on the board, and as many targets.")
    walls: int = Field(1, ge=0, le=12, description="Wall cells inside the room, besides its border.")
    min_moves: int = Field(2, ge=1, le=40, description="The fewest moves a puzzle's shortest solution has.")
    max_moves: int = Field(
        6, ge=1, le=40, description="The most moves a puzzle's shortest solution has (the search's depth)."
    )
    warmup_max_moves: int = Field(
        4,
        ge=1,
        le=40,
        description="The easier slice the tiny model is warm-started on: puzzles solved in 1 to this many moves; "
        "a share of full-difficulty puzzles is mixed in.",
    )
    warmup_full_share: float = Field(
        0.5, ge=0, le=1, description="Share of full-difficulty puzzles in the warm-start data."
    )

    @model_validator(mode="after")
    def _fits_the_board(self) -> GridPuzzleKnobs:
        if self.min_moves > self.max_moves:
            raise ValueError(f"task.min_moves ({self.min_moves}) is above task.max_moves ({self.max_moves})")
        if self.walls + self.boxes + 1 > (self.size - 2) ** 2:
            raise ValueError(f"task.walls: {self.walls} walls and {self.boxes} boxes leave no room inside the board")
        return self

    def problem_space(self) -> int:
        """At most: the inner walls' cells x the targets' x the boxes' x the player's (most are not puzzles)."""
        from math import comb

        free = (self.size - 2) ** 2 - self.walls
        return comb(free + self.walls, self.walls) * comb(free, self.boxes) ** 2 * (free - self.boxes)


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
    "grid",
    "workers.tasks.grid:GridTask",
    summary="Sokoban-like puzzles on a small board, answered with the moves (U D L R) that put every box on a target.",
    knobs=GridPuzzleKnobs,
)
TASKS.declare(
    "lookup",
    "workers.tasks.lookup:LookupTask",
    summary="Multi-hop questions about a generated corpus (Who is the founder of the employer of Neku Tir?), "
    "answered with a name; with environment lookup the policy searches the corpus.",
    knobs=LookupKnobs,
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
