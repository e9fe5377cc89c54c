"""The grid's code: an episode that plays each turn's moves on the board, and the tiny model's demonstrations."""

from __future__ import annotations

import numpy as np

from workers.environments.base import Turn
from workers.tasks import Example
from workers.tasks.grid import Board, State, parse, play, read_moves

NO_MOVE = "no move read: write the moves as letters U D L R, e.g. RRD"


class Grid:
    # a turn is a line of moves: three characters for the tiny model ("RR\n", where a tag would take fifteen, and
    # every observation is a whole board), the same text as the single-turn answer, so the task's one instruction
    # serves both; a chat model's turn also ends at its end-of-turn token
    stop_strings = ("\n",)

    def __init__(self, knobs, task):
        self.max_turns, self.max_episode_tokens = knobs.max_turns, knobs.max_episode_tokens
        self.box_reward, self.step_penalty = knobs.box_reward, knobs.step_penalty
        self.end_at_deadlock, self.demonstrated_turns = knobs.end_at_deadlock, knobs.demonstrated_turns

    def reset(self, example: Example, rng: np.random.Generator) -> GridEpisode:
        return GridEpisode(self, example)

    def demonstrations(self, pairs: list[tuple[str, str]], rng: np.random.Generator) -> list[tuple[str, str]]:
        """The tiny model's warm-up pairs (a board, a shortest solution), a share of them played as episodes: the
        solution cut into turns, each but the last followed by its newline and the board it leaves. The others stay
        one turn, the whole solution, ended by the end-of-turn token."""
        shown = []
        for prompt, moves in pairs:
            if rng.random() < self.demonstrated_turns and read_moves(moves) is not None:
                moves = self.played_in_turns(prompt, cut_into_turns(moves, self.max_turns, rng))
            shown.append((prompt, moves))
        return shown

    def played_in_turns(self, prompt: str, turns: list[str]) -> str:
        """The episode's text after the prompt, with the observations the environment really answers."""
        episode, text = GridEpisode(self, Example(prompt=prompt, answer="")), ""
        for turn in turns[:-1]:
            answer = episode.step(turn + "\n")
            if answer.done:  # not a shortest solution after all: it solved or stuck the board early
                return "".join(turns)
            text += turn + "\n" + answer.observation
        return text + turns[-1]


def cut_into_turns(moves: str, max_turns: int, rng: np.random.Generator) -> list[str]:
    """The moves cut at random places into 2 to max_turns turns of at least one move (one turn if that cannot be)."""
    most = min(max_turns, len(moves))
    if most < 2:
        return [moves]
    count = int(rng.integers(2, most + 1))
    cuts = sorted(int(c) for c in rng.choice(np.arange(1, len(moves)), count - 1, replace=False))
    return [moves[a:b] for a, b in zip([0, *cuts], [*cuts, len(moves)])]


class GridEpisode:
    def __init__(self, environment: Grid, example: Example):
        self.environment = environment
        self.board, self.state = parse(example.prompt)
        self.opening, self.start_state = example.prompt, self.board.key(self.state)
        self.turns = 0

    def step(self, turn: str) -> Turn:
        self.turns += 1
        last = self.turns >= self.environment.max_turns
        moves = read_moves(turn)
        if moves is None:  # charged as one move tried, so that writing no move is never cheaper than moving
            return self.answer(NO_MOVE, -self.environment.step_penalty, last, well_formed=False)
        placed = boxes_placed(self.board, self.state)
        result = play(self.board, self.state, moves)
        self.state = result.state
        reward = self.environment.box_reward * (boxes_placed(self.board, self.state) - placed)
        reward -= self.environment.step_penalty * result.tried
        if result.solved:
            return Turn("", reward + 1.0, True, self.board.key(self.state), True, True, moves)
        stuck = self.environment.end_at_deadlock and self.board.dead(self.state)
        return self.answer(result.refused, reward, last or stuck, action=moves)

    def answer(self, note: str | None, reward: float, done: bool, well_formed: bool = True, action: str = "") -> Turn:
        """The board after the turn (under what went wrong, if anything), unless the episode is over; the action is
        the moves read."""
        observation = "" if done else (f"{note}\n" if note else "") + self.board.text(self.state)
        return Turn(observation, reward, done, self.board.key(self.state), well_formed, action=action)


def boxes_placed(board: Board, state: State) -> int:
    return (state.boxes & board.targets).bit_count()
