"""`SandboxProvider`: starts sandboxes with the configured backend and ends every one of them at shutdown."""

from __future__ import annotations

import shutil
from typing import Any

from agentrl.errors import ConfigError, SandboxError
from agentrl.sandbox.config import SandboxConfig
from agentrl.sandbox.result import ExecResult

BACKENDS = ("local", "e2b")


class SandboxProvider:
    """One per tool-server process: the backend's shared state (workspace root, uids) lives here."""

    def __init__(self, config: SandboxConfig | None = None) -> None:
        self.config = config or SandboxConfig()
        if self.config.backend not in BACKENDS:
            raise ConfigError(f"unknown sandbox backend {self.config.backend!r}; choose one of {', '.join(BACKENDS)}")
        self._bwrap: Any = None
        self._open: set[Any] = set()

    @property
    def active(self) -> int:
        """Sandboxes started and not yet closed (forks included)."""
        self._open = {s for s in self._open if not getattr(s, "closed", False)}
        return len(self._open)

    def check(self) -> None:
        """Raise `SandboxError` now if the backend cannot start sandboxes at all (so a session fails when it
        opens, with the reason, instead of on its first call)."""
        if self.config.backend == "e2b":
            from agentrl.sandbox.e2b import require_api_key

            require_api_key()
        elif shutil.which("bwrap") is None:
            raise SandboxError("bubblewrap (`bwrap`) is not installed: install the Debian package `bubblewrap`")

    async def start(self, *, network: bool = False) -> Any:
        """A new sandbox with an empty workspace; raises `SandboxError` when the backend cannot start one."""
        if network and not self.config.allow_network:
            raise SandboxError("this tool server does not allow network access in sandboxes")
        if self.config.backend == "e2b":
            from agentrl.sandbox.e2b import E2BSandbox

            sandbox = await E2BSandbox.start(self.config, network=network)
        else:
            from agentrl.sandbox.local import LocalSandbox

            sandbox = await LocalSandbox.start(self._local_backend(), network=network)
        self.track(sandbox)
        return sandbox

    def track(self, sandbox: Any) -> None:
        """Count a sandbox made by forking one of ours."""
        self._open.add(sandbox)

    async def run_once(self, code: str, *, timeout_s: float) -> ExecResult:
        """Run `python3 -c code` in a sandbox started for this call alone (the per-call-process baseline)."""
        return await self._local_backend().run_once(code, timeout_s)

    async def close(self) -> None:
        """Kill every sandbox this provider started and remove their workspaces."""
        for sandbox in list(self._open):
            try:
                await sandbox.close()
            except Exception:  # noqa: BLE001 - shutting down: keep closing the others
                pass
        self._open.clear()
        if self._bwrap is not None:
            await self._bwrap.close_all()

    def _local_backend(self) -> Any:
        if self._bwrap is None:
            from agentrl.sandbox.bwrap import BwrapBackend

            self._bwrap = BwrapBackend(self.config)
        return self._bwrap
