"""Toolset specs → the table of tools a tool server serves.

A spec is a `FunctionTool`, a module (its module-level tools), a toolset class (one instance per session), or
a dotted import path naming one of those: `"pkg.module"`, `"pkg.module:ClassName"`, `"pkg.module.ClassName"`.
`"mcp:COMMAND"` or `"mcp:URL"` names an MCP server's tools (`agentrl.toolserver.mcp_toolset`). Tool names are
unique across all the specs of one server.

An instance's optional hooks run as its session does: `open()` when the session opens (its failure fails the
opening), `fork()` when it is forked, `close()` when it ends.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import logging
import types
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agentrl.errors import ConfigError
from agentrl.registry import import_path
from agentrl.tool import FunctionTool, collect_tools

logger = logging.getLogger(__name__)


@dataclass
class Toolset:
    """The tools of one spec, and the class whose instances hold their per-session state (None: stateless)."""

    label: str
    tools: dict[str, FunctionTool]
    """Tool name → tool; for a class these are unbound and serve for the schemas only."""
    cls: type | None = None
    _setup_done: bool = field(default=False, repr=False)

    @property
    def uses_sandbox(self) -> bool:
        """Whether instances are made as `cls(sandbox)` and keep their state in the session's sandbox."""
        return bool(getattr(self.cls, "uses_sandbox", False))

    @property
    def max_concurrency(self) -> int | None:
        """The class's own cap on calls running at once across all sessions (None: the server's default)."""
        return getattr(self.cls, "max_concurrency", None)

    @property
    def serial(self) -> bool:
        """Whether one session's calls into this toolset must run one at a time."""
        return bool(getattr(self.cls, "serial", False))

    async def setup(self) -> None:
        """Run the class's `setup()` once: shared, read-only resources built before the first session."""
        if self._setup_done or self.cls is None:
            self._setup_done = True
            return
        # Only a classmethod (or staticmethod) `setup` is per process; an instance method of that name is not.
        if isinstance(inspect.getattr_static(self.cls, "setup", None), (classmethod, staticmethod)):
            await _maybe_await(self.cls.setup())
        self._setup_done = True

    async def teardown(self) -> None:
        """Run the class's `teardown()` (a classmethod, the counterpart of `setup`) when the server stops; a
        failing teardown is logged, not raised, so the other toolsets still release theirs."""
        if self.cls is None or not self._setup_done:
            return
        self._setup_done = False
        if isinstance(inspect.getattr_static(self.cls, "teardown", None), (classmethod, staticmethod)):
            try:
                await _maybe_await(self.cls.teardown())
            except Exception:
                logger.exception("teardown of toolset %s failed", self.cls.__name__)

    def instantiate(self, sandbox: Any = None) -> Any:
        """A fresh instance for a new session (None for stateless toolsets); `sandbox` for sandboxed ones."""
        if self.cls is None:
            return None
        return self.cls(sandbox) if self.uses_sandbox else self.cls()

    def bind(self, instance: Any) -> dict[str, FunctionTool]:
        """The tools a session calls: bound to `instance` for a class, the tools themselves otherwise."""
        if instance is None:
            return dict(self.tools)
        return {t.name: t for t in collect_tools(instance)}


def resolve_toolsets(specs: Sequence[object | str]) -> list[Toolset]:
    """Resolve every spec; raises ValueError on a duplicate tool name, ImportError on a bad path."""
    toolsets = [_resolve(spec) for spec in specs]
    owners: dict[str, tuple[Toolset, FunctionTool]] = {}
    for toolset in toolsets:
        for name, tool in toolset.tools.items():
            if name in owners and owners[name][1] is not tool:
                raise ConfigError(
                    f"tool name {name!r} is defined by both {owners[name][0].label} and {toolset.label}; rename one "
                    "(an MCP server's tools take a prefix: `--mcp-prefix`, `mcp_toolset(..., prefix=)`)"
                )
            owners[name] = (toolset, tool)
    return toolsets


def _resolve(spec: object | str) -> Toolset:
    if isinstance(spec, str) and spec.startswith("mcp:"):
        from agentrl.toolserver.mcp_toolset import toolset_from_spec

        obj: Any = toolset_from_spec(spec)
    else:
        obj = import_path(spec) if isinstance(spec, str) else spec
    label = spec if isinstance(spec, str) else getattr(obj, "__qualname__", None) or getattr(obj, "__name__", repr(obj))
    if isinstance(obj, (FunctionTool, types.ModuleType)):
        tools, cls = collect_tools(obj), None
    elif isinstance(obj, type):
        tools, cls = collect_tools(obj), obj
    else:
        raise ConfigError(
            f"toolset {label!r} is a {type(obj).__name__}; expected a @tool function, a module, "
            "a toolset class, or a dotted import path"
        )
    if not tools:
        raise ConfigError(f"toolset {label!r} defines no @tool functions")
    return Toolset(label=str(label), tools={t.name: t for t in tools}, cls=cls)


async def fork_instance(instance: Any) -> Any:
    """A copy of a toolset instance with the original's state now: its `fork()` if any, else a deepcopy."""
    if instance is None:
        return None
    fork = getattr(instance, "fork", None)
    if callable(fork):
        return await _maybe_await(fork())
    return copy.deepcopy(instance)


async def open_instance(instance: Any) -> None:
    """Call the instance's `open()` if it has one (an MCP toolset starts its server there); a tool named `open`
    is not that hook."""
    open_ = getattr(instance, "open", None)
    if callable(open_) and not isinstance(open_, FunctionTool):
        await _maybe_await(open_())


async def close_instance(instance: Any) -> None:
    """Call the instance's `close()` if it has one; a sync close runs in a worker thread."""
    close = getattr(instance, "close", None)
    if not callable(close):
        return
    if inspect.iscoroutinefunction(close):
        await close()
    else:
        await _maybe_await(await asyncio.to_thread(close))


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value
