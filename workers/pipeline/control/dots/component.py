"""`dots`: pick prompts of moderate adaptive difficulty, estimated by attention over a measured reference set.

DOTS (Difficulty-targeted Online daTa Selection; "Improving Data Efficiency for LLM Reinforcement
Fine-tuning Through Difficulty-targeted Online Data Selection and Rollout Replay", 2025, the seed
list). A prompt's *adaptive difficulty* is its failure rate under the current policy. Measuring
it for every candidate would cost the rollouts it is meant to save, so it is measured only for a
small reference set, and estimated for every other candidate by attention over that set:

    d(c) = sum_r softmax_r(cos(e_c, e_r) / temperature) * d(r)

with e the prompt's embedding. The step then trains on the candidates whose estimate is nearest
`target` (moderate difficulty: the groups most likely to carry a gradient).

Here the reference set is the prompts the previous step rolled out: their failure rates were
just measured by a policy one update old, at no extra cost. The embedding is the policy's own
last hidden state, mean-pooled over the prompt's tokens (no extra model to load; the paper uses a
small frozen encoder, which a reader can swap in by overriding `embed`).
"""

from __future__ import annotations

import numpy as np
import torch

from workers.pipeline.batch import RolloutBatch
from workers.pipeline.control.base import Controller
from workers.pipeline.control.dots import DOTSKnobs
from workers.pipeline.stages import StageContext
from workers.tasks import Example


def attention_estimate(
    candidates: torch.Tensor, references: torch.Tensor, difficulty: torch.Tensor, temperature: float
) -> torch.Tensor:
    """(C,) difficulty of each candidate: the reference difficulties (R,) weighted by softmax(cos / temperature).

    Shapes: candidates (C, H), references (R, H)."""
    a = torch.nn.functional.normalize(candidates.float(), dim=-1)
    b = torch.nn.functional.normalize(references.float(), dim=-1)
    weights = torch.softmax(a @ b.T / temperature, dim=-1)  # (C, R)
    return weights @ difficulty.float()


class DifficultyTargetedSelection(Controller):
    """Train on the prompts whose adaptive difficulty, estimated by attention over measured ones, is nearest 0.5 (DOTS).

    Knobs: control.candidates_per_prompt, control.target, control.temperature. Reports
    pipeline/control/estimated_difficulty (mean over the chosen) and pipeline/control/estimate_error
    (mean |estimate - measured| of last step's chosen prompts, once they are rolled out).
    """

    Knobs = DOTSKnobs

    def __init__(self, cfg):
        self.candidates_per_prompt = cfg.control.candidates_per_prompt
        super().__init__(cfg)
        self.target, self.temperature = cfg.control.target, cfg.control.temperature
        self.references: torch.Tensor | None = None  # (R, H) embeddings of last step's prompts
        self.reference_difficulty: torch.Tensor | None = None  # (R,) their measured failure rates
        self.estimates: dict[str, float] = {}  # prompt -> the difficulty estimated when it was chosen
        self.chosen_embeddings: dict[str, torch.Tensor] = {}
        self.last: dict[str, float] = {}

    @torch.no_grad()
    def embed(self, ctx: StageContext, examples: list[Example]) -> torch.Tensor:
        """(C, H): the policy's last hidden state, mean-pooled over each prompt's tokens."""
        policy = ctx.policy
        ids = [policy.encode_prompt(e.prompt) for e in examples]
        width = max(len(p) for p in ids)
        input_ids = torch.full((len(ids), width), policy.pad_id, dtype=torch.long)
        attention = torch.zeros((len(ids), width), dtype=torch.long)
        for i, p in enumerate(ids):
            input_ids[i, : len(p)], attention[i, : len(p)] = torch.tensor(p), 1
        was_training = policy.model.training
        policy.model.eval()
        with policy.computing():
            out = policy.model(
                input_ids=input_ids.to(policy.device),
                attention_mask=attention.to(policy.device),
                output_hidden_states=True,
            )
        policy.model.train(was_training)
        hidden, mask = out.hidden_states[-1].float(), attention.to(policy.device)[..., None].float()
        return ((hidden * mask).sum(1) / mask.sum(1)).cpu()

    def select(self, ctx: StageContext, candidates: list[Example], count: int) -> list[Example]:
        embeddings = self.embed(ctx, candidates)
        if self.references is None:  # nothing measured yet: the stream's order
            chosen = list(range(min(count, len(candidates))))
            estimate = torch.full((len(candidates),), float("nan"))
        else:
            estimate = attention_estimate(embeddings, self.references, self.reference_difficulty, self.temperature)
            chosen = np.argsort((estimate - self.target).abs().numpy(), kind="stable")[:count].tolist()
        for i in chosen:
            self.estimates[candidates[i].prompt] = float(estimate[i])
            self.chosen_embeddings[candidates[i].prompt] = embeddings[i]
        if self.references is not None:
            self.last["pipeline/control/estimated_difficulty"] = float(estimate[chosen].mean())
        return [candidates[i] for i in chosen]

    def observe(self, batch: RolloutBatch) -> None:
        """The step's prompts, now measured, become the next step's reference set."""
        failure = 1 - batch.group_reduce(batch.correct.float(), "mean").cpu()  # (P,)
        known = [g for g, e in enumerate(batch.examples) if e.prompt in self.chosen_embeddings]
        if known:
            self.references = torch.stack([self.chosen_embeddings[batch.examples[g].prompt] for g in known])
            self.reference_difficulty = failure[known]
        errors = [
            abs(self.estimates[e.prompt] - float(failure[g]))
            for g, e in enumerate(batch.examples)
            if not np.isnan(self.estimates.get(e.prompt, float("nan")))
        ]
        if errors:
            self.last["pipeline/control/estimate_error"] = float(np.mean(errors))
        self.estimates, self.chosen_embeddings = {}, {}

    def metrics(self) -> dict[str, float]:
        return dict(self.last)
