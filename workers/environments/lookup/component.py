"""The lookup environment's code: a lexical search over the task's generated pages, and the episode around it."""

from __future__ import annotations

import math
import re
from collections import Counter

import numpy as np

from workers.environments.base import Turn, last_call
from workers.environments.lookup import requirements
from workers.tasks import Example
from workers.tasks.lookup import World, normalized

CALL = re.compile(r"<search>(.*?)</search>", re.DOTALL)
OPEN = "<search>"
WORD = re.compile(r"[a-z0-9]+")
NO_RESULTS = "<doc>no results</doc>"


class Search:
    """Ranks the world's pages for a query. First the page of the entity the query names exactly (case and spacing
    aside); then by the words the query shares with the page's text, each weighted by its inverse document
    frequency log(1 + N / df), so that a name outweighs 'city' or 'mentor'; on a tie, by the words it shares with
    the page's title (its entity's name: "the mentor of Neku Tir" finds her page before her mentees'), then by page
    id. A page that shares no word with the query is not a result."""

    def __init__(self, world: World):
        self.world = world
        self.titles = [set(words(entity.name)) for entity in world.entities]
        self.texts = [set(words(document)) for document in world.documents]
        frequency = Counter(word for text in self.texts for word in text)
        self.idf = {word: math.log(1 + len(self.texts) / count) for word, count in frequency.items()}

    def __call__(self, query: str, k: int) -> list[int]:
        terms = sorted(set(words(query)))  # a fixed order: the float sums are the same on every run
        exact = self.world.page_of(query)
        ranked = []
        for page, text in enumerate(self.texts):
            in_text = sum(self.idf[t] for t in terms if t in text)
            if in_text > 0:
                in_title = sum(self.idf[t] for t in terms if t in self.titles[page])
                ranked.append((page != exact, -in_text, -in_title, page))
        return [page for *_, page in sorted(ranked)[:k]]


class Lookup:
    stop_strings = ("</search>",)

    def __init__(self, knobs, task):
        requirements(task.name, getattr(task, "hops", None), knobs.max_turns)
        self.max_turns, self.max_episode_tokens = knobs.max_turns, knobs.max_episode_tokens
        self.top_k, self.max_query_chars = knobs.top_k, knobs.max_query_chars
        self.demonstrated_searches = knobs.demonstrated_searches
        self.task, self.search = task, Search(task.world)

    def reset(self, example: Example, rng: np.random.Generator | None) -> LookupEpisode:
        return LookupEpisode(self, example)

    def demonstrations(self, pairs: list[tuple[str, str]], rng: np.random.Generator) -> list[tuple[str, str]]:
        """The tiny model's warm-up pairs, a share of them written as episodes: a search for each page the question
        needs, in order, the pages the search really returns, then the answer. A question this world does not ask,
        or one that needs more turns than max_turns, is left as it is."""
        shown = []
        for prompt, answer in pairs:
            names = self.task.searches(prompt)
            if rng.random() < self.demonstrated_searches and names is not None and len(names) < self.max_turns:
                answer = self.demonstrated(Example(prompt, answer), names)
            shown.append((prompt, answer))
        return shown

    def demonstrated(self, example: Example, names: list[str]) -> str:
        episode, text = self.reset(example, None), ""
        for name in names:
            call = f"<search>{name}</search>"
            text += call + episode.step(call).observation
        return text + example.answer

    def malformed(self, query: str) -> str | None:
        """What is wrong with a query, in the words the policy reads; None for a query that can be searched."""
        if not query.strip():
            return "empty query"
        if len(query) > self.max_query_chars:
            return f"query longer than {self.max_query_chars} characters"
        if any(c in query for c in "<>\n"):
            return "a query is words, without tags or new lines"
        return None


class LookupEpisode:
    start_state = ""

    def __init__(self, environment: Lookup, example: Example):
        self.environment, self.example = environment, example
        self.opening = example.prompt
        self.turns, self.read = 0, set()

    def step(self, turn: str) -> Turn:
        self.turns += 1
        last = self.turns >= self.environment.max_turns
        query = last_call(turn, CALL)
        if query is None:  # no closed call: the answer
            well_formed = OPEN not in turn
            solved = well_formed and self.environment.task.is_correct(self.example, turn)
            return Turn("", float(solved), True, self.state(), well_formed, solved)
        observation, well_formed = self.answer(query)
        return Turn("" if last else observation, 0.0, last, self.state(), well_formed, action=query)

    def answer(self, query: str) -> tuple[str, bool]:
        """The observation for a search, and whether its call could be searched at all."""
        problem = self.environment.malformed(query)
        if problem:
            return f"<doc>error: {problem}</doc>", False
        pages = self.environment.search(query, self.environment.top_k)
        self.read.update(pages)
        documents = self.environment.task.world.documents
        return "".join(f"<doc>{documents[page]}</doc>" for page in pages) or NO_RESULTS, True

    def state(self) -> str:
        """The pages retrieved so far, by id: equal whatever queries found them, in whatever order."""
        return ",".join(str(page) for page in sorted(self.read))


def words(text: str) -> list[str]:
    return WORD.findall(normalized(text))
