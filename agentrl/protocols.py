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

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from agentrl.sandbox.result import ExecResult
from agentrl.types import Completion, Task, ToolCall, ToolResult, Trajectory


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


@runtime_checkable
class Scaffold(Protocol):
    """A multi-turn agent loop with its bundled tasks."""

    name: str

    def tasks(self, split: str) -> Sequence[Task]: ...

    def toolsets(self) -> Sequence[str]:
        """Dotted paths (or registry names) of the toolsets the tool server must serve."""
        ...

    def reward_names(self) -> Sequence[str]:
        """Default rewards for this scaffold's tasks."""
        ...

    async def run(
        self, task: Task, policy: Policy, tools: ToolBackend, *, group_id: str, trajectory_id: str
    ) -> Trajectory: ...


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
