"""`lookup`: questions that chain two or three relations of a generated world, answered with one entity's name.

    Who is the founder of the employer of Neku Tir?   ->  Fulo Kun

The world is drawn from its own seed (`task.world_seed`), never the run's, so every run of a config reads the same
corpus: `task.documents` invented entities (people, cities, organisations, countries), each with one short page:

    Neku Tir: born in Husri, works for Biga Group, mentor Lemo Son.
    Biga Group: founded by Fulo Kun, based in Bistpe.
    Husri: a city in Gollia, mayor Puvu Ball.
    Gollia: a country, capital Dirna.

A question of `task.hops` hops names its start entity and the relations to follow from it (innermost last), so its
answer is read on the page of the entity one hop before it: answering needs that many pages, one a hop. Questions
whose entities repeat, or whose next entity is named on a page read two or more hops earlier, are never asked, so
no page answers two hops at once. With `environment.name lookup` the policy searches the corpus
(workers/environments/lookup/); without one (single turn) the answer must come from what the model remembers. The
answer is judged by exact name match, case and spacing aside. The held-out split is drawn from a fixed seed, as
arith's is; its questions are never trained on, though they ask about the same world.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import numpy as np

from workers.tasks import Example, held_out_size, held_out_split, sha256_lines

EVAL_SEED = 3_000_017  # the held-out split's own seed, independent of the run's and the world's

# relation -> (the kind it leaves from, the kind it leads to); a question names relations by these words
RELATIONS = {
    "birthplace": ("person", "city"),
    "employer": ("person", "org"),
    "mentor": ("person", "person"),
    "founder": ("org", "person"),
    "base": ("org", "city"),
    "country": ("city", "country"),
    "mayor": ("city", "person"),
    "capital": ("country", "city"),
}
# one line a page, its entity's name first: what a search returns
PAGES = {
    "person": "{name}: born in {birthplace}, works for {employer}, mentor {mentor}.",
    "org": "{name}: founded by {founder}, based in {base}.",
    "city": "{name}: a city in {country}, mayor {mayor}.",
    "country": "{name}: a country, capital {capital}.",
}
ONSETS = list("bdfghklmnprstvz")
VOWELS = list("aeiou")
CODAS = ["l", "n", "r", "s", "sh", "k", "t", "nn", "ll", "rk", "st"]
ORG_KINDS = ["Labs", "Works", "Mills", "Group", "Bank"]
NAMED_BY = {
    "person": lambda d: f"{d.syllable().title()}{d.syllable()} {d.closed().title()}",  # Neku Tir
    "city": lambda d: f"{d.closed().title()}{d.syllable()}",  # Husri
    "org": lambda d: f"{d.syllable().title()}{d.syllable()} {d.pick(ORG_KINDS)}",  # Biga Group
    "country": lambda d: f"{d.closed().title()}ia",  # Gollia
}
_QUESTION = re.compile(r"^(?:Who|What) is the (.+)\?$")
_NAME = re.compile(r"[a-z]+(?: [a-z]+)*")


@dataclass(frozen=True)
class Entity:
    name: str
    kind: str  # person, city, org or country
    relations: tuple[tuple[str, str], ...]  # (relation, the name of the entity it leads to), in PAGES' order

    def page(self) -> str:
        return PAGES[self.kind].format(name=self.name, **dict(self.relations))

    def follow(self, relation: str) -> str | None:
        return dict(self.relations).get(relation)


@dataclass(frozen=True)
class Question:
    chain: tuple[str, ...]  # the start entity, each hop's entity, the answer: hops + 1 names
    relations: tuple[str, ...]  # the relations followed, first hop first

    def example(self) -> Example:
        asked = "Who" if RELATIONS[self.relations[-1]][1] == "person" else "What"
        path = " of the ".join(reversed(self.relations))
        return Example(prompt=f"{asked} is the {path} of {self.chain[0]}?", answer=self.chain[-1])


class _Syllables:
    """Draws the pieces of invented names from the world's generator."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng

    def pick(self, options: list[str]) -> str:
        return options[int(self.rng.integers(len(options)))]

    def syllable(self) -> str:
        return self.pick(ONSETS) + self.pick(VOWELS)

    def closed(self) -> str:
        return self.syllable() + self.pick(CODAS)


class World:
    """The generated corpus: entities with their relations, one page each (a page's id is its index)."""

    def __init__(self, entities: list[Entity]):
        self.entities = entities
        self.index = {normalized(e.name): i for i, e in enumerate(entities)}
        self.documents = [e.page() for e in entities]
        self._questions: dict[int, list[Question]] = {}

    def entity(self, name: str) -> Entity | None:
        found = self.index.get(normalized(name))
        return None if found is None else self.entities[found]

    def page_of(self, name: str) -> int | None:
        return self.index.get(normalized(name))

    def follow(self, start: str, relations: tuple[str, ...]) -> tuple[str, ...] | None:
        """The names met from `start` following the relations (start first, answer last); None if one fails."""
        chain = [start]
        for relation in relations:
            entity = self.entity(chain[-1])
            following = entity.follow(relation) if entity else None
            if following is None:
                return None
            chain.append(following)
        return tuple(chain)

    def questions(self, hops: int) -> list[Question]:
        """Every question of `hops` hops that needs each of its pages, in a fixed order (found once)."""
        if hops not in self._questions:
            self._questions[hops] = [
                Question(chain, relations)
                for entity in self.entities
                for relations in relation_paths(entity.kind, hops)
                if (chain := self.follow(entity.name, relations)) and self.needs_every_page(chain)
            ]
        return self._questions[hops]

    def needs_every_page(self, chain: tuple[str, ...]) -> bool:
        """Distinct entities, and none named on a page read two or more hops before it is reached: a page never
        answers two hops at once, so a question of k hops needs its k pages."""
        if len(set(chain)) < len(chain):
            return False
        for j in range(2, len(chain)):
            if any(mentions(self.documents[self.page_of(chain[i])], chain[j]) for i in range(j - 1)):
                return False
        return True


def relation_paths(kind: str, hops: int) -> list[tuple[str, ...]]:
    """The relation sequences of `hops` hops that can leave an entity of this kind, in RELATIONS' order."""
    if hops == 0:
        return [()]
    return [
        (relation, *rest)
        for relation, (source, target) in RELATIONS.items()
        if source == kind
        for rest in relation_paths(target, hops - 1)
    ]


def mentions(document: str, name: str) -> bool:
    return re.search(rf"\b{re.escape(name)}\b", document) is not None


@functools.lru_cache(maxsize=8)
def world(seed: int, size: int) -> World:
    """The world of `size` entities drawn from `seed`: a quarter cities, a fifth organisations, a twelfth
    countries (each with at least one city, its capital among them), the rest people."""
    rng = np.random.default_rng(seed)
    counts = {"country": max(2, size // 12), "city": max(3, size // 4), "org": max(2, size // 5)}
    counts["person"] = size - sum(counts.values())
    names = invented_names(_Syllables(rng), counts)
    countries = names["country"]
    # the first cities go one to each country, so that every country has a capital
    country_of = {
        city: countries[i] if i < len(countries) else pick(rng, countries) for i, city in enumerate(names["city"])
    }
    capitals = {country: pick(rng, [c for c, n in country_of.items() if n == country]) for country in names["country"]}
    entities = []
    for name in names["person"]:
        mentors = [p for p in names["person"] if p != name]
        relations = {"birthplace": pick(rng, names["city"]), "employer": pick(rng, names["org"]),
                     "mentor": pick(rng, mentors)}  # fmt: skip
        entities.append(Entity(name, "person", tuple(relations.items())))
    for name in names["org"]:
        relations = {"founder": pick(rng, names["person"]), "base": pick(rng, names["city"])}
        entities.append(Entity(name, "org", tuple(relations.items())))
    for name in names["city"]:
        relations = {"country": country_of[name], "mayor": pick(rng, names["person"])}
        entities.append(Entity(name, "city", tuple(relations.items())))
    for name in names["country"]:
        entities.append(Entity(name, "country", (("capital", capitals[name]),)))
    order = rng.permutation(len(entities))  # pages of every kind mixed, so an id says nothing of its kind
    return World([entities[int(i)] for i in order])


def invented_names(draw: _Syllables, counts: dict[str, int]) -> dict[str, list[str]]:
    """Distinct names of each kind (no name used twice across kinds, whatever its case)."""
    taken, names = set(), {}
    for kind in ("country", "city", "org", "person"):
        names[kind] = []
        while len(names[kind]) < counts[kind]:
            name = NAMED_BY[kind](draw)
            if name.casefold() not in taken:
                taken.add(name.casefold())
                names[kind].append(name)
    return names


def pick(rng: np.random.Generator, options: list[str]) -> str:
    return options[int(rng.integers(len(options)))]


def normalized(text: str) -> str:
    """Case and spacing aside: ' tam  KOSH ' is 'tam kosh'."""
    return " ".join(text.split()).casefold()


def question_count(seed: int, size: int, hops: int) -> int:
    """How many distinct questions of `hops` hops the world asks (the task's problem space)."""
    return len(world(seed, size).questions(hops))


class LookupTask:
    """Multi-hop questions about a generated corpus; exact-name verifier."""

    name = "lookup"
    instruction = ""  # the tiny model reads the bare question

    def __init__(self, cfg):
        knobs = cfg.task
        self.seed, self.size, self.hops = knobs.world_seed, knobs.documents, knobs.hops
        self.warmup_hops, self.warmup_full_share = min(knobs.warmup_hops, self.hops), knobs.warmup_full_share
        self.world = world(self.seed, self.size)
        asked = [q.example() for q in self.world.questions(self.hops)]
        size = held_out_size(cfg.eval.size, len(asked))
        self._held_out_examples = held_out_split(lambda rng: pick_example(rng, asked), size, EVAL_SEED)
        self._eval = self._held_out_examples[: cfg.eval.size]
        held_out = {e.prompt for e in self._held_out_examples}
        self._training = [e for e in asked if e.prompt not in held_out]
        self._warmup = [e for e in self.examples(self.warmup_hops) if e.prompt not in held_out]

    def examples(self, hops: int) -> list[Example]:
        return [q.example() for q in self.world.questions(hops)]

    def train_batch(self, n: int, rng: np.random.Generator) -> list[Example]:
        return [pick_example(rng, self._training) for _ in range(n)]

    def eval_examples(self) -> list[Example]:
        return list(self._eval)

    def warmup_pairs(self, n: int, rng: np.random.Generator) -> list[tuple[str, str]]:
        """The easier slice: questions of warmup_hops hops; a share of task.hops questions is mixed in."""
        pairs = []
        for _ in range(n):
            pool = self._training if rng.random() < self.warmup_full_share else self._warmup
            example = pick_example(rng, pool)
            pairs.append((example.prompt, example.answer))
        return pairs

    def searches(self, question: str) -> list[str] | None:
        """The names whose pages answer the question, in the order they are needed (the start entity first);
        None for a question this world does not ask."""
        found = _QUESTION.match(question.strip())
        if not found:
            return None
        *outer, innermost = found.group(1).split(" of the ")
        first, _, start = innermost.partition(" of ")
        chain = self.world.follow(start, (first, *reversed(outer)))
        return list(chain[:-1]) if chain else None

    def answer_key(self, example: Example, completion: str) -> str | None:
        """The name the completion gives, case and spacing aside; None unless it is words of letters alone."""
        name = normalized(completion)
        return name if _NAME.fullmatch(name) else None

    def is_correct(self, example: Example, completion: str) -> bool:
        return self.answer_key(example, completion) == normalized(example.answer)

    def format_ok(self, example: Example, completion: str) -> bool:
        return self.answer_key(example, completion) is not None

    def fingerprint(self) -> str:
        knobs = f"{self.name} world_seed={self.seed} documents={self.size} hops={self.hops}"
        held_out = (e.prompt + e.answer for e in self._held_out_examples)
        return sha256_lines([knobs, *self.world.documents, *held_out])


def pick_example(rng: np.random.Generator, examples: list[Example]) -> Example:
    return examples[int(rng.integers(len(examples)))]


__all__ = ["LookupTask", "Question", "World", "normalized", "question_count", "world"]
