"""PPO-EWMA: the proximal policy of the decoupled objective as an average of the policy's recent weights.

Declared, with its knobs, in this folder's __init__.py ("ewma-proximal"); preset `ppo-ewma` (docs/methods/ppo-ewma.md).
"""

from __future__ import annotations

import copy

import torch

from workers.pipeline.objective.base import decoupled_weights
from workers.pipeline.objective.ewma_proximal import EwmaProximalKnobs
from workers.pipeline.objective.token_clip.component import TokenClip
from workers.pipeline.stages import LossInputs


class EwmaWeights:
    """An exponentially weighted moving average of a network's weights, bias-corrected (Hilton et al. 2021, sec. 4).

    Starts as the network (weight 1); each `advance` gives the network's present weights the weight
    1 / (decay * total + 1) and the average the rest, so that after k steps the average is the EWMA of the
    weights seen, normalised as if it had always held them (no pull towards the first). Only floating-point
    tensors are averaged; the others (integer buffers) follow the network. The average lives in a network of its
    own, built from the policy's the first time it is asked for; a checkpoint keeps the tensors, not the module.
    """

    def __init__(self, decay: float):
        self.decay, self.total = decay, 0.0
        self.average: torch.nn.Module | None = None
        self.pending: dict[str, torch.Tensor] | None = None  # a restored average, loaded when the network is built

    def network(self, current: torch.nn.Module) -> torch.nn.Module:
        if self.average is None:
            self.average = copy.deepcopy(current).eval()
            for p in self.average.parameters():
                p.requires_grad_(False)
            if self.pending is not None:
                self.average.load_state_dict(self.pending)
                self.pending = None
            else:
                self.total = 1.0
        return self.average

    @torch.no_grad()
    def advance(self, current: torch.nn.Module) -> None:
        average = self.network(current).state_dict()
        total = self.decay * self.total + 1.0
        keep = self.decay * self.total / total  # the average's share; the present weights get 1 / total
        for name, value in current.state_dict().items():
            if value.is_floating_point():
                average[name].mul_(keep).add_(value, alpha=1.0 / total)
            else:
                average[name].copy_(value)
        self.total = total

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        if self.average is not None:
            state["pending"] = {k: v.detach().cpu().clone() for k, v in self.average.state_dict().items()}
        state["average"] = None
        return state


class EwmaProximal(TokenClip):
    """The decoupled token clip with an EWMA of the policy's weights as the proximal policy (PPO-EWMA).

    *Missing Old Logits in Asynchronous Agentic RL* (Guan et al. 2026): in an asynchronous pipeline the
    trainer-side log-probabilities of the policy that sampled a row (its "old logits") are lost; taking the
    learner's present policy as pi_old instead hides the row's staleness from the clip and lumps it into the
    importance weight. Of the approximate repairs it studies, it adopts a revised PPO-EWMA (Hilton et al. 2021,
    *Batch size-invariance for policy optimization*): the proximal policy pi_prox is an exponentially weighted
    moving average of the policy's recent weights, which lags the policy as the lost old policy did. The clip
    is on pi / pi_prox, every row's tokens are weighted by min(pi_prox / pi_behaviour, C), and the average
    follows the policy after each optimizer step (EwmaWeights). pi_prox costs one forward of the average per
    minibatch and one copy of the weights.
    Shapes: logprobs, old_logprobs (pi_prox), sampler_logprobs (B, T). Knobs: objective.ewma_decay,
    objective.behaviour_is_bound (C, here for every row), and the token clip's.
    """

    Knobs = EwmaProximalKnobs

    def __init__(self, cfg):
        super().__init__(cfg)
        self.proximal = EwmaWeights(cfg.objective.ewma_decay)

    def behaviour_weights(self, x: LossInputs) -> tuple[torch.Tensor | None, dict[str, float]]:
        """Every row's tokens, fresh or not: pi_prox is the average, never the policy that sampled them."""
        return decoupled_weights(x, self.log_behaviour_bound, torch.ones_like(x.stale))
