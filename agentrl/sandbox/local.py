"""`LocalSandbox`: one session's handle on a bubblewrap sandbox: a long-lived worker over a unix socket.

Calls of one session run one at a time. Each call has a timer inside the worker (Python code gets a
`CallTimeout` at the call timeout; a shell command's process group is killed and bash restarts in its last
cwd). A worker that is still busy `kill_grace_s` after that is killed with its whole process tree from the
host: the interpreter's variables and the shell's state are lost, the workspace files are kept, and the next
call starts a new sandbox on the same workspace. A worker that dies (killed, crashed, out of memory) makes its
call a `SandboxError` and is replaced the same way on the next call.

Fork: the worker double-forks inside its sandbox, so the copy has the same interpreter memory (variables,
imports, open files), while the server copies the workspace (`cp -a`) and the copy binds it over its own
`/workspace`; the shell's cwd, exported variables and functions are replayed into a new bash. Limits of this
mechanism:

- a session and its forks share one sandbox (pid namespace, uid, RLIMIT_NPROC): each sees its own
  `/workspace`, but code that goes looking through `/proc` can reach the others' processes and files. Sessions
  that are not forks of each other are fully isolated;
- threads other than the one running the call, sockets and other kernel objects are not duplicated faithfully
  by `fork()`; background processes started by the original (and non-exported shell variables) are not copied;
- a forked session that restarts after a timeout or crash moves to a sandbox of its own.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import uuid
from pathlib import Path
from typing import Any

from agentrl.errors import SandboxError, ToolError
from agentrl.sandbox.bwrap import BwrapBackend, Family
from agentrl.sandbox.channel import ChannelClosed, WorkerChannel
from agentrl.sandbox.processes import kill_tree, wait_gone
from agentrl.sandbox.result import ExecResult

_LOST = "the interpreter's variables and the shell's cwd and environment were lost; workspace files are kept"


class LocalSandbox:
    """A session's sandbox on this host (see the module docstring)."""

    workspace = "/workspace"

    def __init__(self, backend: BwrapBackend, *, network: bool = False) -> None:
        self.backend = backend
        self.network = network
        self.restarts = 0
        self._family: Family | None = None
        self._name: str | None = None
        self._channel: WorkerChannel | None = None
        self.pid: int | None = None
        """The session worker's host pid (None while no worker runs)."""
        self._lock = asyncio.Lock()
        self._closed = False

    @classmethod
    async def start(cls, backend: BwrapBackend, *, network: bool = False) -> LocalSandbox:
        sandbox = cls(backend, network=network)
        async with sandbox._lock:
            await sandbox._ensure_worker()
        return sandbox

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def host_workspace(self) -> Path | None:
        """Where this session's workspace lives on the host."""
        return None if self._family is None else self._family.dir / self._name

    async def run_python(self, code: str, *, timeout_s: float) -> ExecResult:
        return await self._exec({"op": "python", "code": code, "timeout_s": timeout_s}, timeout_s)

    async def run_shell(self, command: str, *, timeout_s: float) -> ExecResult:
        return await self._exec({"op": "shell", "command": command, "timeout_s": timeout_s}, timeout_s)

    async def exec(self, argv: list[str], *, timeout_s: float, stdin: str | None = None) -> ExecResult:
        message = {"op": "exec", "argv": list(argv), "timeout_s": timeout_s, "stdin": stdin}
        return await self._exec(message, timeout_s)

    async def read_file(self, path: str, *, max_bytes: int = 1 << 24) -> str:
        reply = await self._request({"op": "read", "path": path, "max_bytes": max_bytes}, 30.0)
        if reply is None:
            raise SandboxError("reading the file timed out")
        _raise_on_error(reply)
        return reply["data"]

    async def write_file(self, path: str, text: str) -> None:
        reply = await self._request({"op": "write", "path": path, "data": text}, 30.0)
        if reply is None:
            raise SandboxError("writing the file timed out")
        _raise_on_error(reply)

    async def fork(self) -> LocalSandbox:
        """A new session in this sandbox with a copy of this one's interpreter, shell state and workspace."""
        async with self._lock:
            await self._ensure_worker()
            assert self._family is not None and self._channel is not None
            name = uuid.uuid4().hex
            copied = await asyncio.create_subprocess_exec(
                "cp", "-a", "--reflink=auto", str(self.host_workspace), str(self._family.dir / name)
            )
            if await copied.wait() != 0:
                raise SandboxError("copying the workspace for the fork failed")
            self._family.members.add(name)
            ours, theirs = socket.socketpair()
            child = LocalSandbox(self.backend, network=self.network)
            child._family, child._name = self._family, name
            try:
                reply = await asyncio.wait_for(
                    self._channel.request({"op": "fork", "workspace": name}, fds=[theirs.fileno()]), 30.0
                )
                theirs.close()
                _raise_on_error(reply)
                child._channel = WorkerChannel(ours)
                _, child.pid = await asyncio.wait_for(child._channel.hello(), 30.0)
            except (OSError, TimeoutError, SandboxError) as exc:
                theirs.close()
                ours.close()
                await self.backend.leave(self._family, name)
                await self._kill_worker()
                raise SandboxError(f"fork failed: {exc}") from exc
            return child

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        async with self._lock:
            await self._kill_worker(keep_workspace=False)

    async def _exec(self, message: dict[str, Any], timeout_s: float) -> ExecResult:
        reply = await self._request(message, timeout_s)
        if reply is None:
            return ExecResult(exit_code=None, timed_out=True, state_lost=_LOST)
        _raise_on_error(reply)
        return ExecResult(
            stdout=reply.get("stdout", ""),
            stderr=reply.get("stderr", ""),
            exit_code=reply.get("exit_code"),
            value=reply.get("value"),
            timed_out=bool(reply.get("timed_out")),
            truncated_bytes=int(reply.get("truncated_bytes", 0)),
            cwd=reply.get("cwd"),
        )

    async def _request(self, message: dict[str, Any], timeout_s: float) -> dict[str, Any] | None:
        """The worker's reply, or None when the worker had to be killed for running past its timeout."""
        async with self._lock:
            if self._closed:
                raise SandboxError("the sandbox is closed")
            await self._ensure_worker()
            assert self._channel is not None
            try:
                return await asyncio.wait_for(
                    self._channel.request(message), timeout_s + self.backend.config.kill_grace_s
                )
            except TimeoutError:
                await self._kill_worker()
                return None
            except ChannelClosed as exc:
                await self._kill_worker()
                raise SandboxError(f"the sandbox worker died ({exc}); the next call starts a new one") from exc
            except asyncio.CancelledError:
                # The reply would arrive on a channel nobody reads in step any more: start over.
                await asyncio.shield(self._kill_worker())
                raise

    async def _ensure_worker(self) -> None:
        if self._channel is not None:
            return
        if self._closed:
            raise SandboxError("the sandbox is closed")
        workspace = self.host_workspace
        self._family, self._name, self._channel, self.pid = await self.backend.start_family(self.network, workspace)
        self.restarts += workspace is not None

    async def _kill_worker(self, *, keep_workspace: bool = True) -> None:
        """Kill this session's worker and its processes; its workspace stays for the next worker."""
        if self._channel is not None:
            self._channel.close()
            self._channel = None
        if self.pid is not None:
            await wait_gone(kill_tree(self.pid))
            self.pid = None
        if self._family is None or self._name is None:
            return
        family, name = self._family, self._name
        if isinstance(family, _Detached):
            if not keep_workspace:
                await asyncio.to_thread(shutil.rmtree, family.dir / name, True)
                self._family = None
            return
        if keep_workspace:
            # The sandbox ends with its last member, its directory too: park the workspace where the next
            # worker's sandbox takes it from (see start_family).
            parked = self.backend.root / "parked"
            parked.mkdir(exist_ok=True)
            await asyncio.to_thread(os.rename, family.dir / name, parked / name)
            await self.backend.leave(family, name, keep_workspace=True)
            self._family = _Detached(parked)
        else:
            await self.backend.leave(family, name)
            self._family = None


class _Detached(Family):
    """Stands in for the sandbox a killed worker left: only its directory, which still holds the workspace."""

    def __init__(self, directory: Path) -> None:  # noqa: D107 - a placeholder, not a sandbox
        self.dir = directory
        self.uid = None
        self.members = set()


def _raise_on_error(reply: dict[str, Any]) -> None:
    if "error" in reply:
        raise (ToolError if reply.get("user_error") else SandboxError)(reply["error"])
