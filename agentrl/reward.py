"""Rewards and the reward stack.

A reward is a plain function (sync or async) of the inputs it names, returning a float or `None` to abstain:

    @reward
    def exact_match(task, answer) -> float | None: ...

Inputs a reward may name: `task`, `trajectory`, `answer` (the extracted final answer), `messages`,
`tool_results` (all results in order); turn-level rewards (`@reward(level="turn")`) also get `turn` and
`turn_index` and are called once per turn. The stack sums trajectory-level rewards with their weights into
`Trajectory.reward` and turn-level ones into `Turn.reward`; every component is kept in `reward_components`,
and weight 0 keeps a reward as a metric only. Trajectories that failed for infrastructure reasons are never
scored: their reward stays `None` so they cannot pass for zero-reward samples.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agentrl.types import Task, Trajectory

TRAJECTORY_INPUTS = frozenset({"task", "trajectory", "answer", "messages", "tool_results"})
TURN_INPUTS = TRAJECTORY_INPUTS | {"turn", "turn_index"}


@dataclass(frozen=True)
class Reward:
    """A reward function with the inputs it asks for."""

    fn: Callable[..., Any]
    name: str
    level: str = "trajectory"
    inputs: tuple[str, ...] = ()

    async def __call__(self, **available: Any) -> float | None:
        value = self.fn(**{k: available[k] for k in self.inputs})
        if inspect.isawaitable(value):
            value = await value
        return None if value is None else float(value)


def reward(fn: Callable[..., Any] | None = None, *, name: str | None = None, level: str = "trajectory"):
    """Declare a reward function; its parameter names say which inputs it receives."""

    def wrap(f: Callable[..., Any]) -> Reward:
        allowed = TURN_INPUTS if level == "turn" else TRAJECTORY_INPUTS
        if level not in ("trajectory", "turn"):
            raise ValueError(f"reward level must be 'trajectory' or 'turn', not {level!r}")
        params = tuple(inspect.signature(f).parameters)
        unknown = [p for p in params if p not in allowed]
        if unknown:
            raise TypeError(f"reward {f.__name__} asks for unknown input(s) {unknown}; available: {sorted(allowed)}")
        return Reward(fn=f, name=name or f.__name__, level=level, inputs=params)

    return wrap(fn) if fn is not None else wrap


def _as_reward(obj: Any) -> Reward:
    if isinstance(obj, Reward):
        return obj
    if callable(obj):
        return reward(obj)
    raise TypeError(f"{obj!r} is not a reward")


class RewardStack:
    """Weighted rewards applied to trajectories (and their turns)."""

    def __init__(self, components: Sequence[tuple[Reward, float]]):
        self.components = [(_as_reward(r), float(w)) for r, w in components]

    @classmethod
    def from_specs(cls, specs: Sequence[str]) -> RewardStack:
        """Build from `name` or `name:weight` strings (names from the registry, or import paths)."""
        from agentrl.registry import resolve

        components = []
        for spec in specs:
            name, _, weight = spec.rpartition(":") if _has_weight(spec) else (spec, "", "1")
            components.append((_as_reward(resolve("reward", name)), float(weight)))
        return cls(components)

    @property
    def names(self) -> list[str]:
        return [r.name for r, _ in self.components]

    async def score(self, task: Task, trajectory: Trajectory) -> Trajectory:
        if trajectory.is_infra_failure:
            return trajectory
        available = {
            "task": task,
            "trajectory": trajectory,
            "answer": trajectory.answer,
            "messages": trajectory.messages,
            "tool_results": [r for t in trajectory.turns for r in t.tool_results],
        }
        components: dict[str, float] = {}
        total = 0.0
        for r, w in self.components:
            if r.level == "trajectory" and (value := await r(**available)) is not None:
                components[r.name] = value
                total += w * value
        turns = [await self._score_turn(turn, k, available) for k, turn in enumerate(trajectory.turns)]
        return dataclasses.replace(trajectory, reward=total, reward_components=components, turns=tuple(turns))

    async def _score_turn(self, turn: Any, index: int, available: dict[str, Any]) -> Any:
        turn_rewards = [(r, w) for r, w in self.components if r.level == "turn"]
        if not turn_rewards:
            return turn
        values = await asyncio.gather(*(r(**available, turn=turn, turn_index=index) for r, _ in turn_rewards))
        components = {r.name: v for (r, _), v in zip(turn_rewards, values) if v is not None}
        if not components:
            return turn
        total = sum(w * components[r.name] for r, w in turn_rewards if r.name in components)
        return dataclasses.replace(turn, reward=total, reward_components=components)


def _has_weight(spec: str) -> bool:
    head, sep, tail = spec.rpartition(":")
    if not sep:
        return False
    try:
        float(tail)
    except ValueError:
        return False
    return bool(head)
