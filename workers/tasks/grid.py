"""`grid`: a small Sokoban-like puzzle; the completion is the moves that push every box onto a target.

    ######
    #  . #
    # #$ #        '#' wall, '@' the player, '$' a box, '.' a target, '*' a box on a target,
    #  @ #        '+' the player on a target, ' ' floor
    #    #
    ######

A move is a letter, U D L R (up, down, left, right; the words are read too). The player walks onto floor and pushes
a box ahead of it when the cell behind the box is free; it never pulls, and never pushes two boxes at once. The
verifier plays the completion's moves from the board: correct when every box stands on a target, the moves after
that ignored; the first move that cannot be made (into a wall, or a box that cannot move) ends the play there.

Every puzzle is solvable and its minimum number of moves is known: the generator draws a room (`task.size` square,
its border and `task.walls` cells inside it walls) and `task.boxes` targets, then searches breadth-first *backwards*
from the solved boards (the boxes on the targets, the player anywhere) with the moves reversed (the player steps
back, pulling a box it faced), up to `task.max_moves` moves; the distance of every state reached is the forward
minimum, and the puzzle is one of the states at `task.min_moves` to `task.max_moves`, drawn evenly. `Example.answer`
holds that minimum, the prompt the board. `shortest_solution` is the plain forward search, the reference the tests
compare with. The held-out split is drawn from its own seed, as arith's; the tiny model warms up on the easier
slice, puzzles of at most `task.warmup_max_moves` moves, each with a shortest solution as its target.

The grid environment (workers/environments/grid/) plays the same puzzles over several turns, showing the board
after each.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from workers.tasks import Example, held_out_size, held_out_split, sha256_lines

EVAL_SEED = 3_000_017  # the held-out split's own seed, independent of the run's
MOVES = "UDLR"  # the order every search tries them in, so the shortest solution written is always the same
WORDS = {"up": "U", "down": "D", "left": "L", "right": "R"}
MOVE_TEXT = re.compile(r"\s*(?:(?:up|down|left|right|[udlr])[\s,]*)+", re.IGNORECASE)
ONE_MOVE = re.compile(r"up|down|left|right|[udlr]", re.IGNORECASE)
WALL_AHEAD = "a wall is in the way"
BOX_STUCK = "the box cannot move"  # a wall or another box behind it


class State(NamedTuple):
    """Where the player and the boxes are: cell indices (row * width + column), the boxes as a bit mask."""

    player: int
    boxes: int  # bit c set: a box on cell c


@dataclass(frozen=True)
class Board:
    """What never moves: the walls and the targets of a room `height` rows by `width` columns, closed by walls."""

    width: int
    height: int
    walls: frozenset[int]
    targets: int  # bit mask, as State.boxes

    def offset(self, move: str) -> int:
        return {"U": -self.width, "D": self.width, "L": -1, "R": 1}[move]

    def solved(self, state: State) -> bool:
        return state.boxes == self.targets

    def free(self, cell: int, boxes: int) -> bool:
        return cell not in self.walls and not boxes >> cell & 1

    def cells(self, mask: int) -> list[int]:
        return [c for c in range(self.width * self.height) if mask >> c & 1]

    def text(self, state: State) -> str:
        """The board as the policy reads it, one line per row, each ended by a newline."""
        rows = []
        for r in range(self.height):
            row = ""
            for c in range(r * self.width, (r + 1) * self.width):
                row += cell_char(c in self.walls, c == state.player, state.boxes >> c & 1, self.targets >> c & 1)
            rows.append(row + "\n")
        return "".join(rows)

    def key(self, state: State) -> str:
        """The state's canonical key: the player's (row, column), then the boxes' in order, e.g. '@3,2 $2,3'."""
        at = lambda c: f"{c // self.width},{c % self.width}"  # noqa: E731
        return " ".join([f"@{at(state.player)}", *(f"${at(c)}" for c in self.cells(state.boxes))])

    def dead(self, state: State) -> bool:
        """A box off target in a corner (a wall above or below it and one beside it) can never move again."""
        for c in self.cells(state.boxes & ~self.targets):
            vertical = c - self.width in self.walls or c + self.width in self.walls
            if vertical and (c - 1 in self.walls or c + 1 in self.walls):
                return True
        return False


def cell_char(wall: bool, player: bool, box: int, target: int) -> str:
    if wall:
        return "#"
    if player:
        return "+" if target else "@"
    if box:
        return "*" if target else "$"
    return "." if target else " "


def parse(text: str) -> tuple[Board, State]:
    """A board written as `Board.text` writes it; ValueError if it is not a closed room with one player and as
    many boxes as targets."""
    rows = text.strip("\n").split("\n")
    height, width = len(rows), max(len(row) for row in rows)
    rows = [row.ljust(width) for row in rows]
    walls, player, boxes, targets = set(), [], 0, 0
    for r, row in enumerate(rows):
        for c, char in enumerate(row):
            cell = r * width + c
            if char not in "#@$.*+ ":
                raise ValueError(f"'{char}' is not a cell of a board")
            edge = r in (0, height - 1) or c in (0, width - 1)
            if char == "#":
                walls.add(cell)
            elif edge:
                raise ValueError("a board is closed by walls")
            if char in "@+":
                player.append(cell)
            boxes |= (char in "$*") << cell
            targets |= (char in ".*+") << cell
    if len(player) != 1 or boxes.bit_count() != targets.bit_count() or not boxes:
        raise ValueError("a board has one player and as many boxes as targets, at least one")
    return Board(width, height, frozenset(walls), targets), State(player[0], boxes)


# ---------------------------------------------------------------- playing
def step(board: Board, state: State, move: str) -> tuple[State, str | None]:
    """The state after one move, or the same state and why the move cannot be made."""
    ahead = state.player + board.offset(move)
    if ahead in board.walls:
        return state, WALL_AHEAD
    if not state.boxes >> ahead & 1:
        return State(ahead, state.boxes), None
    beyond = ahead + board.offset(move)
    if not board.free(beyond, state.boxes):
        return state, BOX_STUCK
    return State(ahead, state.boxes ^ (1 << ahead) | (1 << beyond)), None


@dataclass(frozen=True)
class Play:
    """What a string of moves did: the state it left, the moves tried, the one refused (if any) and why."""

    state: State
    tried: int  # moves made, and the refused one if any (the moves after it are not tried)
    refused: str | None = None  # "R: a wall is in the way"
    solved: bool = False


def play(board: Board, state: State, moves: str) -> Play:
    """The moves in order, until every box is on a target or a move cannot be made."""
    for i, move in enumerate(moves):
        if board.solved(state):
            return Play(state, i, solved=True)
        state, refusal = step(board, state, move)
        if refusal is not None:
            return Play(state, i + 1, f"{move}: {refusal}")
    return Play(state, len(moves), solved=board.solved(state))


def read_moves(text: str) -> str | None:
    """The moves a text writes ('RRD', 'R R D', 'r,r,d', 'right right down'), or None if it is anything else."""
    if not MOVE_TEXT.fullmatch(text):
        return None
    return "".join(WORDS.get(m.lower(), m.upper()) for m in ONE_MOVE.findall(text))


# ---------------------------------------------------------------- searching
def shortest_solution(board: Board, state: State, limit: int) -> str | None:
    """The shortest moves that solve the board, by forward breadth-first search over (player, boxes) states, if
    there are any of at most `limit` moves (ties broken by the order U D L R)."""
    came_from: dict[State, tuple[State, str] | None] = {state: None}
    frontier, depth = [state], 0
    while frontier:
        for s in frontier:
            if board.solved(s):
                return path_to(came_from, s)
        if depth == limit:
            return None
        following = []
        for s in frontier:
            for move in MOVES:
                after, refusal = step(board, s, move)
                if refusal is None and after not in came_from and not board.dead(after):
                    came_from[after] = (s, move)
                    following.append(after)
        frontier, depth = following, depth + 1
    return None


def path_to(came_from: dict, state: State) -> str:
    moves = []
    while came_from[state] is not None:
        state, move = came_from[state]
        moves.append(move)
    return "".join(reversed(moves))


def moves_to_goal(board: Board, limit: int) -> dict[State, int]:
    """Every state that can be solved in at most `limit` moves, with its minimum: breadth-first from the solved
    states (the boxes on the targets, the player on any free cell) over reversed moves. Undoing a move, the player
    steps back to a free cell, either alone or pulling along the box it was facing (the box a push moved)."""
    distance = {State(p, board.targets): 0 for p in range(board.width * board.height)
                if board.free(p, board.targets)}  # fmt: skip
    queue = deque(distance)
    while queue:
        state = queue.popleft()
        d = distance[state]
        if d == limit:
            continue
        for move in MOVES:
            back = state.player - board.offset(move)  # where the player stood before moving `move`
            if not board.free(back, state.boxes):
                continue
            before = [State(back, state.boxes)]  # a plain step
            pushed = state.player + board.offset(move)
            if state.boxes >> pushed & 1:  # the box ahead may have been pushed there from the player's cell
                before.append(State(back, state.boxes ^ (1 << pushed) | (1 << state.player)))
            for earlier in before:
                if earlier not in distance:
                    distance[earlier] = d + 1
                    queue.append(earlier)
    return distance


def descend(board: Board, state: State, distance: dict[State, int]) -> str:
    """A shortest solution read off the distances: each move goes to a state one move nearer the goal."""
    moves = ""
    while distance[state]:
        move, state = nearer(board, state, distance)
        moves += move
    return moves


def nearer(board: Board, state: State, distance: dict[State, int]) -> tuple[str, State]:
    """The first move (U D L R) to a state one move nearer the goal: there is one, the distances being exact."""
    for move in MOVES:
        after, refusal = step(board, state, move)
        if refusal is None and distance.get(after) == distance[state] - 1:
            return move, after
    raise AssertionError(f"no move from {board.key(state)} is nearer the goal")


@lru_cache(maxsize=256)  # a room and its targets come back often on small boards; the search is the cost
def puzzles_in(board: Board, low: int, high: int) -> tuple[tuple[State, ...], dict[State, int]]:
    """The states solvable in low..high moves at the least (in the search's order), and every state's distance."""
    distance = moves_to_goal(board, high)
    return tuple(s for s, d in distance.items() if d >= low), distance


# ---------------------------------------------------------------- drawing
@dataclass(frozen=True)
class Puzzle:
    board: Board
    state: State
    solution: str  # a shortest one

    def example(self) -> Example:
        return Example(prompt=self.board.text(self.state), answer=str(len(self.solution)))


def draw_puzzle(rng: np.random.Generator, size: int, boxes: int, walls: int, low: int, high: int) -> Puzzle:
    """A room of size x size (border included) with `walls` inner walls and `boxes` targets, and a state of it
    solvable in low..high moves at the least, drawn evenly; rooms without one are drawn again."""
    inside = [r * size + c for r in range(1, size - 1) for c in range(1, size - 1)]
    border = [c for c in range(size * size) if c not in inside]
    for _ in range(1000):
        cells = [inside[i] for i in rng.permutation(len(inside))[: walls + boxes]]
        targets = sum(1 << c for c in cells[walls:])
        board = Board(size, size, frozenset(border + cells[:walls]), targets)
        states, distance = puzzles_in(board, low, high)
        if states:
            state = states[int(rng.integers(len(states)))]
            return Puzzle(board, state, descend(board, state, distance))
    raise ValueError(f"no {size}x{size} room with {boxes} boxes and {walls} walls has puzzles of {low}-{high} moves")


class GridTask:
    """Sokoban-like puzzles; the verifier plays the completion's moves."""

    name = "grid"
    instruction = (
        "Push every box ($) onto a target (.): '#' is a wall, '@' you, '*' a box on a target, '+' you on a target. "
        "Answer with your moves only, as letters U D L R (up, down, left, right), e.g. RRDL."
    )  # said to a chat model; the tiny model reads the bare board

    def __init__(self, cfg):
        task = cfg.task
        self.size, self.boxes, self.walls = task.size, task.boxes, task.walls
        self.min_moves, self.max_moves = task.min_moves, task.max_moves
        self.warmup_max_moves = min(task.warmup_max_moves, self.max_moves)
        self.warmup_full_share = task.warmup_full_share
        size = held_out_size(cfg.eval.size, task.problem_space())
        held = held_out_split(lambda rng: self.draw(rng).example(), size, EVAL_SEED)
        # problem_space counts boards, most of which are no puzzle; when the draws found fewer distinct puzzles
        # than asked for, they found about all there are, and half of them stay for training
        self._held_out_examples = held if len(held) == size else held[: len(held) // 2]
        self._eval = self._held_out_examples[: cfg.eval.size]
        self._held_out = {e.prompt for e in self._held_out_examples}

    def draw(self, rng: np.random.Generator, easier: bool = False) -> Puzzle:
        low, high = (1, self.warmup_max_moves) if easier else (self.min_moves, self.max_moves)
        return draw_puzzle(rng, self.size, self.boxes, self.walls, low, high)

    def _draw_training(self, rng: np.random.Generator, easier: bool = False) -> Puzzle:
        while True:  # rejection keeps the held-out puzzles out of training
            puzzle = self.draw(rng, easier)
            if puzzle.board.text(puzzle.state) not in self._held_out:
                return puzzle

    def train_batch(self, n: int, rng: np.random.Generator) -> list[Example]:
        return [self._draw_training(rng).example() for _ in range(n)]

    def eval_examples(self) -> list[Example]:
        return list(self._eval)

    def warmup_pairs(self, n: int, rng: np.random.Generator) -> list[tuple[str, str]]:
        """The easier slice (at most warmup_max_moves moves), a share of full-difficulty puzzles mixed in; each
        target is a shortest solution."""
        pairs = []
        for _ in range(n):
            puzzle = self._draw_training(rng, easier=rng.random() >= self.warmup_full_share)
            pairs.append((puzzle.board.text(puzzle.state), puzzle.solution))
        return pairs

    def played(self, example: Example, completion: str) -> tuple[Board, Play] | None:
        moves = read_moves(completion)
        if moves is None:
            return None
        board, state = parse(example.prompt)
        return board, play(board, state, moves)

    def answer_key(self, example: Example, completion: str) -> str | None:
        """A solving completion commits to the answer (the puzzle solved: its minimum moves, Example.answer);
        another to the state it left the board in; None if it writes no moves."""
        played = self.played(example, completion)
        if played is None:
            return None
        board, result = played
        return example.answer if result.solved else board.key(result.state)

    def is_correct(self, example: Example, completion: str) -> bool:
        played = self.played(example, completion)
        return played is not None and played[1].solved

    def format_ok(self, example: Example, completion: str) -> bool:
        return read_moves(completion) is not None

    def fingerprint(self) -> str:
        knobs = (
            f"grid size={self.size} boxes={self.boxes} walls={self.walls} "
            f"moves={self.min_moves}-{self.max_moves} generator=reverse-bfs-1"
        )
        return sha256_lines([knobs, *(e.prompt + e.answer for e in self._held_out_examples)])


__all__ = ["Board", "GridTask", "Play", "Puzzle", "State", "draw_puzzle", "parse", "play", "read_moves",
           "shortest_solution"]  # fmt: skip
