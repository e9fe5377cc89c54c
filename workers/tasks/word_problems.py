"""`word-problems`: generated multi-step word problems in natural language, each with its worked solution.

A problem is a short story: someone starts with a number of things, then one to four events change it (buys
more, gives some away, gets k times as many, shares them equally and keeps one share), optionally among
sentences whose numbers do not matter (distractors), and a question asks how many there are at the end:

    Mia has 7 marbles. She buys 5 more marbles. Noah has 12 shells. She gives 3 marbles to Liam.
    How many marbles does Mia have now?

The worked solution writes one line per event and the answer after ####, GSM8K's format:

    7 + 5 = 12
    12 - 3 = 9
    #### 9

so the task suits a small real instruct model (SmolLM2-135M-Instruct answers some of them right from the start,
and has room to learn), and the tiny model can be warm-started on the solutions. A completion is judged by its
final answer (workers/tasks/answers.py: the last `#### x` or `\\boxed{x}`, or the first, by task.answer_position).

Knobs: `task.min_steps` .. `task.steps` events, numbers up to `task.max_number`, `task.distractors` irrelevant
sentences at most. The held-out split is kept by problem: the sequence of sentence templates and the numbers,
whatever names and things the story uses, so training never sees a held-out problem retold with other names.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workers.tasks import Example, held_out_size, held_out_split, sha256_lines
from workers.tasks.answers import FinalAnswerVerifier
from workers.tasks.qa_files import INSTRUCTIONS
from workers.tasks.stories import DISTRACTORS, EVENTS, NAMES, QUESTIONS, STARTS, THINGS

EVAL_SEED = 4_000_037


@dataclass(frozen=True)
class Drawn:
    example: Example
    solution: str  # the worked solution, ending with `#### answer`
    key: tuple  # the problem behind the story: its templates and numbers, not its names and things


class WordProblemTask(FinalAnswerVerifier):
    """Multi-step word problems with worked solutions; their final answers checked as answers.py says."""

    name = "word-problems"
    instruction = INSTRUCTIONS["####"]

    def __init__(self, cfg):
        task = cfg.task
        self.min_steps, self.steps, self.max_number = task.min_steps, task.steps, task.max_number
        self.distractors, self.operations = task.distractors, task.operations
        self.verifier, self.answer_position, self.extraction = task.verifier, task.answer_position, task.extraction
        size = held_out_size(cfg.eval.size, task.problem_space())
        keys: dict[str, tuple] = {}

        def draw(rng):
            drawn = self.draw(rng)
            keys[drawn.example.prompt] = drawn.key
            return drawn.example

        self._held_out_examples = held_out_split(draw, size, EVAL_SEED, key=lambda e: keys[e.prompt])
        self._eval = self._held_out_examples[: cfg.eval.size]
        self._held_out = {keys[e.prompt] for e in self._held_out_examples}

    # ------------------------------------------------------------------ drawing
    def draw(self, rng: np.random.Generator) -> Drawn:
        """One story: a start, min_steps..steps events (each keeping the count a whole number from 0 to
        max_number), distractors between them, the question; and its worked solution."""
        count = int(rng.integers(self.min_steps, self.steps + 1))
        who, other, *_ = rng.choice(NAMES, size=2, replace=False).tolist()
        things, other_things = rng.choice(THINGS, size=2, replace=False).tolist()
        value = int(rng.integers(2, self.max_number + 1))
        start = int(rng.integers(len(STARTS)))
        sentences = [STARTS[start].format(who=who, n=value, things=things)]
        key, lines = [("start", start, value)], []
        for _ in range(count):
            op, n = self.draw_event(rng, value)
            template = int(rng.integers(len(EVENTS[op])))
            sentences.append(EVENTS[op][template].format(who=who, n=n, things=things, other=other))
            result = {"+": value + n, "-": value - n, "*": value * n, "/": value // n}[op]
            lines.append(f"{value} {op} {n} = {result}")
            key.append((op, template, n))
            value = result
        for _ in range(int(rng.integers(0, self.distractors + 1))):
            template = int(rng.integers(len(DISTRACTORS)))
            at = int(rng.integers(1, len(sentences) + 1))
            n = int(rng.integers(2, self.max_number + 1))
            sentences.insert(at, DISTRACTORS[template].format(other=other, n=n, other_things=other_things))
            key.append(("distractor", template, at, n))
        question = int(rng.integers(len(QUESTIONS)))
        sentences.append(QUESTIONS[question].format(who=who, things=things))
        key.append(("question", question))
        prompt = " ".join(sentences)
        solution = "\n".join([*lines, f"#### {value}"])
        return Drawn(Example(prompt=prompt, answer=str(value)), solution, tuple(key))

    def draw_event(self, rng: np.random.Generator, value: int) -> tuple[str, int]:
        """An operation that keeps the count whole and within 1..max_number, and its number. + or - always
        applies (the knobs require both), * and / when the count allows."""
        while True:
            op = self.operations[int(rng.integers(len(self.operations)))]
            if op == "+" and value < self.max_number:
                return op, int(rng.integers(1, self.max_number - value + 1))
            if op == "-" and value > 1:
                return op, int(rng.integers(1, value))
            if op == "*" and 2 * value <= self.max_number:
                return op, int(rng.integers(2, min(4, self.max_number // value) + 1))
            divisors = [k for k in range(2, 6) if value % k == 0]
            if op == "/" and divisors:
                return op, divisors[int(rng.integers(len(divisors)))]

    def _draw_training(self, rng: np.random.Generator) -> Drawn:
        while True:  # rejection keeps the held-out problems, in any retelling, out of training
            drawn = self.draw(rng)
            if drawn.key not in self._held_out:
                return drawn

    # ------------------------------------------------------------------ the Task protocol
    def train_batch(self, n: int, rng: np.random.Generator) -> list[Example]:
        return [self._draw_training(rng).example for _ in range(n)]

    def eval_examples(self) -> list[Example]:
        return list(self._eval)

    def warmup_pairs(self, n: int, rng: np.random.Generator) -> list[tuple[str, str]]:
        """The tiny model's warm-up: training problems with their worked solutions."""
        return [(drawn.example.prompt, drawn.solution) for drawn in (self._draw_training(rng) for _ in range(n))]

    def fingerprint(self) -> str:
        knobs = (f"word-problems steps={self.min_steps}..{self.steps} max_number={self.max_number} "
                 f"distractors={self.distractors} operations={self.operations}")  # fmt: skip
        return sha256_lines([knobs, *(e.prompt for e in self._held_out_examples)])
