"""`treeps`: per-token process advantages from the Monte Carlo values of a rollout tree's nodes (TreePS-RAG)."""

from __future__ import annotations

from collections import defaultdict

import torch

from workers.pipeline.advantage.base import scale
from workers.pipeline.advantage.treeps import TreePSAdvantageKnobs
from workers.pipeline.batch import RolloutBatch
from workers.pipeline.stages import AdvantageOutput, AdvantageStage

ROOT = "prompt"  # the node every tree of a group hangs from: its prompt, valued at the mean of all its leaves


def node_of(row: int, k: int, turn) -> str:
    """The tree node of turn k of a row: the generator's id, or (for a turn made outside a tree) a node of its own."""
    return turn.node if turn.node is not None else f"row {row} turn {k}"


class GroupTree:
    """One group's tree, read from its rows' turns: which rows (leaves) hold each node, and each node's parent."""

    def __init__(self, batch: RolloutBatch, rows: range):
        self.leaves: dict[str, list[int]] = defaultdict(list)
        self.parent: dict[str, str] = {}
        for row in rows:
            above = ROOT
            for k, turn in enumerate(batch.episodes[row].turns):
                node = node_of(row, k, turn)
                self.leaves[node].append(row)
                self.parent[node] = above
                above = node
        self.leaves[ROOT] = list(rows)

    def values(self, rewards: torch.Tensor) -> dict[str, float]:
        """V(n): the mean outcome of the leaves below each node (the prompt's: of all the group's)."""
        return {node: float(rewards[rows].mean()) for node, rows in self.leaves.items()}

    def process_advantages(self, values: dict[str, float]) -> dict[str, float]:
        """A(n) = V(n) - V(parent of n), for every turn node."""
        return {node: values[node] - values[above] for node, above in self.parent.items()}


class TreeProcessAdvantage(AdvantageStage):
    """Each turn node n of a group's tree gets its Monte Carlo value V(n), the mean reward of the leaves (rows)
    below it, and the process advantage A(n) = V(n) - V(parent), the parent of a first turn being the prompt (the
    mean of the whole group), over the group's spread of rewards. Along any leaf's path the A(n) add up to the
    leaf's outcome advantage R - mean R; a node with one child passes its value on unchanged, so only a choice
    among siblings carries a signal. Every token of a turn gets its node's advantage; a turn shared by several
    leaves is trained in the first of their rows only (shared_tokens: once), attended in all of them.

    Shapes: rewards (N,) -> advantages (N, T), token_mask (N, T). Knobs: advantage.shared_tokens, scale, eps.
    """

    Knobs = TreePSAdvantageKnobs

    def __init__(self, cfg):
        knobs = cfg.advantage
        self.how, self.eps, self.once = knobs.scale, knobs.eps, knobs.shared_tokens == "once"

    def __call__(self, batch: RolloutBatch) -> AdvantageOutput:
        advantages = torch.zeros_like(batch.mask, dtype=torch.float32)  # (N, T)
        token_mask = torch.ones_like(batch.mask, dtype=torch.bool) if self.once else None  # (N, T)
        rewards = batch.rewards.float().cpu()  # (N,)
        nodes, shared, signalled = 0, 0, 0
        for g in range(batch.num_groups):
            rows = range(batch.offsets[g], batch.offsets[g + 1])
            tree = GroupTree(batch, rows)
            process = self.normalized(tree.process_advantages(tree.values(rewards)), rewards[list(rows)])
            for row in rows:
                for k, turn in enumerate(batch.episodes[row].turns):
                    node = node_of(row, k, turn)
                    advantages[row, turn.start : turn.end] = process[node]
                    if token_mask is not None and tree.leaves[node][0] != row:
                        token_mask[row, turn.start : turn.end] = False  # its first leaf trains it
            nodes += len(process)
            shared += sum(len(tree.leaves[node]) > 1 for node in process)
            signalled += sum(abs(a) > 1e-6 for a in process.values())
        stats = {
            "pipeline/advantage/nodes_per_group": nodes / max(batch.num_groups, 1),
            "pipeline/advantage/shared_turns": shared / max(nodes, 1),
            "pipeline/advantage/turns_with_signal": signalled / max(nodes, 1),
        }
        in_loss = torch.ones(batch.num_samples, dtype=torch.bool)
        return AdvantageOutput(advantages, in_loss, stats, token_mask=token_mask)

    def normalized(self, process: dict[str, float], rewards: torch.Tensor) -> dict[str, float]:
        """The process advantages over the spread of the group's rewards (`scale`); a group of one has none."""
        if len(rewards) < 2 or not process:
            return dict.fromkeys(process, 0.0)
        centered = torch.tensor([list(process.values())])  # (1, nodes)
        return dict(zip(process, scale(centered, rewards[None, :], self.how, self.eps)[0].tolist()))
