"""The sample inspector: a bounded sample of each step's completions, whole groups, as the run page shows them.

    inspector = Inspector(samples_per_step=8, forwards=forwards, policy=policy)
    described, entropies = inspector.inspect(trained, generated, dropped)  # before the update
    learner.update(trained, step, entropies)                                # the update's forwards fill them in
    entropies.fill()

Each stored sample carries what every stage did to it, its tokens, the sampling policy's log-probability
of each and each token's entropy under the learner's policy before the update. The entropies are an
observer of the learner's forwards (UpdateEntropies): the rows the update runs a forward over anyway
cost nothing more.
"""

from __future__ import annotations

import torch

from workers.pipeline.batch import RolloutBatch
from workers.training.forwards import Forwards, token_entropy

# decimals of the per-token log-probabilities and entropies stored with each sample
SAMPLE_DIGITS = 4


def whole_groups(batch: RolloutBatch, groups, budget: int) -> list[int]:
    """The rows of `groups`, whole groups in order, while they fit in `budget` rows (the first one cut to fit)."""
    rows: list[int] = []
    for g in groups:
        members = batch.rows_of([g])
        if rows and len(rows) + len(members) > budget:
            break
        rows += members[: budget - len(rows)]
        if len(rows) >= budget:
            break
    return rows


def rounded(values: torch.Tensor) -> list[float]:
    """Per-token values as stored with a sample (log-probabilities, entropies)."""
    return [round(v, SAMPLE_DIGITS) for v in values.tolist()]


class UpdateEntropies:
    """Per-token entropies (nats) of stored samples under the policy before the update, read off the update's
    forwards where it runs them anyway (Learner.update says which).

    Only rows the update sees as they were sampled may be asked for: in the loss, every token attended
    (Inspector.inspect). A forward records the rows it holds that it wants and has not recorded yet.
    """

    def __init__(self, samples: dict[int, dict]):
        self.samples = samples  # row of the trained batch -> its sample (Inspector.describe_sample), to fill in
        self.wanted: dict[int, int] = {}  # row of the update's inputs -> row of the batch (set by Learner.update)
        self.found: dict[int, torch.Tensor] = {}  # row of the batch -> (T,) entropies

    def locate(self, rows: torch.Tensor) -> None:
        """`rows` (B,): the batch row that each row of the update's inputs holds."""
        self.wanted = {i: row for i, row in enumerate(rows.tolist()) if row in self.samples}

    @torch.no_grad()
    def take(self, chunk: torch.Tensor | None, logp_all: torch.Tensor, entropy: torch.Tensor | None) -> None:
        """Record the wanted rows, not recorded yet, of one forward over `chunk` (rows of the update's inputs; None:
        all of them): `logp_all` (B, T, V) its log-probabilities, `entropy` (B, T) if the forward computed it."""
        rows = range(len(logp_all)) if chunk is None else chunk.tolist()
        new = [(i, self.wanted[r]) for i, r in enumerate(rows) if r in self.wanted and self.wanted[r] not in self.found]
        if not new:
            return
        at = torch.tensor([i for i, _ in new], device=logp_all.device)
        values = entropy.detach()[at] if entropy is not None else token_entropy(logp_all[at])  # (R, T)
        self.found.update(zip((row for _, row in new), values.cpu()))

    def fill(self) -> None:
        """Each sample's "entropies", once the update ran: one per completion token, rounded for storage."""
        for row, sample in self.samples.items():
            sample["entropies"] = rounded(self.found[row][: sample["length"]])


class Inspector:
    def __init__(self, samples_per_step: int, forwards: Forwards, policy):
        self.budget = samples_per_step  # schedule.samples_per_step: rows stored per step
        self.forwards, self.policy = forwards, policy

    def pick(self, trained: RolloutBatch, generated: RolloutBatch, dropped: list[int]) -> list[dict]:
        """A bounded sample of this step's completions, whole groups, each sample with what every stage did to it.

        Whole groups, so the inspector shows a prompt's completions side by side: trained groups first, and up to
        a quarter of the budget for the groups of `generated` that the filter dropped (`dropped`). A group larger
        than the budget is cut short.
        """
        return self.describe(trained, generated, *self.rows(trained, generated, dropped))

    def rows(self, trained: RolloutBatch, generated: RolloutBatch, dropped: list[int]) -> tuple[list[int], list[int]]:
        """The rows `pick` stores: of `trained`, and of the groups of `generated` that the filter dropped."""
        dropped_rows = whole_groups(generated, dropped, self.budget // 4 if trained.num_samples else self.budget)
        return whole_groups(trained, range(trained.num_groups), self.budget - len(dropped_rows)), dropped_rows

    def describe(
        self, trained: RolloutBatch, generated: RolloutBatch, trained_rows: list[int], dropped_rows: list[int]
    ) -> list[dict]:
        advantages = trained.sample_advantages() if trained.advantages is not None else None
        # groups numbered in the order shown: the trained ones, then the dropped ones
        number = {g: i for i, g in enumerate(dict.fromkeys(trained.group_index[trained_rows].tolist()))}
        described = [self.describe_sample(trained, r, advantages, number[int(trained.group_index[r])])
                     for r in trained_rows]  # fmt: skip
        number = {g: len(number) + i for i, g in enumerate(dict.fromkeys(generated.group_index[dropped_rows].tolist()))}
        described += [
            self.describe_sample(generated, r, None, number[int(generated.group_index[r])]) for r in dropped_rows
        ]
        return described

    def inspect(
        self, trained: RolloutBatch, generated: RolloutBatch, dropped: list[int]
    ) -> tuple[list[dict], UpdateEntropies]:
        """`pick`'s samples, before the update, with each token's entropy under the learner's policy, taken so
        that no forward runs for the rows that the update runs one over anyway.

        Those rows (in the loss, no token masked out of their attention) get their entropies from the update's own
        forwards: the UpdateEntropies returned, passed to Learner.update, fills them in. The others (dropped
        groups; rows out of the loss or with tokens masked) get theirs now, from a forward of their own. Either
        way, under the policy before the update: the one that sampled them, unless the asynchronous trainer
        sampled with an older one.
        """
        trained_rows, dropped_rows = self.rows(trained, generated, dropped)
        described = self.describe(trained, generated, trained_rows, dropped_rows)
        samples = dict(zip(trained_rows, described))
        in_update = {r: s for r, s in samples.items() if trained.token_mask is None and bool(trained.in_loss[r])}
        own = [r for r in trained_rows if r not in in_update]
        for sample, entropies in zip([samples[r] for r in own], self.sample_entropies(trained, own)):
            sample["entropies"] = entropies
        for sample, entropies in zip(described[len(trained_rows) :], self.sample_entropies(generated, dropped_rows)):
            sample["entropies"] = entropies
        return described, UpdateEntropies(in_update)

    @staticmethod
    def group_outcomes(generated: RolloutBatch, dropped: list[int]) -> list[dict]:
        """Every group sampled this step, kept or dropped (`dropped`: by the filter): its prompt, how many of its
        samples were correct, the spread of its rewards and its completions' lengths (the run page's per-prompt
        and per-step views)."""
        rewards, lengths = generated.rewards.tolist(), generated.lengths.tolist()
        correct, dropped = generated.correct.tolist(), set(dropped)
        outcomes = []
        for g, example in enumerate(generated.examples):
            rows = generated.rows_of([g])
            outcomes.append(
                {
                    "prompt": example.prompt,
                    "answer": example.answer,
                    "size": len(rows),
                    "correct": sum(bool(correct[r]) for r in rows),
                    "reward_min": min(rewards[r] for r in rows),
                    "reward_max": max(rewards[r] for r in rows),
                    "lengths": [int(lengths[r]) for r in rows],
                    "kept": g not in dropped,
                }
            )
        return outcomes

    @torch.no_grad()
    def sample_entropies(self, batch: RolloutBatch, rows: list[int]) -> list[list[float]]:
        """Each row's per-token entropy (nats) of the learner's present policy, rounded for storage."""
        if not rows:
            return []
        index = torch.tensor(rows)
        mask = batch.mask[index.to(batch.mask.device)].to(self.forwards.device)
        inputs = self.forwards.inputs(batch, index, mask)
        _, entropy = self.forwards.logprobs(self.policy.model, inputs, with_entropy=True)
        lengths = mask.sum(-1).long().tolist()
        return [rounded(entropy[i, :n]) for i, n in enumerate(lengths)]

    def describe_sample(self, batch: RolloutBatch, row: int, advantages: torch.Tensor | None, group: int) -> dict:
        """One sample for the inspector; `advantages` (N,) per sample, None for groups never trained on.

        `group` numbers the step's stored groups (a group's samples share it, whatever their prompts look like);
        `tokens` and `logprobs` are the completion's tokens and the sampling policy's log-probability of each."""
        example = batch.example_of(row)
        used = advantages is not None and bool(batch.in_loss[row])
        length = int(batch.mask[row].sum())
        ids = batch.tokens[row, :length].tolist()
        rendered = self.policy.render_prompt(example.prompt)
        return {
            "prompt": example.prompt,
            # the text the model read, when it is not the bare question (a chat template, a system message)
            **({"rendered_prompt": rendered} if rendered != example.prompt else {}),
            "answer": example.answer,
            "completion": batch.texts[row],
            "group": group,
            "reward": float(batch.rewards[row]),
            "rewards": {name: float(v[row]) for name, v in batch.reward_parts.items()},
            "correct": bool(batch.correct[row]),
            "advantage": float(advantages[row]) if used else None,
            "length": length,
            "truncated": bool(batch.truncated[row]),
            "stages": dict(batch.notes[row]),
            "tokens": [self.policy.tokenizer.decode([i]) for i in ids],
            "logprobs": rounded(batch.logprobs[row, :length]),
            **({"turns": self.episode_turns(batch, row, used)} if batch.episodes is not None else {}),
        }

    @staticmethod
    def episode_turns(batch: RolloutBatch, row: int, used: bool) -> list[dict]:
        """A multi-turn sample's turns for the inspector: where each turn's tokens and the observation after it are
        in `tokens` ([start, end) the policy's, [end, observation_end) the environment's), its reward part, the
        state it left, the action the environment read, its advantage (the mean over the turn's tokens in the loss;
        None when the sample was not trained on) and how many of its tokens were in the loss."""
        in_loss = batch.trained_tokens()[row] > 0  # (T,)
        if batch.token_mask is not None:
            in_loss = in_loss & batch.token_mask[row].to(in_loss.device)
        in_loss = in_loss & used
        per_token = batch.advantages is not None and batch.advantages.dim() == 2
        turns = []
        for t in batch.episodes[row].turns:
            trained = in_loss[t.start : t.end]
            advantage = None
            if used and per_token and trained.any():
                advantage = float(batch.advantages[row, t.start : t.end][trained.to(batch.advantages.device)].mean())
            elif used and not per_token:
                advantage = float(batch.advantages[row])
            turns.append({"start": t.start, "end": t.end, "observation_end": t.observation_end, "reward": t.reward,
                          "state": t.state, "well_formed": t.well_formed, "action": getattr(t, "action", ""),
                          "advantage": advantage, "trained": int(trained.sum())})  # fmt: skip
        return turns
