"""What one command in a sandbox produced (`ExecResult`), and the error a broken sandbox raises."""

from __future__ import annotations

from dataclasses import dataclass

from agentrl.errors import SandboxError

__all__ = ["ExecResult", "SandboxError"]


@dataclass(frozen=True)
class ExecResult:
    """The outcome of running code or a command in a sandbox."""

    stdout: str = ""
    stderr: str = ""
    exit_code: int | None = 0
    """None when the process did not finish (timed out or killed)."""
    value: str | None = None
    """`repr` of a Python cell's final expression, if it had one."""
    timed_out: bool = False
    truncated_bytes: int = 0
    """Output dropped beyond the sandbox's output limit."""
    state_lost: str | None = None
    """Set when a timeout forced a restart: says which state (interpreter variables, shell) was lost."""
    cwd: str | None = None
    """The shell's working directory after the command (terminal calls)."""

    @property
    def ok(self) -> bool:
        return not self.timed_out and self.exit_code == 0

    def as_text(self, *, show_exit_code: bool = True) -> str:
        """The observation a policy sees: output, then what it needs to know about how the run ended."""
        parts = [self.stdout.rstrip("\n")] if self.stdout.strip() else []
        if self.stderr.strip():
            parts.append(self.stderr.rstrip("\n") if not parts else "[stderr]\n" + self.stderr.rstrip("\n"))
        if self.value is not None:
            parts.append(f"Out: {self.value}")
        if self.truncated_bytes:
            parts.append(f"[... {self.truncated_bytes} more bytes of output were cut]")
        if self.timed_out:
            parts.append("[timed out: the command was stopped]")
        if self.state_lost:
            parts.append(f"[{self.state_lost}]")
        elif show_exit_code and self.exit_code not in (0, None):
            parts.append(f"[exit code {self.exit_code}]")
        return "\n".join(parts) if parts else "(no output)"
