"""A search over the lookup task's corpus: the policy writes <search>name</search> and reads the best pages back.

For the `lookup` task's multi-hop questions (workers/tasks/lookup.py). A turn that closes a call is answered with
the top pages of the corpus for its query, each as <doc>page</doc>, ranked by a small deterministic lexical scorer
(no search library is a dependency): the page whose entity the query names exactly first, then pages by the
inverse-document-frequency weight of the query's words in their text, then in their title. A query that matches no
page is answered <doc>no results</doc>; an empty, over-long or tagged query is an error the policy reads. A turn
without a call is the final answer, judged by the task (reward 1 or 0). The state key after a turn is the set of
pages retrieved so far, so episodes that read the same pages are in the same state whatever they searched for.
"""

from __future__ import annotations

from pydantic import Field

from workers.environments.knobs import EpisodeKnobs
from workers.registry import Component


class LookupEnvironmentKnobs(EpisodeKnobs):
    top_k: int = Field(
        1, ge=1, le=5, description="Pages a search returns at most, best first (each one is read as tokens)."
    )
    max_query_chars: int = Field(
        40, ge=1, le=256, description="Longest query searched; a longer one is an error the policy reads."
    )
    demonstrated_searches: float = Field(
        0.5,
        ge=0,
        le=1,
        description="The tiny model's warm-up: the share of its questions shown as an episode (a search for each "
        "page the question needs, the pages found, the answer); the others are answered directly. Pretrained "
        "models are not warmed up.",
    )


def requirements(task_name: str, hops: int | None, max_turns: int) -> None:
    """Raises unless the run asks the lookup task's questions with turns enough for their searches and answer."""
    if task_name != "lookup":
        raise ValueError("environment.name: lookup searches the lookup task's corpus; set task.name lookup")
    if hops is not None and max_turns <= hops:
        raise ValueError(
            f"environment.max_turns: {max_turns} turns cannot answer a question of {hops} hops (task.hops), which "
            f"needs {hops} searches and the answer; at least {hops + 1}"
        )


def check(cfg) -> None:
    requirements(cfg.task.name, getattr(cfg.task, "hops", None), cfg.environment.max_turns)


COMPONENT = Component("lookup", "component:Lookup", knobs=LookupEnvironmentKnobs, check=check)
