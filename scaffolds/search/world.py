"""The search scaffold's knowledge base: a small generated world of fictional entities.

Countries, cities, companies and people with pronounceable made-up names, linked by a few relations (a company's
founder and headquarters, a person's birthplace and employer, a city's country and mayor, a country's capital).
The world is generated from a fixed seed, so every process sees the same facts without shipping a data file, and
no real-world knowledge a pretrained model might hold can answer its questions.
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass
from typing import Literal

Kind = Literal["country", "city", "company", "person"]
Field = Literal["founder", "headquarters", "birthplace", "employer", "country", "mayor", "capital"]

FIELDS: dict[str, tuple[str, ...]] = {
    "company": ("founder", "headquarters"),
    "person": ("birthplace", "employer"),
    "city": ("country", "mayor"),
    "country": ("capital",),
}
"""The fields each kind of entity has."""
TARGET_KIND: dict[str, str] = {
    "founder": "person",
    "headquarters": "city",
    "birthplace": "city",
    "employer": "company",
    "country": "country",
    "mayor": "person",
    "capital": "city",
}
"""The kind of entity each field points to."""

SEED = 7
COUNTS: dict[str, int] = {"country": 10, "city": 60, "company": 160, "person": 400}

_ONSETS = ["b", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "dr", "kr", "st", "th"]
_VOWELS = ["a", "e", "i", "o", "u", "a", "e", "o", "ai", "ou"]
_CODAS = ["", "", "", "n", "r", "l", "s", "m", "k", "sk"]


@dataclass(frozen=True)
class Entity:
    """One named thing in the world and its facts (field -> name of another entity)."""

    name: str
    kind: str
    facts: dict[str, str]


@dataclass(frozen=True)
class World:
    """All entities, by name."""

    entities: dict[str, Entity]

    def of_kind(self, kind: str) -> list[Entity]:
        """The entities of one kind, in generation order."""
        return [e for e in self.entities.values() if e.kind == kind]

    def fact(self, name: str, field: str) -> str:
        """The value of `field` for the entity called `name` (KeyError when either is missing)."""
        return self.entities[name].facts[field]


def _word(rng: random.Random, syllables: int) -> str:
    return "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(syllables)).title()


def _name(rng: random.Random, kind: str) -> str:
    if kind == "person":
        return f"{_word(rng, 2)} {_word(rng, rng.choice([1, 2]))}"
    return _word(rng, 3 if kind == "company" else 2)


def _names(rng: random.Random) -> dict[str, list[str]]:
    taken: set[str] = set()
    names: dict[str, list[str]] = {kind: [] for kind in COUNTS}
    for kind, count in COUNTS.items():
        while len(names[kind]) < count:
            name = _name(rng, kind)
            # names must be unique across kinds and must not contain each other, so a lookup is never ambiguous
            if name.lower() not in taken and all(name.lower() not in t and t not in name.lower() for t in taken):
                taken.add(name.lower())
                names[kind].append(name)
    return names


def build_world(seed: int = SEED) -> World:
    """Generate the world deterministically from `seed`."""
    rng = random.Random(seed)
    names = _names(rng)
    countries, cities = names["country"], names["city"]
    companies, people = names["company"], names["person"]
    city_country = {city: countries[i % len(countries)] for i, city in enumerate(cities)}
    facts: dict[str, dict[str, str]] = {}
    for country in countries:
        facts[country] = {"capital": next(c for c in cities if city_country[c] == country)}
    for city in cities:
        facts[city] = {"country": city_country[city], "mayor": rng.choice(people)}
    for company in companies:
        facts[company] = {"founder": rng.choice(people), "headquarters": rng.choice(cities)}
    for person in people:
        facts[person] = {"birthplace": rng.choice(cities), "employer": rng.choice(companies)}
    kind_of = {name: kind for kind, group in names.items() for name in group}
    return World({name: Entity(name, kind_of[name], facts[name]) for name in facts})


@functools.cache
def world() -> World:
    """The bundled world (built once per process)."""
    return build_world()
