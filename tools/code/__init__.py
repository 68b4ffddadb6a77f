"""The `code` toolset: a persistent Python interpreter per session, inside the session's sandbox."""

from agentrl.tools.code.python_interpreter import PythonInterpreter

__all__ = ["PythonInterpreter"]
