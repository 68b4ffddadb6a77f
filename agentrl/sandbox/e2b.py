"""`E2BSandbox`: a session's sandbox on e2b's service (e2b-code-interpreter), for when code must not run here.

The interpreter is the service's Jupyter kernel, so variables persist between calls. The shell is emulated:
each command runs in a fresh bash that first sources the state the previous command saved (exported
variables, functions, cwd) and saves it again afterwards, so cwd and environment persist as in a terminal.
Fork uses e2b's own fork, which snapshots the whole VM (memory included): the copy has the same kernel
variables, files and shell state. Starting a session without `E2B_API_KEY` raises `SandboxError` with what to
do; nothing falls back to running code on this host.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from typing import Any

from agentrl.errors import SandboxError, ToolError
from agentrl.sandbox.config import SandboxConfig
from agentrl.sandbox.result import ExecResult

_STATE = "/tmp/.agentrl_shell_state"


def require_api_key() -> None:
    """Raise `SandboxError` unless E2B_API_KEY is set (checked when a session opens, before any sandbox)."""
    if not os.environ.get("E2B_API_KEY"):
        raise SandboxError(
            "the e2b sandbox backend needs E2B_API_KEY in the tool server's environment "
            "(get a key at e2b.dev), or use sandbox.backend=local"
        )


class E2BSandbox:
    """One e2b sandbox (a microVM on the service)."""

    workspace = "/home/user"

    def __init__(self, sandbox: Any, config: SandboxConfig) -> None:
        self._sandbox = sandbox
        self.config = config
        self.closed = False

    @classmethod
    async def start(cls, config: SandboxConfig, *, network: bool = False) -> E2BSandbox:
        require_api_key()
        try:
            from e2b_code_interpreter import AsyncSandbox
        except ImportError as exc:  # pragma: no cover - a core dependency
            raise SandboxError(f"e2b-code-interpreter is not installed: {exc}") from exc
        try:
            sandbox = await AsyncSandbox.create(template=config.e2b_template, allow_internet_access=network)
        except Exception as exc:  # noqa: BLE001 - any service failure is a sandbox failure
            raise SandboxError(f"e2b could not start a sandbox: {type(exc).__name__}: {exc}") from exc
        return cls(sandbox, config)

    async def run_python(self, code: str, *, timeout_s: float) -> ExecResult:
        try:
            execution = await self._sandbox.run_code(code, timeout=timeout_s)
        except Exception as exc:  # noqa: BLE001
            if _is_timeout(exc):
                return ExecResult(exit_code=None, timed_out=True)
            raise SandboxError(f"e2b run_code failed: {type(exc).__name__}: {exc}") from exc
        stdout, dropped_out = self._cut("".join(execution.logs.stdout))
        stderr = "".join(execution.logs.stderr)
        if execution.error is not None:
            stderr += execution.error.traceback or f"{execution.error.name}: {execution.error.value}"
        stderr, dropped_err = self._cut(stderr)
        return ExecResult(
            stdout=stdout,
            stderr=stderr,
            exit_code=1 if execution.error is not None else 0,
            value=execution.text,
            truncated_bytes=dropped_out + dropped_err,
        )

    async def run_shell(self, command: str, *, timeout_s: float) -> ExecResult:
        script = (
            f". {_STATE} 2>/dev/null\n{command}\n__agentrl_status=$?\n"
            f"{{ export -p; declare -f; printf 'cd %q\\n' \"$PWD\"; }} > {_STATE}\n"
            'printf "\\n%s" "$PWD" >&2\nexit $__agentrl_status'
        )
        result = await self._run(["bash", "-c", script], timeout_s, None)
        stderr, _, cwd = result.stderr.rpartition("\n")
        return ExecResult(
            stdout=result.stdout,
            stderr=stderr,
            exit_code=result.exit_code,
            timed_out=result.timed_out,
            truncated_bytes=result.truncated_bytes,
            cwd=cwd or None,
        )

    async def exec(self, argv: Sequence[str], *, timeout_s: float, stdin: str | None = None) -> ExecResult:
        return await self._run(list(argv), timeout_s, stdin)

    async def read_file(self, path: str, *, max_bytes: int = 1 << 24) -> str:
        try:
            data = await self._sandbox.files.read(path)
        except Exception as exc:  # noqa: BLE001
            if "NotFound" in type(exc).__name__:
                raise ToolError(f"No such file or directory: {path}") from exc
            raise SandboxError(f"e2b could not read {path}: {exc}") from exc
        return data[: max_bytes + 1]

    async def write_file(self, path: str, text: str) -> None:
        try:
            await self._sandbox.files.write(path, text)
        except Exception as exc:  # noqa: BLE001
            raise SandboxError(f"e2b could not write {path}: {exc}") from exc

    async def fork(self) -> E2BSandbox:
        try:
            (copy,) = await self._sandbox.fork(count=1)
        except Exception as exc:  # noqa: BLE001
            raise SandboxError(f"e2b could not fork the sandbox: {type(exc).__name__}: {exc}") from exc
        if isinstance(copy, Exception):
            raise SandboxError(f"e2b could not fork the sandbox: {copy}")
        return E2BSandbox(copy, self.config)

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            await self._sandbox.kill()
        except Exception:  # noqa: BLE001 - the service reaps sandboxes past their timeout anyway
            pass

    async def _run(self, argv: list[str], timeout_s: float, stdin: str | None) -> ExecResult:
        command = shlex.join(argv)
        if stdin:
            command = f"printf %s {shlex.quote(stdin)} | {command}"
        try:
            done = await self._sandbox.commands.run(command, cwd=self.workspace, timeout=timeout_s)
            exit_code, stdout, stderr = done.exit_code, done.stdout, done.stderr
        except Exception as exc:  # noqa: BLE001
            if _is_timeout(exc):
                return ExecResult(exit_code=None, timed_out=True)
            if not hasattr(exc, "exit_code"):
                raise SandboxError(f"e2b command failed: {type(exc).__name__}: {exc}") from exc
            exit_code, stdout, stderr = exc.exit_code, exc.stdout, exc.stderr
        stdout, dropped_out = self._cut(stdout or "")
        stderr, dropped_err = self._cut(stderr or "")
        return ExecResult(stdout=stdout, stderr=stderr, exit_code=exit_code, truncated_bytes=dropped_out + dropped_err)

    def _cut(self, text: str) -> tuple[str, int]:
        data = text.encode()
        limit = self.config.output_bytes
        return data[:limit].decode("utf-8", "replace"), max(0, len(data) - limit)


def _is_timeout(exc: BaseException) -> bool:
    return "Timeout" in type(exc).__name__
