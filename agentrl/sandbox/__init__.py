"""Sandboxes: where the code, terminal and file tools run untrusted, model-written code.

`SandboxProvider(config)` starts sandboxes with one backend: `local` (bubblewrap on this host, the default; see
`bwrap.py` and `local.py`) or `e2b` (remote, see `e2b.py`). The tool server gives each session a
`SessionSandbox`, which starts its sandbox on first use. All of them implement `agentrl.protocols.Sandbox`.
"""

from agentrl.errors import SandboxError
from agentrl.sandbox.config import SandboxConfig
from agentrl.sandbox.provider import SandboxProvider
from agentrl.sandbox.result import ExecResult
from agentrl.sandbox.session_sandbox import SessionSandbox

__all__ = ["ExecResult", "SandboxConfig", "SandboxError", "SandboxProvider", "SessionSandbox"]
