"""`salt`: GRPO's advantages refined on each group's trajectory graph: a step shared by several episodes gets the
mean of their advantages (Li et al. 2025)."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from workers.pipeline.advantage.salt import SALTKnobs
from workers.pipeline.advantage.turns import Turn, anchor_states, episode_advantages, per_token
from workers.pipeline.batch import RolloutBatch
from workers.pipeline.stages import AdvantageOutput, AdvantageStage

# (state before the turn, the turn's tokens (empty when edges are told by their states alone), state after it)
Edge = tuple[str, tuple[int, ...], str]


@dataclass
class TrajectoryGraph:
    """One group's graph: the states its episodes went through (nodes, in the order first reached) and the steps
    they took (edges), each with the rows (episodes) that took it, in the order of the batch, each row once."""

    nodes: list[str] = field(default_factory=list)
    edges: dict[Edge, list[int]] = field(default_factory=dict)
    turns: dict[Turn, Edge] = field(default_factory=dict)  # the edge each turn of the group took

    def add(self, row: int, k: int, edge: Edge) -> None:
        for state in (edge[0], edge[2]):
            if state not in self.nodes:
                self.nodes.append(state)
        rows = self.edges.setdefault(edge, [])
        if row not in rows:  # an episode that takes a step twice counts once in its mean
            rows.append(row)
        self.turns[(row, k)] = edge


class TrajectoryGraphAdvantage(AdvantageStage):
    """A_i: GRPO's advantage of episode i's reward over its group. For each group, its trajectory graph: nodes the
    environment's state keys, an edge per distinct step (the state before a turn, what the turn wrote, the state
    after it). Turn t of episode i, on edge e, gets A(i, t) = the mean of A_j over the episodes j of the group that
    took e: a step every episode took (a neutral one) averages to the group's mean, 0; a step only one episode took
    (a decisive one) keeps that episode's A_i, so a group whose episodes share no step gets GRPO's advantages. Every
    token of a turn gets the turn's advantage; observation tokens get 0 (they are not trained).

    Shapes: rewards (N,) -> advantages (N, T). Knobs: advantage.edge, scale, eps (GRPO's normalisation).
    """

    Knobs = SALTKnobs

    def __init__(self, cfg):
        knobs = cfg.advantage
        self.how, self.eps, self.edge = knobs.scale, knobs.eps, knobs.edge

    def __call__(self, batch: RolloutBatch) -> AdvantageOutput:
        episode = episode_advantages(batch, self.how, self.eps)  # (N,)
        step: dict[Turn, float] = {}
        graphs = [self.graph(batch, group) for group in range(batch.num_groups)]
        for graph in graphs:
            mean = {edge: float(episode[rows].mean()) for edge, rows in graph.edges.items()}
            step.update({turn: mean[edge] for turn, edge in graph.turns.items()})
        advantages = per_token(batch, lambda turn: step[turn])  # (N, T)
        return AdvantageOutput(advantages, torch.ones(batch.num_samples, dtype=torch.bool), self.stats(graphs))

    def graph(self, batch: RolloutBatch, group: int) -> TrajectoryGraph:
        """The trajectory graph of a group's episodes."""
        graph = TrajectoryGraph()
        for row in range(batch.offsets[group], batch.offsets[group + 1]):
            record = batch.episodes[row]
            for k, (before, turn) in enumerate(zip(anchor_states(record), record.turns)):
                written = tuple(batch.tokens[row, turn.start : turn.end].tolist()) if self.edge == "transition" else ()
                graph.add(row, k, (before, written, turn.state))
        return graph

    @staticmethod
    def stats(graphs: list[TrajectoryGraph]) -> dict[str, float]:
        turns = sum(len(graph.turns) for graph in graphs)
        shared = sum(len(graph.edges[edge]) > 1 for graph in graphs for edge in graph.turns.values())
        return {
            "pipeline/advantage/graph_edges": sum(len(graph.edges) for graph in graphs) / max(len(graphs), 1),
            "pipeline/advantage/turns_on_shared_edges": shared / max(turns, 1),
        }
