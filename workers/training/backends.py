"""Where a run samples: its own rollout backend, the sampler of the synchronous loop, the asynchronous loop's copy.

backends = Backends(cfg, policy, samplers=None)
backends.sampler        # samples the synchronous loop's rollouts (made on first use)
backends.sync()         # after an update: the samplers of the learner's policy take its new weights
backends.evaluator()    # where evaluation samples, holding the learner's weights
"""

from __future__ import annotations

from workers.rollout import build_backend


class Backends:
    def __init__(self, cfg, policy, samplers=None):
        """samplers: where training rollouts are sampled, a function of the policy to sample from that returns its
        RolloutBackend (training/distributed.py's rollout actors); None: this process, through the run's backend."""
        self.cfg, self.policy, self.samplers = cfg, policy, samplers
        # this process's backend, which evaluates and samples; none where `samplers` (rollout actors) do both, so
        # that a learner on Ray starts no inference engine of its own
        self.own = build_backend(cfg.rollout.backend, policy) if samplers is None else None
        self._sampler = None
        self.rollout_copy = None  # the asynchronous loop's rollout copy's sampler (use_rollout_copy)
        self.own_stale = False  # True: the learner's weights changed since `own` last had them

    def sampler_for(self, policy):
        """A backend that samples training rollouts from `policy` (the asynchronous loop's rollout copy)."""
        return self.samplers(policy) if self.samplers else build_backend(self.cfg.rollout.backend, policy)

    def use_rollout_copy(self, backend) -> None:
        """The asynchronous loop samples through `backend`, its copy's: with rollout actors, so does evaluation."""
        self.rollout_copy = backend

    @property
    def sampler(self):
        """The backend that samples the synchronous loop's rollouts: the run's own, or made on first use by
        `samplers` (the asynchronous loop never uses it, so it places no rollout actors for it)."""
        if self._sampler is None:
            self._sampler = self.sampler_for(self.policy) if self.samplers else self.current()
        return self._sampler

    def of_learner(self) -> list:
        """The backends of the learner's policy made so far: its own (none on Ray), and its sampler when another."""
        own = [self.own] if self.own is not None else []
        if self._sampler is not None and self._sampler is not self.own:
            own.append(self._sampler)
        return own

    def release_memory(self) -> None:
        """Before an update: a sampler of the learner's policy sharing the GPU frees it (vllm sleeps)."""
        for backend in self.of_learner():
            backend.release_memory()

    def sync(self) -> None:
        """The backend that samples the learner's policy uses its current weights from now on (one not made yet
        needs none). The run's own backend, where it only evaluates (the asynchronous loop's copy samples),
        gets them when it next evaluates (current): a vllm engine there would otherwise wake and load weights
        after every step, for an evaluation every eval.every steps."""
        if self._sampler is not None:
            self._sampler.sync_weights()
        self.own_stale = self._sampler is not self.own

    def current(self):
        """The run's own backend, holding the learner's current weights (after a resume too)."""
        if self.own_stale:
            self.own.sync_weights()
            self.own_stale = False
        return self.own

    def evaluator(self):
        """Where evaluation samples: the run's own backend; with `samplers`, the rollout actors that sample the
        training rollouts (the asynchronous loop's copy's, when there is one), which hold the learner's weights
        whenever it evaluates: before the first step, and after every step's weight sync."""
        if self.samplers is None:
            return self.current()
        return self.rollout_copy or self.sampler
