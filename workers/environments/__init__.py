"""Environments: what answers a policy's turn in a multi-turn rollout (a tool, a puzzle, a corpus to search).

An episode is a conversation. The task's question opens it; the policy writes a turn; the environment reads the
turn and answers with an observation (a tool's result, the new state of a board), a reward part for the turn and
whether the episode is done; the policy's next turn continues after the observation, until the environment says
done or the turn limit ends it. The policy's tokens train; the observation's tokens are in the sequence, attended
by what follows, but never in the loss.

    environment = ENVIRONMENTS.get(cfg.environment.name)(cfg.environment, task)
    episode = environment.reset(example, rng)        # an Episode: one row's conversation
    result = episode.step("... <calc>12*7</calc>")  # Turn(observation="<result>84</result>", reward=0.0, ...)

An environment owns its turn format: the strings that end a policy's turn (besides the end-of-turn token), how an
observation is written, and the turn limit. Errors inside an episode (a malformed tool call, an illegal move)
are observations the policy reads, never exceptions; an exception raised by an environment fails the run.

Each environment is one folder here, found by the registry like the pipeline stages' components: its
__init__.py declares it (summary, knobs), its component.py holds the code. `none` is the single-turn task: one
turn, judged by the task's verifier.
"""

from workers.registry import Registry

ENVIRONMENTS: Registry[type] = Registry("environment").discover(__name__)


def build_environment(cfg, task):
    """The run's environment with its knobs, or None for single-turn rollouts (environment.name 'none')."""
    if cfg.environment.name == "none":
        return None
    return ENVIRONMENTS.get(cfg.environment.name)(cfg.environment, task)


__all__ = ["ENVIRONMENTS", "build_environment"]
