"""A calculator tool: the policy may write <calc>expression</calc> and reads <result>value</result> back.

For the arithmetic and word-problem tasks. A turn that closes a call is answered with the call's value (exact:
fractions stay fractions until they are written as decimals), or with an error the policy reads when the
expression is malformed, too long, divides by zero or grows past 10^15; a turn without a call is the final answer,
judged by the task's verifier (reward 1 or 0). The episode also ends, with reward 0, after `max_turns` turns.
The state key after a turn is the results read so far, so episodes that computed the same values are in the same
state whatever they wrote around them.
"""

from __future__ import annotations

from pydantic import Field

from workers.environments.knobs import EpisodeKnobs
from workers.registry import Component


class CalculatorKnobs(EpisodeKnobs):
    max_expression_chars: int = Field(
        64, ge=1, le=1024, description="Longest expression the calculator evaluates; a longer one is an error."
    )
    demonstrated_calls: float = Field(
        0.5,
        ge=0,
        le=1,
        description="The tiny model's warm-up: the share of its arithmetic examples shown as an episode (the "
        "question computed with a call, the result, the answer); the others are answered directly. Pretrained "
        "models are not warmed up.",
    )


COMPONENT = Component("calculator", "component:Calculator", knobs=CalculatorKnobs)
