"""`SandboxConfig`: which backend runs session code, and the limits every sandbox gets."""

from __future__ import annotations

from dataclasses import dataclass

from agentrl.errors import ConfigError


@dataclass(frozen=True)
class SandboxConfig:
    """Sandbox backend and limits, shared by every session of one tool server."""

    backend: str = "local"
    """`local` (bubblewrap on this host) or `e2b` (e2b-code-interpreter; needs E2B_API_KEY)."""
    call_timeout_s: float = 30.0
    """Longest a single code, shell or file call may run before it is stopped."""
    kill_grace_s: float = 2.0
    """Extra time, past the call timeout, before a worker that ignores its timer is killed and restarted."""
    output_bytes: int = 16384
    """Kept per output stream of one call; the rest is dropped and counted."""
    cpu_time_s: int = 600
    """RLIMIT_CPU of each sandboxed process (cumulative over a worker's life)."""
    memory_mb: int = 2048
    """RLIMIT_AS (address space) of each sandboxed process."""
    file_size_mb: int = 64
    """RLIMIT_FSIZE: the largest file a sandboxed process may write."""
    open_files: int = 256
    """RLIMIT_NOFILE of each sandboxed process."""
    processes: int = 64
    """RLIMIT_NPROC per sandbox (enforced per sandbox when the server runs as root: each gets its own uid)."""
    allow_network: bool = False
    """Whether a session may ask for network access (it is off unless the session asks and this allows it)."""
    root_dir: str | None = None
    """Where workspaces live on the host (a fresh temporary directory when unset)."""
    python: str = "python3"
    """The interpreter inside the sandbox (the system Python, bound read-only)."""
    uid_base: int = 2_000_000
    """First host uid handed to sandboxes when the server runs as root (one uid per sandbox)."""
    e2b_template: str | None = None
    """e2b sandbox template (the service's default code-interpreter template when unset)."""

    def __post_init__(self) -> None:
        if self.backend not in ("local", "e2b"):
            raise ConfigError(f"sandbox.backend must be 'local' or 'e2b', got {self.backend!r}")
        for name in ("call_timeout_s", "output_bytes", "cpu_time_s", "memory_mb", "file_size_mb", "open_files"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"sandbox.{name} must be positive, got {getattr(self, name)!r}")
        if self.processes < 1 or self.kill_grace_s < 0:
            raise ConfigError("sandbox.processes must be at least 1 and sandbox.kill_grace_s not negative")

    def rlimits(self) -> dict[str, int]:
        return {
            "RLIMIT_CPU": self.cpu_time_s,
            "RLIMIT_AS": self.memory_mb << 20,
            "RLIMIT_FSIZE": self.file_size_mb << 20,
            "RLIMIT_NOFILE": self.open_files,
            "RLIMIT_NPROC": self.processes,
            "RLIMIT_CORE": 0,
        }
