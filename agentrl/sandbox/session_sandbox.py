"""`SessionSandbox`: a tool-server session's sandbox, started on its first use.

Sessions that never run code (a search-only episode) cost no sandbox. Forking a session whose sandbox has not
started yet gives another unstarted one: both are the same empty state.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from agentrl.errors import SandboxError
from agentrl.sandbox.config import SandboxConfig
from agentrl.sandbox.provider import SandboxProvider
from agentrl.sandbox.result import ExecResult


class SessionSandbox:
    """Implements `agentrl.protocols.Sandbox` by delegating to a sandbox it starts when first needed."""

    workspace = "/workspace"

    def __init__(self, provider: SandboxProvider, *, network: bool = False, inner: Any = None) -> None:
        self.provider = provider
        self.network = network
        self._inner = inner
        self._lock = asyncio.Lock()
        self.closed = False

    @property
    def config(self) -> SandboxConfig:
        return self.provider.config

    @property
    def started(self) -> bool:
        return self._inner is not None

    async def run_python(self, code: str, *, timeout_s: float | None = None) -> ExecResult:
        return await (await self._get()).run_python(code, timeout_s=self._timeout(timeout_s))

    async def run_shell(self, command: str, *, timeout_s: float | None = None) -> ExecResult:
        return await (await self._get()).run_shell(command, timeout_s=self._timeout(timeout_s))

    async def exec(
        self, argv: Sequence[str], *, timeout_s: float | None = None, stdin: str | None = None
    ) -> ExecResult:
        return await (await self._get()).exec(list(argv), timeout_s=self._timeout(timeout_s), stdin=stdin)

    async def read_file(self, path: str, *, max_bytes: int = 1 << 24) -> str:
        return await (await self._get()).read_file(path, max_bytes=max_bytes)

    async def write_file(self, path: str, text: str) -> None:
        await (await self._get()).write_file(path, text)

    async def fork(self) -> SessionSandbox:
        async with self._lock:
            if self._inner is None:
                return SessionSandbox(self.provider, network=self.network)
            inner = await self._inner.fork()
        self.provider.track(inner)
        return SessionSandbox(self.provider, network=self.network, inner=inner)

    async def close(self) -> None:
        self.closed = True
        async with self._lock:
            inner, self._inner = self._inner, None
        if inner is not None:
            await inner.close()

    async def _get(self) -> Any:
        if self._inner is not None:
            return self._inner
        async with self._lock:
            if self.closed:
                raise SandboxError("the session's sandbox is closed")
            if self._inner is None:
                self._inner = await self.provider.start(network=self.network)
            return self._inner

    def _timeout(self, timeout_s: float | None) -> float:
        return self.config.call_timeout_s if timeout_s is None else min(timeout_s, self.config.call_timeout_s)
