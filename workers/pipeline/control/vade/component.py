"""`vade`: Thompson-sample each candidate's correctness from a Beta posterior that ages on two scales.

VADE (Variance-Aware Dynamic sampling via online sample-level difficulty Estimation, 2025):
each training sample (here, a prompt) has a Beta posterior of the probability that a rollout of
it is correct. Before a step, every candidate's probability is Thompson-sampled from its
posterior and the B candidates with the largest sampled reward variance p(1 - p) are rolled out:
the groups expected to carry the most signal, chosen without spending a rollout on the others.

The posterior is kept honest as the policy moves by decaying it towards the prior on two
scales (the paper's two-scale prior decay, as read here):

- per step (slow, `step_decay`): evidence ages with the policy, whether or not the prompt is
  seen, so a prompt last visited long ago returns towards the prior and is explored again;
- per visit (fast, `visit_decay`): when new outcomes of the prompt arrive, its earlier evidence
  is shrunk once more, so the newest group dominates a prompt that is revisited often.
"""

from __future__ import annotations

import numpy as np

from workers.pipeline.control.base import Controller
from workers.pipeline.control.vade import VADEKnobs
from workers.pipeline.history import PromptHistory
from workers.pipeline.stages import StageContext
from workers.tasks import Example


def two_scale_posterior(
    history: PromptHistory, example: Example, step: int, step_decay: float, visit_decay: float, prior: float
) -> tuple[float, float]:
    """(alpha, beta) of the prompt at `step`: its visits folded in order, the evidence above the prior
    shrunk by visit_decay at each new visit and by step_decay for every step between observations."""
    stats = history.get(example)
    if stats is None:
        return prior, prior
    right_mass = wrong_mass = 0.0  # evidence beyond the prior
    last = None
    for visit_step, right, size in stats.outcomes:
        if last is not None:
            kept = visit_decay * step_decay ** (visit_step - last)
            right_mass, wrong_mass = kept * right_mass, kept * wrong_mass
        right_mass, wrong_mass, last = right_mass + right, wrong_mass + (size - right), visit_step
    aged = step_decay ** max(0, step - last)
    return prior + aged * right_mass, prior + aged * wrong_mass


class VarianceAwareDynamicSampling(Controller):
    """Roll out the prompts with the largest Thompson-sampled variance p(1-p), from a two-scale decayed Beta (VADE).

    Knobs: control.candidates_per_prompt, control.step_decay, control.visit_decay, control.prior.
    Reports pipeline/control/sampled_variance (mean p(1-p) of the chosen), pipeline/control/unseen_share,
    pipeline/control/posterior_mean (mean posterior pass rate of the chosen).
    """

    Knobs = VADEKnobs

    def __init__(self, cfg):
        self.candidates_per_prompt = cfg.control.candidates_per_prompt
        super().__init__(cfg)
        c = cfg.control
        self.step_decay, self.visit_decay, self.prior = c.step_decay, c.visit_decay, c.prior
        self.rng = np.random.default_rng([cfg.seed, 0x76616465])  # its own stream: the data order stays put
        self.last: dict[str, float] = {}

    def posteriors(self, ctx: StageContext, candidates: list[Example]) -> np.ndarray:
        """(C, 2): alpha, beta of each candidate at this step."""
        return np.array(
            [
                two_scale_posterior(ctx.history, e, ctx.step, self.step_decay, self.visit_decay, self.prior)
                for e in candidates
            ]
        )

    def select(self, ctx: StageContext, candidates: list[Example], count: int) -> list[Example]:
        posteriors = self.posteriors(ctx, candidates)
        sampled = self.rng.beta(posteriors[:, 0], posteriors[:, 1])  # (C,)
        variance = sampled * (1 - sampled)
        chosen = np.argsort(-variance, kind="stable")[:count]
        self.last = {
            "pipeline/control/sampled_variance": float(variance[chosen].mean()),
            "pipeline/control/posterior_mean": float((posteriors[chosen, 0] / posteriors[chosen].sum(-1)).mean()),
            "pipeline/control/unseen_share": float(np.mean([ctx.history.get(candidates[i]) is None for i in chosen])),
        }
        return [candidates[i] for i in chosen]

    def metrics(self) -> dict[str, float]:
        return dict(self.last)
