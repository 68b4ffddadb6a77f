"""The `terminal` toolset: a persistent bash per session, inside the session's sandbox."""

from agentrl.tools.terminal.shell import Shell

__all__ = ["Shell"]
