"""`agentrl bench rollout`: the rollout engine against a batch-synchronous baseline and the ideal lower bound.

The engine measured is the real one: `collect_groups` running `ReactScaffold` episodes. Only the model and the
tools are simulated, and both run on a virtual clock, so the bench measures scheduling rather than this
machine's CPU and finishes in seconds whatever the simulated durations are:

- the policy is a continuous-batching decoder: one decoding step over R live rows costs `step_s + row_s·R`
  virtual seconds and gives every live row one token; a request that arrives mid-generation joins at the next
  step, a row that finishes leaves at once. A turn costs as many steps as it has tokens (its real token ids);
- each tool call takes a lognormal virtual latency (a long tail: a few calls take many times the median).

Every draw is a function of the trajectory's seed, so the baseline and the bound below are computed from the
very turns the engine produced:

- batch-synchronous: turn by turn, all trajectories generate (rows leave the batch as they finish), then all
  run their tools, and the next turn starts when the slowest tool call is back;
- ideal: no schedule can beat the longest trajectory alone on the model (`step_s + row_s` per token plus its
  tool latencies), nor the decoding work itself (`step_s` per step for the longest trajectory's tokens plus
  `row_s` per sampled token).

"Turns" are tool rounds: a trajectory of 3 turns makes 3 tool calls, then answers (4 policy calls).
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import selectors
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from agentrl.tool import tool
from agentrl.types import Completion, ToolCall, ToolResult, Trajectory

TARGETS = {"speedup_vs_sync_at_3_turns": 2.0, "fraction_of_ideal": 0.9}


@dataclass(frozen=True)
class SimConfig:
    """The simulated model and tools (virtual seconds)."""

    step_s: float = 0.010
    """Fixed cost of one decoding step (weights read once per step, whatever the batch)."""
    row_s: float = 0.00005
    """Extra cost of one decoding step per live row."""
    tool_median_s: float = 1.0
    """Median tool latency."""
    tool_sigma: float = 1.0
    """Log-space standard deviation of tool latency (1.0: the slowest of 64 calls is ~10× the median)."""
    reasoning_words_median: float = 24.0
    """Median words of reasoning before each turn's call or answer (lognormal, so turn lengths have a tail)."""
    reasoning_words_sigma: float = 1.0
    """Log-space standard deviation of the reasoning length."""
    max_reasoning_words: int = 400
    """Cap on the reasoning length."""


class VirtualClockLoop(asyncio.SelectorEventLoop):
    """An event loop whose clock jumps to the next timer whenever nothing is ready to run.

    `asyncio.sleep(d)` costs no real time but advances `loop.time()` by `d`, so simulated durations compose
    exactly as real ones would. Real I/O is still polled, without waiting; the simulation must not use threads.
    """

    def __init__(self) -> None:
        self._virtual_now = 0.0
        loop = self

        class _SkipAheadSelector(selectors.DefaultSelector):
            def select(self, timeout: float | None = None):  # type: ignore[override]
                events = super().select(0 if timeout is not None else None)
                if not events and timeout is not None and timeout > 0:
                    loop._virtual_now += timeout
                return events

        super().__init__(selector=_SkipAheadSelector())

    def time(self) -> float:
        return self._virtual_now


@tool
async def sim_tool(key: int) -> str:
    """A simulated tool call.

    Args:
        key: Seeds the call's latency.
    """
    return "ok"


def tool_latency_s(key: int, sim: SimConfig) -> float:
    return random.Random(f"tool/{key}").lognormvariate(math.log(sim.tool_median_s), sim.tool_sigma)


class SimulatedTools:
    """A `ToolBackend` whose one tool sleeps a seeded lognormal latency on the loop's clock."""

    def __init__(self, sim: SimConfig) -> None:
        self.sim = sim

    async def schemas(self, names: Sequence[str] | None = None) -> list[dict[str, Any]]:
        return [sim_tool.schema]

    async def open_session(self, tools: Sequence[str] | None = None) -> _SimulatedSession:
        return _SimulatedSession(self.sim)


class _SimulatedSession:
    session_id = "sim"

    def __init__(self, sim: SimConfig) -> None:
        self.sim = sim

    async def call(self, call: ToolCall) -> ToolResult:
        latency = tool_latency_s(int(call.arguments.get("key", 0)), self.sim)
        await asyncio.sleep(latency)
        return ToolResult(call.id, "ok", elapsed_s=latency)

    async def fork(self) -> _SimulatedSession:
        return _SimulatedSession(self.sim)

    async def close(self) -> None:
        return None


class SimulatedPolicy:
    """A continuous-batching decoder on the loop's clock; it calls `sim_tool` `tool_turns` times, then answers.

    The text of every turn is scripted (seeded by `params.seed`); its token ids are the tokenizer's, and the
    time charged is one decoding step per token, shared with whatever other rows are live at that step.
    """

    def __init__(self, tokenizer: Any, sim: SimConfig, tool_turns: int) -> None:
        self.tokenizer, self.sim, self.tool_turns = tokenizer, sim, tool_turns
        self.version = 0
        self.steps = 0
        self._eos = tokenizer.convert_tokens_to_ids(tokenizer.eos_token)
        self._joining: list[tuple[list[int], asyncio.Future]] = []
        self._worker: asyncio.Task | None = None

    def script(self, prompt_ids: Sequence[int], seed: int) -> str:
        turn = self.tokenizer.decode(list(prompt_ids), skip_special_tokens=False).count("<|im_start|>assistant") - 1
        rng = random.Random(seed)
        words = rng.lognormvariate(math.log(self.sim.reasoning_words_median), self.sim.reasoning_words_sigma)
        filler = " ".join(["so"] * min(int(words), self.sim.max_reasoning_words))
        if turn >= self.tool_turns:
            return f"{filler} done".strip()
        call = json.dumps({"name": "sim_tool", "arguments": {"key": rng.randrange(2**31)}})
        return f"{filler}\n<tool_call>\n{call}\n</tool_call>".lstrip()

    async def generate(self, prompt_ids: Sequence[int], params: Any) -> Completion:
        text = self.script(prompt_ids, params.seed if params.seed is not None else 0)
        ids = list(self.tokenizer(text, add_special_tokens=False)["input_ids"])[: params.max_new_tokens - 1]
        ids.append(self._eos)
        future = asyncio.get_running_loop().create_future()
        self._joining.append((ids, future))
        if self._worker is None or self._worker.done():
            self._worker = asyncio.get_running_loop().create_task(self._decode())
        await future
        n = len(ids)
        out = self.tokenizer.decode(ids[:-1], skip_special_tokens=False)
        return Completion(tuple(ids), (-0.5,) * n, (1.0,) * n, out, "stop")

    async def _decode(self) -> None:
        live: list[list[Any]] = []  # [tokens left, future]
        while live or self._joining:
            live += [[len(ids), future] for ids, future in self._joining]
            self._joining = []
            await asyncio.sleep(self.sim.step_s + self.sim.row_s * len(live))
            self.steps += 1
            for row in live:
                row[0] -= 1
                if row[0] == 0:
                    row[1].set_result(None)
            live = [row for row in live if row[0] > 0]


def turn_costs(trajectories: Sequence[Trajectory]) -> list[list[tuple[int, float]]]:
    """Per trajectory, per policy call: (tokens sampled, latency of the slowest tool call that followed)."""
    return [
        [(len(t.completion_ids), max((r.elapsed_s for r in t.tool_results), default=0.0)) for t in traj.turns]
        for traj in trajectories
    ]


def synchronous_s(costs: list[list[tuple[int, float]]], sim: SimConfig) -> float:
    """Turn by turn: everyone generates (rows leave as they finish), then everyone's tools run."""
    total = 0.0
    for k in range(max(len(c) for c in costs)):
        tokens = [c[k][0] for c in costs if len(c) > k]
        for step in range(1, max(tokens) + 1):
            total += sim.step_s + sim.row_s * sum(n >= step for n in tokens)
        total += max(c[k][1] for c in costs if len(c) > k)
    return total


def ideal_s(costs: list[list[tuple[int, float]]], sim: SimConfig) -> float:
    """A lower bound on any schedule: the longest trajectory alone, or the decoding work itself."""
    alone = max(sum(n * (sim.step_s + sim.row_s) + tool for n, tool in c) for c in costs)
    work = sim.step_s * max(sum(n for n, _ in c) for c in costs) + sim.row_s * sum(n for c in costs for n, _ in c)
    return max(alone, work)


def bench_turns(tool_turns: int, *, tasks: int, samples: int, sim: SimConfig, tokenizer: Any, seed: int = 0):
    """Run the engine for one turn count on a fresh virtual clock; return its row of the table."""
    from agentrl.config import RolloutConfig
    from agentrl.rollout.collect import collect_groups
    from agentrl.scaffolds.react import ReactScaffold
    from agentrl.types import Task

    rollout = RolloutConfig(
        max_turns=tool_turns + 1,
        max_new_tokens_per_turn=1024,
        max_tokens_per_episode=1 << 16,
        samples_per_prompt=samples,
    )
    scaffold = ReactScaffold(tools=[sim_tool], rollout=rollout)
    policy = SimulatedPolicy(tokenizer, sim, tool_turns)
    task_list = [Task(id=f"sim/{i}", prompt=f"Simulated task {i}.") for i in range(tasks)]
    loop = VirtualClockLoop()
    try:
        groups = loop.run_until_complete(
            collect_groups(
                scaffold, task_list, policy, SimulatedTools(sim), samples_per_prompt=samples, step=1, seed=seed
            )
        )
        engine = loop.time()
    finally:
        loop.close()
    trajectories = [t for g in groups for t in g.trajectories]
    failed = [t.error for t in trajectories if t.is_infra_failure]
    if failed:
        raise RuntimeError(f"simulated rollout failed: {failed[0]}")
    costs = turn_costs(trajectories)
    sync, ideal = synchronous_s(costs, sim), ideal_s(costs, sim)
    return {
        "turns": tool_turns,
        "trajectories": len(trajectories),
        "engine_s": round(engine, 3),
        "synchronous_s": round(sync, 3),
        "ideal_s": round(ideal, 3),
        "speedup_vs_sync": round(sync / engine, 3),
        "fraction_of_ideal": round(ideal / engine, 3),
        "decode_steps": policy.steps,
        "sampled_tokens": sum(t.num_sampled_tokens for t in trajectories),
    }


def run_benchmark(
    turns: Sequence[int] = (1, 3, 8), *, tasks: int = 16, samples: int = 8, sim: SimConfig | None = None
) -> dict[str, Any]:
    from agentrl.policy import resolve_model_path
    from agentrl.policy.loading import load_tokenizer

    sim = sim or SimConfig()
    tokenizer = load_tokenizer(resolve_model_path("tiny"))
    rows = [bench_turns(k, tasks=tasks, samples=samples, sim=sim, tokenizer=tokenizer) for k in turns]
    at3 = next((r for r in rows if r["turns"] == 3), None)
    return {
        "clock": "virtual",
        "sim": asdict(sim),
        "rows": rows,
        "targets": TARGETS,
        "meets_targets": {
            "speedup_vs_sync_at_3_turns": None if at3 is None else at3["speedup_vs_sync"] >= 2.0,
            "fraction_of_ideal": all(r["fraction_of_ideal"] >= 0.9 for r in rows),
        },
    }


def format_table(result: dict[str, Any]) -> str:
    head = f"{'turns':>5} {'trajs':>5} {'engine s':>9} {'sync s':>9} {'ideal s':>9} {'vs sync':>8} {'of ideal':>8}"
    lines = [head]
    for r in result["rows"]:
        lines.append(
            f"{r['turns']:>5} {r['trajectories']:>5} {r['engine_s']:>9.2f} {r['synchronous_s']:>9.2f} "
            f"{r['ideal_s']:>9.2f} {r['speedup_vs_sync']:>7.2f}x {r['fraction_of_ideal']:>8.1%}"
        )
    return "\n".join(lines)
