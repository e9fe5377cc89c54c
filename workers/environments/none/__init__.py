"""No environment: the task's single turn, judged by the reward functions (every task's default).

The code: component.py (SingleTurn).
"""

from __future__ import annotations

from workers.knobs import Knobs
from workers.registry import Component

COMPONENT = Component("none", "component:SingleTurn", knobs=Knobs)
