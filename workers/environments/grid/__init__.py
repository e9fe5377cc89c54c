"""A Sokoban-like board: the policy writes moves (U D L R) a turn, a newline ends it, and reads the new board back.

For the `grid` task. The environment plays a turn's moves in order: a move into a wall, or one that pushes a box into
a wall or another box, is not made, the rest of the turn is dropped, and the observation says so above the board; a
turn that holds no move is not well formed (its observation asks for U D L R). The episode ends solved (reward 1)
once every box is on a target, unsolved when a box off target is pushed into a corner (it can never move again), or
after `max_turns` turns. Shaped reward parts after gym-sokoban's (the Boxoban rules; RAGEN's Sokoban agent is
built on it: +1 a box placed, -1 a box taken off, -0.1 a move, +10 solved), divided by 10 so that solving is 1, the
move penalty off unless asked for. The state key after a turn is the player's and the boxes' cells, so turns of a
group taken from the same board are in one anchor state (GiGPO).
"""

from __future__ import annotations

from pydantic import Field

from workers.environments.knobs import EpisodeKnobs
from workers.registry import Component


class GridKnobs(EpisodeKnobs):
    box_reward: float = Field(
        0.1,
        ge=0,
        le=1,
        description="Reward part for each box a turn pushes onto a target, and minus as much for each it pushes off.",
    )
    step_penalty: float = Field(
        0.0,
        ge=0,
        le=1,
        description="Reward taken off for each move a turn tries (made or refused; a turn without a move counts as "
        "one, as gym-sokoban charges its no-op). Off by default: GRPO's std normalisation makes a hundredth a whole "
        "unit of advantage in a group that all fails, which teaches doing less (docs/environments/grid.md).",
    )
    end_at_deadlock: bool = Field(
        True,
        description="End the episode, unsolved, when a box off target is pushed into a corner (it can never be "
        "solved from there); off: play on until max_turns.",
    )
    demonstrated_turns: float = Field(
        0.5,
        ge=0,
        le=1,
        description="The tiny model's warm-up: the share of its puzzles shown as an episode of several turns (a "
        "shortest solution cut into 2 to max_turns turns, the board after each); the others are solved in one turn. "
        "Pretrained models are not warmed up.",
    )


def check(cfg) -> None:
    if cfg.task.name != "grid":
        raise ValueError("environment.name: grid plays the grid task's puzzles; set task.name to grid")


COMPONENT = Component("grid", "component:Grid", knobs=GridKnobs, check=check)
