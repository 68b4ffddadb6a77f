"""A mixture of scaffolds: `code+search` trains on the tasks of both, each task run by its own scaffold."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from typing import Any

from agentrl.types import Task, Trajectory


class MixScaffold:
    """Interleaves the tasks of several scaffolds and routes each task back to the scaffold that owns it."""

    def __init__(self, scaffolds: Sequence[Any]):
        self.scaffolds = {s.name: s for s in scaffolds}
        self.name = "+".join(self.scaffolds)
        self._cache: dict[str, tuple[Task, ...]] = {}

    def tasks(self, split: str) -> Sequence[Task]:
        if split not in self._cache:
            per = [
                [dataclasses.replace(t, scaffold=name) for t in s.tasks(split)] for name, s in self.scaffolds.items()
            ]
            mixed = (t for group in itertools.zip_longest(*per) for t in group if t is not None)
            self._cache[split] = tuple(mixed)
        return self._cache[split]

    def toolsets(self) -> Sequence[Any]:
        seen, out = set(), []
        for s in self.scaffolds.values():
            for t in s.toolsets():
                if id(t) not in seen:
                    seen.add(id(t))
                    out.append(t)
        return out

    def reward_names(self) -> Sequence[str]:
        return tuple(dict.fromkeys(r for s in self.scaffolds.values() for r in s.reward_names()))

    async def run(self, task: Task, policy: Any, tools: Any, **kwargs: Any) -> Trajectory:
        if task.scaffold not in self.scaffolds:
            raise KeyError(f"task {task.id} belongs to no scaffold of {self.name}")
        return await self.scaffolds[task.scaffold].run(task, policy, tools, **kwargs)
