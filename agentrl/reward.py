"""Rewards and the reward stack.

A reward is a plain function (sync or async) of the inputs it names, returning a float or `None` to abstain:

    @reward
    def exact_match(task, answer) -> float | None: ...

Inputs a reward may name: `task`, `trajectory`, `answer` (the extracted final answer), `messages`,
`tool_results` (all results in order), `policy` (the policy being trained, or None when the stack was given
none: rewards that probe the model abstain then); turn-level rewards (`@reward(level="turn")`) also get `turn`
and `turn_index` and are called once per turn, concurrently. A `level="turns"` reward is called once per
trajectory and returns one value (or None) per turn, so it can batch work over the turns (the information-gain
probe does). The stack sums trajectory-level rewards with their weights into `Trajectory.reward` and turn-level
ones into `Turn.reward`; every component is kept in `reward_components`, and weight 0 keeps a reward as a
metric only. Trajectories that failed for infrastructure reasons are never scored: their reward stays `None` so
they cannot pass for zero-reward samples.

Anything with an `as_reward()` method (an `agentrl.judge.Judge`, say) can stand wherever a reward can.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agentrl.types import Task, Trajectory

TRAJECTORY_INPUTS = frozenset({"task", "trajectory", "answer", "messages", "tool_results", "policy"})
LEVELS = ("trajectory", "turn", "turns")
TURN_INPUTS = TRAJECTORY_INPUTS | {"turn", "turn_index"}


@dataclass(frozen=True)
class Reward:
    """A reward function with the inputs it asks for."""

    fn: Callable[..., Any]
    name: str
    level: str = "trajectory"
    inputs: tuple[str, ...] = ()

    async def __call__(self, **available: Any) -> Any:
        """The reward's value: a float or None; for `level="turns"`, a list with one per turn."""
        value = self.fn(**{k: available[k] for k in self.inputs})
        if inspect.isawaitable(value):
            value = await value
        if self.level == "turns":
            return None if value is None else [None if v is None else float(v) for v in value]
        return None if value is None else float(value)


def reward(fn: Callable[..., Any] | None = None, *, name: str | None = None, level: str = "trajectory"):
    """Declare a reward function; its parameter names say which inputs it receives."""

    def wrap(f: Callable[..., Any]) -> Reward:
        allowed = TURN_INPUTS if level == "turn" else TRAJECTORY_INPUTS
        if level not in LEVELS:
            raise ValueError(f"reward level must be one of {LEVELS}, not {level!r}")
        params = tuple(inspect.signature(f).parameters)
        unknown = [p for p in params if p not in allowed]
        if unknown:
            raise TypeError(f"reward {f.__name__} asks for unknown input(s) {unknown}; available: {sorted(allowed)}")
        return Reward(fn=f, name=name or f.__name__, level=level, inputs=params)

    return wrap(fn) if fn is not None else wrap


def _as_reward(obj: Any) -> Reward:
    if isinstance(obj, Reward):
        return obj
    if hasattr(obj, "as_reward"):
        return obj.as_reward()
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

    async def score(self, task: Task, trajectory: Trajectory, *, policy: Any = None) -> Trajectory:
        """Score one trajectory (and its turns); `policy` feeds rewards that probe the model."""
        if trajectory.is_infra_failure:
            return trajectory
        available = {
            "task": task,
            "trajectory": trajectory,
            "answer": trajectory.answer,
            "messages": trajectory.messages,
            "tool_results": [r for t in trajectory.turns for r in t.tool_results],
            "policy": policy,
        }
        components: dict[str, float] = {}
        total = 0.0
        for r, w in self.components:
            if r.level == "trajectory" and (value := await r(**available)) is not None:
                components[r.name] = value
                total += w * value
        per_turn = await self._turn_values(trajectory, available)
        turns = tuple(_with_turn_reward(turn, values) for turn, values in zip(trajectory.turns, per_turn, strict=True))
        return dataclasses.replace(trajectory, reward=total, reward_components=components, turns=turns)

    async def _turn_values(self, trajectory: Trajectory, available: dict[str, Any]) -> list[dict[str, tuple]]:
        """For each turn, {reward name: (value, weight)} over the turn-level rewards that did not abstain."""
        n = len(trajectory.turns)
        per_turn: list[dict[str, tuple]] = [{} for _ in range(n)]
        calls, owners = [], []
        for r, w in self.components:
            if r.level == "turn":
                calls += [r(**available, turn=turn, turn_index=k) for k, turn in enumerate(trajectory.turns)]
                owners += [(r, w, k) for k in range(n)]
            elif r.level == "turns":
                calls.append(r(**available))
                owners.append((r, w, None))
        for (r, w, k), value in zip(owners, await asyncio.gather(*calls), strict=True):
            if k is not None:
                value = [None] * k + [value] + [None] * (n - k - 1)
            elif value is None:
                continue
            elif len(value) != n:
                raise ValueError(f"reward {r.name} returned {len(value)} turn values for {n} turns")
            for j, v in enumerate(value):
                if v is not None:
                    per_turn[j][r.name] = (v, w)
        return per_turn


def _with_turn_reward(turn: Any, values: dict[str, tuple]) -> Any:
    if not values:
        return turn
    total = sum(v * w for v, w in values.values())
    return dataclasses.replace(turn, reward=total, reward_components={k: v for k, (v, _) in values.items()})


def _has_weight(spec: str) -> bool:
    head, sep, tail = spec.rpartition(":")
    if not sep:
        return False
    try:
        float(tail)
    except ValueError:
        return False
    return bool(head)
