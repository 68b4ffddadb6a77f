"""One error tree: everything agentrl raises on purpose, and what each kind means for a run.

    AgentRLError                     raised on purpose; the message is one line: what failed, and what to do
     ├── ConfigError                 a setting is unknown, mistyped or inconsistent
     ├── InputError                  a file, data set, model or request handed to agentrl is missing or malformed
     ├── DependencyError             a system package or an optional extra is missing; the message says how to
     │                               install it
     ├── ToolDefinitionError         a function cannot become a tool (a missing description, a bad annotation)
     ├── ToolError                   a tool call failed; it becomes a `ToolResult` with a typed `error_type` that
     │    │                          the policy reads, and never crosses the rollout loop as an exception
     │    └── SandboxError           (also an InfraError) the sandbox itself failed, not the code in it
     └── InfraError                  the infrastructure failed, not the policy
          ├── ToolServerError        the tool server refused or could not serve a request
          │    ├── ToolServerUnavailable   unreachable through every retry
          │    └── SessionNotFound         the server does not know the session (closed, or it restarted)
          ├── SandboxError
          ├── SamplerError           the policy backend could not sample (crashed, endpoint unreachable)
          ├── TaskSetupError         a task's environment could not be prepared (its workspace, its web app)
          └── GradingError           an episode could not be checked or graded (the grader could not run)

An episode that meets an `InfraError` ends with `StopReason.INFRA_ERROR`: it is excluded from group statistics
and never scored as a zero reward. Scaffolds raise the kind they mean (a checker that cannot run raises
`GradingError`, not an HTTP client's exception) and the rollout catches `InfraError`. The command line prints any
`AgentRLError` as one line (`agentrl --debug …` shows the traceback).
"""

from __future__ import annotations


class AgentRLError(Exception):
    """Base of every error agentrl raises on purpose."""


class ConfigError(AgentRLError, ValueError):
    """A configuration value is unknown, of the wrong type, or inconsistent with another."""


class InputError(AgentRLError, ValueError):
    """Something handed to agentrl (a task file, a data set, a model path, a request) is missing or malformed."""


class DependencyError(AgentRLError):
    """A system package or an optional extra that this run needs is not installed; the message says how to
    install it."""


class ToolDefinitionError(AgentRLError, ValueError):
    """A function cannot become a tool: a missing description, an unannotated or variadic parameter, ..."""


class ToolError(AgentRLError):
    """Raised inside a tool to fail the call with a typed `error_type` (default `failed`) and a message. The tool
    server turns it into a `ToolResult` with `is_error=True`: the policy reads it; the episode goes on."""

    error_type = "failed"

    def __init__(self, message: str, *, error_type: str | None = None) -> None:
        super().__init__(message)
        if error_type is not None:
            self.error_type = error_type


class InfraError(AgentRLError, RuntimeError):
    """The infrastructure failed, not the policy: the episode becomes `StopReason.INFRA_ERROR`, never a zero
    reward."""


class ToolServerError(InfraError):
    """The tool server could not serve a request (it refused it: unknown tool names, a bad token, ...)."""

    def __init__(self, message: str, *, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


class ToolServerUnavailable(ToolServerError):
    """The tool server stayed unreachable (or overloaded) through every retry."""


class SessionNotFound(ToolServerError):
    """The server does not know the session: it was closed, or the server restarted and lost it."""


class SandboxError(ToolError, InfraError):
    """The sandbox could not run the request: it failed to start, or its worker died. Inside a tool call it
    becomes a `sandbox_error` result (the session's next call gets a fresh worker); outside one (grading, say)
    it is an infrastructure failure."""

    error_type = "sandbox_error"


class SamplerError(InfraError):
    """The policy backend could not sample a turn: it crashed, or its endpoint stayed unreachable."""


class TaskSetupError(InfraError):
    """A task's environment could not be prepared: its repository put in the workspace, its web app started."""


class GradingError(InfraError):
    """An episode could not be checked or graded: the grader's sandbox did not start, the checker could not
    run. Not a verdict on the episode."""


def one_line(error: BaseException) -> str:
    """The error as the command line prints it: its message on one line, or its type when it has none."""
    text = " ".join(str(error).split())
    return text or type(error).__name__
