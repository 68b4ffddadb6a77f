"""`ToolServerConfig`: limits of one tool-server process and the sandbox its sessions get."""

from __future__ import annotations

from dataclasses import dataclass, field

from agentrl.errors import ConfigError
from agentrl.sandbox.config import SandboxConfig


@dataclass(frozen=True)
class ToolServerConfig:
    """Admission control, session lifetime and sandboxing of a tool server."""

    max_sessions: int = 4096
    """Open sessions beyond which `POST /sessions` answers 503 (the client backs off and retries)."""
    session_ttl_s: float = 1800.0
    """A session with no call for this long is closed and its sandbox removed; 0 keeps sessions forever."""
    max_concurrent_calls: int = 64
    """Calls of one toolset running at once across all sessions; more wait in a queue (queue time is a metric)."""
    max_queued_calls: int = 4096
    """Calls of one toolset allowed to wait; beyond that a call is refused with 503 and retried by the client."""
    tool_timeout_s: float = 300.0
    """Timeout for tools that set none themselves (sandboxed tools also stop at `sandbox.call_timeout_s`)."""
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)

    def __post_init__(self) -> None:
        for name in ("max_sessions", "max_concurrent_calls", "tool_timeout_s"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive, got {getattr(self, name)!r}")
        if self.max_queued_calls < 0 or self.session_ttl_s < 0:
            raise ConfigError("max_queued_calls and session_ttl_s must not be negative")
