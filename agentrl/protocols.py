"""The extension points of agentrl, as structural protocols.

Implementations match these shapes; they never inherit from them. To extend agentrl:

- a **tool** is a function decorated with `agentrl.tool` (see `agentrl/tool.py`); a stateful group of tools is a
  class whose methods are decorated, with an optional `setup()` run once per tool-server process;
- a **policy backend** implements `Policy`: given prompt token ids, sample one continuation and return its ids,
  sampler logprobs and entropies. Backends batch concurrent requests internally;
- a **scaffold** implements `Scaffold`: it owns tasks, names the toolsets it needs, and turns one task into one
  `Trajectory` by alternating policy calls and tool calls through a `ToolSession`;
- a **reward** is a function of the inputs it names (`task`, `trajectory`, `turn`, ...) returning a float or
  `None` to abstain (see `agentrl/reward.py`).
"""

from __future__ import annotations

import types
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, runtime_checkable

from agentrl.sandbox.result import ExecResult
from agentrl.types import Completion, Task, ToolCall, ToolResult, Trajectory, Turn

if TYPE_CHECKING:
    from agentrl.tool import FunctionTool


@dataclass(frozen=True)
class SamplingParams:
    """How to sample one turn."""

    max_new_tokens: int = 128
    temperature: float = 1.0
    top_p: float = 1.0
    stop: tuple[str, ...] = ()
    """Strings that end generation (kept in the output), in addition to the end-of-turn token."""
    seed: int | None = None


@runtime_checkable
class Policy(Protocol):
    """A sampler over token ids."""

    tokenizer: Any
    """A Hugging Face tokenizer with the policy's chat template."""
    version: int
    """Number of weight updates this policy has seen."""

    async def generate(self, prompt_ids: Sequence[int], params: SamplingParams) -> Completion: ...


@runtime_checkable
class ContinuationScorer(Protocol):
    """A policy that can score given tokens without sampling (teacher forcing); the information-gain reward
    needs it. `TransformersPolicy` implements it."""

    async def score_continuations(
        self, prefixes: Sequence[Sequence[int]], continuations: Sequence[Sequence[int]]
    ) -> list[list[float]]:
        """Per-token log-probabilities of `continuations[i]` after `prefixes[i]`, batched."""
        ...


@runtime_checkable
class ToolSession(Protocol):
    """One episode's handle on the tool server; state (interpreters, files) lives per session."""

    session_id: str

    async def call(self, call: ToolCall) -> ToolResult: ...

    async def fork(self) -> ToolSession: ...

    async def close(self) -> None: ...


@runtime_checkable
class ToolBackend(Protocol):
    """Where tool sessions come from: an HTTP client or the in-process transport."""

    async def schemas(self, names: Sequence[str] | None = None) -> list[dict[str, Any]]: ...

    async def open_session(self, tools: Sequence[str] | None = None) -> ToolSession: ...


ToolsetSpec: TypeAlias = "str | types.ModuleType | type | FunctionTool"
"""What a tool server can serve: a registry name or dotted import path, a module (its module-level tools), a
toolset class (one instance per session), or an `agentrl.tool.FunctionTool`."""


@runtime_checkable
class ForkPoint(Protocol):
    """An episode right after a tool round, before its next policy turn: where ARPO/AEPO branch."""

    @property
    def turns(self) -> tuple[Turn, ...]: ...

    @property
    def trajectory_id(self) -> str: ...

    async def fork(
        self, *, trajectory_id: str, seed: int, on_tool_round: OnToolRound | None = None
    ) -> Awaitable[Trajectory]:
        """Fork the tool session now and return the branch's episode, not started: it shares every token so far
        and samples its own turns from `seed`. Raises an `InfraError` when the session cannot be forked."""
        ...


OnToolRound: TypeAlias = Callable[[ForkPoint], Awaitable[None]]
"""Awaited after every tool round the policy will see, with the point the episode can branch from."""


@runtime_checkable
class Scaffold(Protocol):
    """A multi-turn agent loop with its bundled tasks."""

    name: str

    def tasks(self, split: str) -> Sequence[Task]: ...

    def toolsets(self) -> Sequence[ToolsetSpec]:
        """The toolsets the tool server must serve for this scaffold's episodes."""
        ...

    def reward_names(self) -> Sequence[str]:
        """Default rewards for this scaffold's tasks (registry names or import paths, `name:weight` allowed)."""
        ...

    async def run(
        self,
        task: Task,
        policy: Policy,
        tools: ToolBackend,
        *,
        group_id: str,
        trajectory_id: str,
        seed: int | None = None,
        on_tool_round: OnToolRound | None = None,
    ) -> Trajectory:
        """One episode of `task`. `seed` makes its sampling reproducible (the rollout engine derives one per
        trajectory, so a resumed run draws what an uninterrupted one would); `on_tool_round`, when given, is
        awaited after every tool round with a `ForkPoint` (branching rollouts). Failures of the infrastructure end
        the episode as `StopReason.INFRA_ERROR`; measurements of the environment after the last turn go to
        `Trajectory.measurements`."""
        ...


@runtime_checkable
class Sandbox(Protocol):
    """An isolated place to run untrusted code: a private workspace, a persistent Python interpreter and a
    persistent shell. Backends: `agentrl.sandbox.local.LocalSandbox` (bubblewrap) and
    `agentrl.sandbox.e2b.E2BSandbox`. Failures of the sandbox itself raise `SandboxError`; the code's own
    failures are data in the `ExecResult`."""

    workspace: str
    """The workspace's path as code inside the sandbox sees it."""

    async def run_python(self, code: str, *, timeout_s: float) -> ExecResult: ...

    async def run_shell(self, command: str, *, timeout_s: float) -> ExecResult: ...

    async def exec(self, argv: Sequence[str], *, timeout_s: float, stdin: str | None = None) -> ExecResult: ...

    async def read_file(self, path: str, *, max_bytes: int = 1 << 24) -> str: ...

    async def write_file(self, path: str, text: str) -> None: ...

    async def fork(self) -> Sandbox:
        """A new sandbox with this one's interpreter variables, shell cwd/env and workspace files."""
        ...

    async def close(self) -> None: ...
