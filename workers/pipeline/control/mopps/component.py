"""`mopps`: pick the prompts whose predicted pass rate is nearest a target, from a Beta posterior per prompt.

Model Predictive Prompt Selection (Qu et al. 2025, "Can Prompt Difficulty be Online
Predicted for Accelerating RL Finetuning of Reasoning Models?", sec. 3): each prompt's
success rate is a latent Bernoulli parameter with a Beta posterior, updated after every
visit with forgetting (eq. 4-5): alpha <- decay * alpha + (1 - decay) * alpha_0 + successes,
beta likewise with failures. Each step draws `candidates_per_prompt` x B candidates, samples
one pass rate per candidate from its posterior (Thompson sampling), and rolls out the B whose
sample is nearest `target` (eq. 7): prompts predicted to be neither solved nor hopeless,
found without spending a rollout on the others.
"""

from __future__ import annotations

import numpy as np

from workers.pipeline.control.base import Controller
from workers.pipeline.control.mopps import MoPPSKnobs
from workers.pipeline.history import PromptHistory
from workers.pipeline.stages import StageContext
from workers.tasks import Example


def forgetting_posterior(history: PromptHistory, example: Example, decay: float, prior: float) -> tuple[float, float]:
    """(alpha, beta) after folding the prompt's visits in order, each shrinking the past towards the prior."""
    alpha = beta = prior
    stats = history.get(example)
    for _, right, size in stats.outcomes if stats else ():
        alpha = decay * alpha + (1 - decay) * prior + right
        beta = decay * beta + (1 - decay) * prior + (size - right)
    return alpha, beta


class ModelPredictivePromptSelection(Controller):
    """Roll out the prompts whose Thompson-sampled pass rate is nearest the target (MoPPS); no extra rollouts.

    Knobs: control.candidates_per_prompt, control.target, control.decay, control.prior.
    Reports pipeline/control/predicted_pass_rate (mean sampled rate of the chosen prompts)
    and pipeline/control/unseen_share (chosen prompts never rolled out before).
    """

    Knobs = MoPPSKnobs

    def __init__(self, cfg):
        self.candidates_per_prompt = cfg.control.candidates_per_prompt
        super().__init__(cfg)
        self.target, self.decay, self.prior = cfg.control.target, cfg.control.decay, cfg.control.prior
        self.rng = np.random.default_rng([cfg.seed, 0x6D6F7070])  # its own stream: the data order stays put
        self.last: dict[str, float] = {}

    def select(self, ctx: StageContext, candidates: list[Example], count: int) -> list[Example]:
        posteriors = np.array(
            [forgetting_posterior(ctx.history, e, self.decay, self.prior) for e in candidates]
        )  # (C, 2)
        sampled = self.rng.beta(posteriors[:, 0], posteriors[:, 1])  # (C,)
        chosen = np.argsort((sampled - self.target) ** 2, kind="stable")[:count]
        self.last = {
            "pipeline/control/predicted_pass_rate": float(sampled[chosen].mean()),
            "pipeline/control/unseen_share": float(np.mean([ctx.history.get(candidates[i]) is None for i in chosen])),
        }
        return [candidates[i] for i in chosen]

    def metrics(self) -> dict[str, float]:
        return dict(self.last)
