"""`PrefixCache`: keys and values of finished rows, kept so that a prompt extending them prefills only the rest.

Multi-turn rollouts send prompt → completion → tool result → completion ...: each turn's prompt is the previous
turn's prompt and completion plus the tool's answer. When a row finishes, its keys and values are parked here
under the token ids they belong to; a joining prompt that starts with a parked row's ids, in whole or in part,
copies that many positions into its slot and prefills only what follows. The same serves a group's identical
prompts and the system prompt that every task shares.

Lookup walks the prompt in blocks of `BLOCK` ids: each entry is indexed by the chained hash of each of its whole
blocks, so the longest parked prefix costs one dict lookup per block, and is then confirmed id by id. Memory is
bounded by a budget of positions; the least recently used entries go first. An entry that is a prefix of a newly
parked one is dropped, since the new one serves every prompt the old one served. Entries hold for one set of
weights: the loop clears the cache when the weights change.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

BLOCK = 16
"""Ids per indexed block: prefixes are found in whole blocks, then extended id by id."""


@dataclass(eq=False)
class PrefixEntry:
    ids: tuple[int, ...]
    """The token ids whose keys and values are held (position i is ids[i])."""
    kv: list[tuple[torch.Tensor, torch.Tensor]]
    """Per layer: keys and values, (heads, len(ids), head_dim) each."""
    hashes: list[int] = field(default_factory=list)


def block_hashes(ids: Sequence[int]) -> list[int]:
    """The chained hash of each whole block of `ids` (hash b covers ids[: (b + 1) * BLOCK])."""
    out, running = [], 0
    for start in range(0, len(ids) - BLOCK + 1, BLOCK):
        running = hash((running, tuple(ids[start : start + BLOCK])))
        out.append(running)
    return out


@dataclass
class PrefixStats:
    """What the cache saved: lookups that found a prefix and the positions they did not prefill."""

    hits: int = 0
    reused_tokens: int = 0
    parked: int = 0
    evicted: int = 0


class PrefixCache:
    """Parked keys and values by token-id prefix, least recently used evicted past `budget_tokens` positions."""

    def __init__(self, budget_tokens: int):
        self.budget_tokens = budget_tokens
        self.tokens = 0
        self.stats = PrefixStats()
        self._entries: OrderedDict[int, PrefixEntry] = OrderedDict()
        self._index: dict[int, dict[int, PrefixEntry]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def match(self, ids: Sequence[int], hashes: list[int] | None = None) -> tuple[PrefixEntry | None, int]:
        """The entry sharing the longest prefix with `ids` (at least one block) and that prefix's length."""
        best, depth = None, 0
        for b, h in enumerate(block_hashes(ids) if hashes is None else hashes):
            found = self._index.get(h)
            if not found:
                break
            best, depth = next(reversed(found.values())), b + 1
        if best is None:
            return None, 0
        common = depth * BLOCK
        if best.ids[:common] != tuple(ids[:common]):  # a hash collision
            return None, 0
        limit = min(len(best.ids), len(ids))
        while common < limit and best.ids[common] == ids[common]:
            common += 1
        self._entries.move_to_end(id(best))
        return best, common

    def lookup(self, ids: Sequence[int]) -> tuple[PrefixEntry | None, int]:
        """`match` for a prompt to be prefilled: at most len(ids) - 1 positions (the last id is fed to get the next
        token's logits), counted in the stats."""
        entry, common = self.match(ids)
        common = min(common, len(ids) - 1)
        if entry is None or common < BLOCK:
            return None, 0
        self.stats.hits += 1
        self.stats.reused_tokens += common
        return entry, common

    def park(self, ids: Sequence[int], kv: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        """Keep `kv` (the keys and values of `ids`), unless an entry already holds all of `ids`."""
        if len(ids) < BLOCK or len(ids) > self.budget_tokens:
            return
        hashes = block_hashes(ids)
        prior, common = self.match(ids, hashes)
        if prior is not None and common == len(ids):
            return
        if prior is not None and common == len(prior.ids):
            self._remove(prior)
        entry = PrefixEntry(tuple(ids), kv, hashes)
        self._entries[id(entry)] = entry
        for h in hashes:
            self._index.setdefault(h, {})[id(entry)] = entry
        self.tokens += len(ids)
        self.stats.parked += 1
        while self.tokens > self.budget_tokens:
            self._remove(next(iter(self._entries.values())))
            self.stats.evicted += 1

    def clear(self) -> None:
        self._entries.clear()
        self._index.clear()
        self.tokens = 0

    def _remove(self, entry: PrefixEntry) -> None:
        del self._entries[id(entry)]
        for h in entry.hashes:
            holders = self._index.get(h)
            if holders is not None:
                holders.pop(id(entry), None)
                if not holders:
                    del self._index[h]
        self.tokens -= len(entry.ids)
