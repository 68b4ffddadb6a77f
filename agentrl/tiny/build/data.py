"""The conversations `python -m agentrl.tiny.build` trains on: expert demonstrations, easy-tier drills, echo drills.

Every source is a generator seeded by `(seed, source name)`, so a stage draws the same conversations on every
machine. The experts and drills make mistakes on purpose (`MISTAKE_RATE`): the shipped policy uses its tools often
but not always well, and RL from it has room to raise held-out success.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

MISTAKE_RATE = {
    "code": 0.5,
    "search": 0.5,
    "terminal": 0.3,
    "gui": 0.3,
    "swe": 0.3,
    "swe_made_up": 0.3,
    "swe_retry": 0.3,
    "swe_code": 0.3,
}
"""Probability that a demonstration is deliberately wrong, per scaffold."""
DRAWS = {"code": 1, "search": 8}
"""Expert conversations per training task of the base scaffolds (each draws its own mistakes): the search world has
a few thousand questions, the code scaffold tens of thousands of distinct ones."""
BASE_SOURCES = ("code", "search")
"""The base stage: a fresh tokenizer and model learn these scaffolds (and, with them, to copy numbers)."""
GENERATED_SOURCES = ("terminal", "gui", "swe", "swe_made_up", "swe_retry", "swe_code")
"""Sources drawn in any number: terminal tasks over made-up names, GUI and SWE drills, SWE drills whose
expressions have made-up operands (`SWE_MADE_UP_OPERANDS`), those again retrying after a failed first edit
(`SWE_RETRY_RATE`), and retrying SWE drills over bugs in the standard library's code (`swe_code_drills.py`)."""
SWE_MADE_UP_OPERANDS = 0.5
"""How often a variable, attribute or constant in a `swe_made_up` drill's expressions is made up: with the drills'
short word lists alone the policy recalls operands instead of copying them, and garbles held-out ones."""

SWE_RETRY_RATE = 0.5
"""How often a correct `swe_retry` drill's first edit fails and is tried again: the policy garbles some copies,
and one that submits after its first error leaves RL no second attempt to reinforce."""

Source = Callable[[random.Random, float, int], Iterator[tuple[list[dict[str, Any]], list[dict]]]]
"""(rng, mistake rate, count) → demonstrations, each (messages, tool schemas to render with)."""


def base_scaffolds() -> dict[str, tuple[ModuleType, ModuleType]]:
    """(tasks module, expert module) per base scaffold."""
    from agentrl.scaffolds.code import expert as code_expert
    from agentrl.scaffolds.code import tasks as code_tasks
    from agentrl.scaffolds.search import expert as search_expert
    from agentrl.scaffolds.search import tasks as search_tasks

    return {"code": (code_tasks, code_expert), "search": (search_tasks, search_expert)}


def _sources() -> dict[str, Source]:
    from agentrl.scaffolds.terminal import easy_family
    from agentrl.scaffolds.terminal import expert as terminal_expert
    from agentrl.tiny.build import gui_drills, swe_drills

    def expert_source(tasks: ModuleType, expert: ModuleType, draws: int) -> Source:
        def source(rng: random.Random, rate: float, count: int) -> Iterator:
            schemas = [t.schema for t in tasks.TOOLS]
            for _ in range(draws):
                for task in tasks.tasks("train"):
                    yield expert.demonstration(task, rng, mistake_rate=rate), schemas

        return source

    def terminal(rng: random.Random, rate: float, count: int) -> Iterator:
        for spec in easy_family.made_up(count):
            yield terminal_expert.demonstration(spec.to_task(), rng, mistake_rate=rate), []

    def code_drills(rng: random.Random, rate: float, count: int) -> Iterator:
        from agentrl.tiny.build import swe_code_drills as code_drills

        for _ in range(count):
            drill = code_drills.draw(rng)
            yield swe_drills.demonstration(rng, mistake_rate=rate, retry_rate=SWE_RETRY_RATE, drill=drill), []

    def drills(module: ModuleType, **options: float) -> Source:
        def source(rng: random.Random, rate: float, count: int) -> Iterator:
            for _ in range(count):
                yield module.demonstration(rng, mistake_rate=rate, **options), []

        return source

    sources = {name: expert_source(*modules, DRAWS[name]) for name, modules in base_scaffolds().items()}
    return sources | {
        "terminal": terminal,
        "gui": drills(gui_drills),
        "swe": drills(swe_drills),
        "swe_made_up": drills(swe_drills, made_up_operands=SWE_MADE_UP_OPERANDS),
        "swe_retry": drills(swe_drills, made_up_operands=SWE_MADE_UP_OPERANDS, retry_rate=SWE_RETRY_RATE),
        "swe_code": code_drills,
    }


def demonstrations(
    mistake_rate: dict[str, float], seed: int, names: tuple[str, ...], counts: dict[str, int] | None = None
) -> list[dict[str, Any]]:
    """The named sources' demonstrations (`counts` of the generated ones; the base sources give all of theirs),
    with the tool schemas each is rendered with for the tokenizer."""
    sources, out = _sources(), []
    for name in names:
        rng = random.Random(f"{seed}/{name}")
        for messages, schemas in sources[name](rng, mistake_rate[name], (counts or {}).get(name, 0)):
            out.append({"messages": messages, "tools": schemas, "scaffold": name})
    return out


def echo_drills(tokenizer: Any, count: int, seed: int, stream: str, *, lead_in: bool = False) -> list[dict[str, Any]]:
    """`count` echo drills (`agentrl/tiny/build/copy_drills.py`): dense ones over this tokenizer's vocabulary, or
    single-round `lead_in` ones."""
    from agentrl.tiny.build import copy_drills

    pieces = copy_drills.vocabulary_pieces(tokenizer)
    rng = random.Random(f"{seed}/echo/{stream}")
    make = copy_drills.lead_in_drill if lead_in else lambda rng: copy_drills.drill(rng, pieces)
    return [{"messages": make(rng), "tools": [], "scaffold": "echo"} for _ in range(count)]


def replay(mistake_rate: dict[str, float], seed: int, count: int, stream: str) -> list[dict[str, Any]]:
    """`count` base demonstrations drawn (without repeats) for replay in a later stage."""
    base = demonstrations(mistake_rate, seed, BASE_SOURCES)
    return random.Random(f"{seed}/replay/{stream}").sample(base, k=min(len(base), count))


def mixture(
    tokenizer: Any, mistake_rate: dict[str, float], seed: int, counts: dict[str, int], stream: str
) -> list[dict[str, Any]]:
    """A pass's conversations: `counts` per generated source (in the order given), then `counts["echo"]` echo
    drills and `counts["replay"]` replayed base demonstrations, the last two drawn from `stream`."""
    names = tuple(name for name in counts if name in GENERATED_SOURCES)
    unknown = set(counts) - set(GENERATED_SOURCES) - {"echo", "replay"}
    if unknown:
        raise ValueError(f"unknown sources {sorted(unknown)}")
    demos = demonstrations(mistake_rate, seed, names, counts)
    demos += echo_drills(tokenizer, counts.get("echo", 0), seed, stream)
    return demos + replay(mistake_rate, seed, counts.get("replay", 0), stream)
