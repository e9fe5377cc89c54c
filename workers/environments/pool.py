"""Episodes in flight across steps: a step's batch is the first groups whose episodes are all over, the rest go on.

    pool = EpisodePool()
    pool.start(forest_groups)                     # new groups: example, prompt, turn limit, rows, the policy's version
    finished = pool.play(sampler, environment, params, wanted=32)   # after the turn at which 32 groups are over

A batch of episodes generated together is as slow as its longest episode: once the short ones are over, each further
turn is generated for the few long ones left. The pool keeps more groups in flight than a step trains on (the
generate stage's APRIL component tops it up), generates turn after turn for every episode not over, and stops after
the turn at which `wanted` groups are over. The groups still going stay in the pool with every turn they took and the
state of their episodes, and go on at their next turn, sampled by the policy of the step that continues them. So a
short episode never waits for a long one: the long one goes on while later steps train.

The unit is the group (its advantages are relative to the group) and the turn: an episode is carried over at a turn
boundary, never inside a turn. A carried group is as old as the policy that began it (PooledEpisodes.version): the
asynchronous trainer's staleness bound drops it once that is more than schedule.max_staleness versions behind the
learner. Carried groups come first, oldest first, so none waits for ever.
"""

from __future__ import annotations

from dataclasses import dataclass

from workers.environments.episodes import Episodes, Forest, Sampler, _Row, assembled
from workers.tasks import Example


@dataclass(eq=False)  # a group is itself, whatever it holds
class PooledEpisodes:
    """One group of episodes in the pool: its example and prompt, its turn limit, its rows, and who began it."""

    example: Example
    prompt_ids: list[int]
    limit: int  # tokens per turn at most (the control stage's length limit of a completion)
    size: int  # its rows
    step: int  # the step whose policy began it
    version: int  # that policy's version: its rows' first tokens were sampled by it
    rows: list[_Row] | None = None  # None until it is played
    continued: int = 0  # steps it was carried into

    def over(self, max_turns: int) -> bool:
        return self.rows is not None and not any(row.going(max_turns) for row in self.rows)


@dataclass
class Finished:
    """The groups a step trains on, their episodes (rows group by group), and what the step's generation did."""

    groups: list[PooledEpisodes]
    episodes: Episodes  # .decoded: the tokens the policy generated this step, in every group played
    turns: int  # turns generated, each a call of the backend over the episodes still going
    resumed: int  # rows that went on from a turn of an earlier step
    carried: int  # groups left in the pool


class EpisodePool:
    def __init__(self):
        self.groups: list[PooledEpisodes] = []  # oldest first

    def start(self, groups: list[PooledEpisodes]) -> None:
        self.groups += groups

    def play(self, sampler: Sampler, environment, params, wanted: int) -> Finished:
        """Every episode in the pool, turn by turn, until `wanted` groups are over (or all are); those groups out."""
        forest = Forest(sampler, environment, [], [], params, [])
        resumed = sum(row.going(environment.max_turns) for pooled in self.groups for row in pooled.rows or ())
        rows_of = [self.enter(forest, pooled) for pooled in self.groups]
        everyone = [r for rows in rows_of for r in rows]

        def enough() -> bool:
            return sum(pooled.over(environment.max_turns) for pooled in self.groups) >= wanted

        forest.advance(everyone, until=enough)
        finished = [pooled for pooled in self.groups if pooled.over(environment.max_turns)][:wanted]
        self.groups = [pooled for pooled in self.groups if pooled not in finished]
        for pooled in self.groups:
            pooled.continued += 1
        episodes = assembled(sampler, [row for pooled in finished for row in pooled.rows])
        episodes.decoded = forest.decoded  # not the returned rows' tokens: some were decoded in earlier steps
        return Finished(finished, episodes, forest.turns, resumed, len(self.groups))

    @staticmethod
    def enter(forest: Forest, pooled: PooledEpisodes) -> list[int]:
        """The group's rows in this step's Forest: its carried rows as they stopped, or new roots."""
        group = forest.add_group(pooled.example, pooled.prompt_ids, pooled.limit)
        if pooled.rows is None:
            rows = [forest.root(group) for _ in range(pooled.size)]
            pooled.rows = [forest.row(r) for r in rows]
            return rows
        return [forest.adopt(row, group) for row in pooled.rows]
