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
they cannot pass for zero-reward samples. No score is not a score of 0: when every trajectory-level reward with a
nonzero weight abstains, `Trajectory.reward` stays `None` too, so credit assignment leaves the trajectory out of
every group statistic and of the loss, as it does infrastructure failures, and `component_metrics` counts it
(`reward/abstained`). A turn whose turn-level rewards all abstain keeps `Turn.reward = None` in the same way.

`RewardStack.score_batch` scores a whole step's trajectories one component at a time (each component over all
trajectories concurrently), so each component's cost is its own: the trainer logs `reward_cost/<name>/seconds`,
`reward_cost/<name>/policy_forwards` and the per-step increase of the reward's `stats` counters.

The bookkeeping around scoring lives here too: `component_metrics` (the mean of every component and
measurement), `RewardOutages` (a reward whose every request failed for a step is an infrastructure failure: a
warning, and the run stops after `reward_outage_steps` such steps in a row) and `apply_filters` (the group filters
of `reward_filters=[...]`, such as those in `agentrl.rewards.combinators`, with what each removed).

Anything with an `as_reward()` method (an `agentrl.judge.Judge`, say) can stand wherever a reward can.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agentrl.types import Task, Trajectory, TrajectoryGroup

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

    @property
    def scores_outcomes(self) -> bool:
        """Whether any trajectory-level reward is trained on (weight ≠ 0). Only then can a trajectory abstain: a
        stack of turn-level rewards alone gives every trajectory the outcome 0.0."""
        return any(r.level == "trajectory" and w != 0 for r, w in self.components)

    async def score(self, task: Task, trajectory: Trajectory, *, policy: Any = None) -> Trajectory:
        """Score one trajectory (and its turns); `policy` feeds rewards that probe the model."""
        scored, _ = await self.score_batch([(task, trajectory)], policy=policy)
        return scored[0]

    async def score_batch(
        self, items: Sequence[tuple[Task, Trajectory]], *, policy: Any = None
    ) -> tuple[list[Trajectory], dict[str, float]]:
        """Score many trajectories, one component at a time over all of them (concurrently within a component,
        so model probes and judge calls batch across trajectories); returns them and what each component cost.

        Running components one after another is what makes their cost attributable: per component,
        `reward_cost/<name>/seconds` (wall time of its phase), `reward_cost/<name>/policy_forwards` (batched
        teacher-forced forward passes of `policy`, when it counts them in `score_stats`) and the increase of
        every counter the reward keeps in its `stats` (judge requests, a local PRM's forward passes, probes).
        """
        available = [_inputs(task, t, policy) for task, t in items]
        live = [i for i, (_, t) in enumerate(items) if not t.is_infra_failure]
        components: list[dict[str, float]] = [{} for _ in items]
        totals: list[float | None] = [None if self.scores_outcomes else 0.0] * len(items)
        per_turn: list[list[dict[str, tuple]]] = [[{} for _ in t.turns] for _, t in items]
        costs: dict[str, float] = {}
        for r, w in self.components:
            before = _cost_counters(r, policy)
            started = time.perf_counter()
            values = await asyncio.gather(*(self._values(r, items[i][1], available[i]) for i in live))
            costs[f"reward_cost/{r.name}/seconds"] = time.perf_counter() - started
            after = _cost_counters(r, policy)
            costs.update({f"reward_cost/{r.name}/{k}": after[k] - before.get(k, 0.0) for k in after})
            for i, value in zip(live, values, strict=True):
                if r.level == "trajectory":
                    if value is not None:
                        components[i][r.name] = value
                        if w != 0:  # a metric-only score does not make the trajectory scored
                            totals[i] = (totals[i] or 0.0) + w * value
                    continue
                for k, v in enumerate(value):
                    if v is not None:
                        per_turn[i][k][r.name] = (v, w)
        out = []
        for i, (_, t) in enumerate(items):
            if t.is_infra_failure:
                out.append(t)
                continue
            turns = tuple(_with_turn_reward(turn, values) for turn, values in zip(t.turns, per_turn[i], strict=True))
            out.append(dataclasses.replace(t, reward=totals[i], reward_components=components[i], turns=turns))
        return out, costs

    @staticmethod
    async def _values(r: Reward, trajectory: Trajectory, available: dict[str, Any]) -> Any:
        """A trajectory-level reward's value, or one value (or None) per turn for turn-level rewards."""
        n = len(trajectory.turns)
        if r.level == "trajectory":
            return await r(**available)
        if r.level == "turn":
            return list(
                await asyncio.gather(*(r(**available, turn=t, turn_index=k) for k, t in enumerate(trajectory.turns)))
            )
        value = await r(**available)
        if value is None:
            return [None] * n
        if len(value) != n:
            raise ValueError(f"reward {r.name} returned {len(value)} turn values for {n} turns")
        return value


def _inputs(task: Task, trajectory: Trajectory, policy: Any) -> dict[str, Any]:
    return {
        "task": task,
        "trajectory": trajectory,
        "answer": trajectory.answer,
        "messages": trajectory.messages,
        "tool_results": [r for t in trajectory.turns for r in t.tool_results],
        "policy": policy,
    }


def _cost_counters(r: Reward, policy: Any) -> dict[str, float]:
    """Counters whose increase during a component's phase is its cost: the policy's probe forward passes and
    the numeric fields of the reward's own `stats` (a Judge's or a local PRM's, say)."""
    out: dict[str, float] = {}
    forwards = getattr(getattr(policy, "score_stats", None), "forwards", None)
    if forwards is not None:
        out["policy_forwards"] = float(forwards)
    for k, v in _reward_stats(r).items():
        # a reward's own `seconds` sums its requests' latencies (concurrent ones overlap): kept apart from the
        # phase's wall time, `reward_cost/<name>/seconds`
        out["busy_seconds" if k == "seconds" else k] = v
    return out


def _reward_stats(r: Reward) -> dict[str, float]:
    """The numeric fields of the `stats` dataclass a reward's object keeps (judges, local PRMs), if any."""
    stats = getattr(getattr(r.fn, "__self__", None), "stats", None)
    if not dataclasses.is_dataclass(stats) or isinstance(stats, type):
        return {}
    return {
        k: float(v)
        for k, v in dataclasses.asdict(stats).items()
        if isinstance(v, (int, float)) and not isinstance(v, bool)
    }


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


# --- bookkeeping around scoring ---------------------------------------------------------------------------------

GroupFilter = Callable[[list[TrajectoryGroup]], list[TrajectoryGroup]]
"""A reward filter: scored groups in, the groups (and trajectories) to train on out."""


def component_metrics(groups: Sequence[TrajectoryGroup]) -> dict[str, float]:
    """Mean of every reward component over the trajectories (turns) that did not abstain, and how often each
    was scored: `reward/<name>`, `reward/<name>/scored`; turn components as `reward/turn/<name>`; the number of
    scored trajectories whose weighted rewards all abstained, left out of credit (`reward/abstained`); and the mean
    of every scaffold measurement as `measure/<name>`."""
    values: dict[str, list[float]] = {}
    trajectories = [t for g in groups for t in g.valid]
    turns = [turn for t in trajectories for turn in t.turns]
    out = {"reward/abstained": float(sum(t.reward is None for t in trajectories))}
    for t in trajectories:
        for name, v in t.reward_components.items():
            values.setdefault(f"reward/{name}", []).append(v)
    for turn in turns:
        for name, v in turn.reward_components.items():
            values.setdefault(f"reward/turn/{name}", []).append(v)
    for key, vs in values.items():
        out[key] = sum(vs) / len(vs)
        out[f"{key}/scored"] = len(vs) / max(len(turns) if key.startswith("reward/turn/") else len(trajectories), 1)
    measured: dict[str, list[float]] = {}
    for t in trajectories:
        for name, v in t.measurements.items():
            measured.setdefault(f"measure/{name}", []).append(v)
    out.update({key: sum(vs) / len(vs) for key, vs in measured.items()})
    return out


class RewardOutages:
    """Rewards that failed for a whole step: every request they made failed (a judge whose endpoint is down), so
    every trajectory they scored abstained. That is an infrastructure failure, not a verdict: `check` names it in a
    warning line (and the step's `reward/failed` counts the rewards that failed), and raises `InfraError` once
    one reward has failed `limit` steps in a row (0: never)."""

    def __init__(self, limit: int):
        self.limit = limit
        self.streaks: dict[str, int] = {}

    def check(self, rewards: Sequence[Reward], costs: dict[str, float], step: int) -> str | None:
        """The warning for this step's outages (None when there is none); `costs` gains `reward/failed`."""
        failed = [r for r in rewards if _failed_entirely(r.name, costs)]
        costs["reward/failed"] = float(len(failed))
        self.streaks = {r.name: self.streaks.get(r.name, 0) + 1 for r in failed}
        if not failed:
            return None
        parts = []
        for r in failed:
            requests = int(costs[f"reward_cost/{r.name}/requests"])
            error = getattr(getattr(getattr(r.fn, "__self__", None), "stats", None), "last_error", "") or "no reply"
            parts.append(f"{r.name} scored nothing: {requests} of {requests} requests failed ({error})")
        worst = max(self.streaks.values())
        if self.limit and worst >= self.limit:
            from agentrl.errors import InfraError

            raise InfraError(
                f"reward {'; '.join(parts)}, {worst} steps in a row (reward_outage_steps={self.limit}); check the "
                "reward's endpoint"
            )
        stops = f"the run stops after {self.limit} such steps in a row" if self.limit else "the run goes on"
        return f"warning: step {step}: reward {'; '.join(parts)}; {stops} (reward_outage_steps)"


def _failed_entirely(name: str, costs: dict[str, float]) -> bool:
    requests = costs.get(f"reward_cost/{name}/requests", 0.0)
    return requests > 0 and costs.get(f"reward_cost/{name}/failures", 0.0) >= requests


def apply_filters(
    filters: Sequence[tuple[str, GroupFilter]], groups: list[TrajectoryGroup]
) -> tuple[list[TrajectoryGroup], dict[str, float]]:
    """Apply named filters in order; report the trajectories and groups each one removed."""
    stats: dict[str, float] = {}
    for name, f in filters:
        n_traj, n_groups = sum(len(g.trajectories) for g in groups), len(groups)
        groups = f(groups)
        stats[f"filter/{name}/dropped_trajectories"] = float(n_traj - sum(len(g.trajectories) for g in groups))
        stats[f"filter/{name}/dropped_groups"] = float(n_groups - len(groups))
    return groups, stats
