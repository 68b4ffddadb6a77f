"""`MCPTool`: a tool an MCP server lists, in the shape of a `FunctionTool`, and MCP results as `ToolResult`s.

The schema comes from the server's `tools/list` entry instead of a Python signature: `name` (with an optional
prefix; characters a function name may not hold become `_`), `description` (else `title`) and `inputSchema`
as `parameters`, written the way `agentrl.tool_parameters` writes a Python tool's (`$defs` inlined, generated
titles dropped). Arguments are checked against the original `inputSchema` before the call goes out, so a call
that does not fit is a `bad_arguments` result, as it is for a Python tool.

Results: text content is joined with newlines; other content is summarised as one line of text each (an image
or audio clip by its MIME type and size, a resource link by its URI, an embedded resource by its URI, with its
text when it has text). A result with no content but `structuredContent` is that JSON. `isError` becomes an
`is_error` result typed `failed`; a timeout is typed `timeout`.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import copy
import inspect
import json
import logging
import re
import time
from collections.abc import Mapping
from typing import Any

from agentrl.errors import ConfigError, InfraError, ToolError
from agentrl.tool import BadArguments, FunctionTool, arguments_object
from agentrl.tool_parameters import policy_schema
from agentrl.types import ToolResult

logger = logging.getLogger(__name__)
_NOT_IN_NAMES = re.compile(r"[^A-Za-z0-9_-]")
_MAX_NAME_CHARS = 64
_MAX_ARGUMENT_ERRORS = 5


class MCPTool(FunctionTool):
    """One tool of an MCP server. Like a toolset method it is bound per session (`tool.__get__(instance)`), and
    the bound tool calls the MCP connection of that session's instance (`instance.call_tool(name, arguments)`).

    `call` returns a `ToolResult` for everything the server or the policy got wrong, and raises `InfraError`
    only when the server itself is gone: the session's state went with it, so the episode cannot go on.
    """

    def __init__(
        self, listing: Mapping[str, Any], *, server: str, prefix: str = "", timeout_s: float | None = None
    ) -> None:
        # FunctionTool.__init__ reads a Python signature; what it derives from one comes from the listing here.
        self.remote_name = str(listing["name"])
        self.name = prefix + _NOT_IN_NAMES.sub("_", self.remote_name)
        if len(self.name) > _MAX_NAME_CHARS or not self.name:
            raise ConfigError(f"MCP tool name {self.name!r} of {server} is longer than {_MAX_NAME_CHARS} characters")
        self.server = server
        text = listing.get("description") or listing.get("title") or ""
        self.description = inspect.cleandoc(str(text))
        self.timeout_s = timeout_s
        self.fn = None
        self.model = None
        self._params = ()
        self.is_method = True
        self._instance: Any = None
        self.input_schema: dict[str, Any] = dict(listing.get("inputSchema") or {"type": "object"})
        self._schema = {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": policy_parameters(self.input_schema),
            },
        }
        self._validator = _validator(self.input_schema)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(f"{self.name} is a tool of MCP server {self.server}: run it with `await tool.call(arguments)`")

    def __repr__(self) -> str:
        bound = " (bound)" if self._instance is not None else ""
        return f"<MCP tool {self.name} of {self.server}{bound}>"

    async def call(self, arguments: Mapping[str, Any] | str | None, call_id: str = "") -> ToolResult:
        """Check `arguments`, call the tool on the session's MCP server, and return its result."""
        start = time.perf_counter()

        def elapsed() -> float:
            return time.perf_counter() - start

        if self._instance is None:
            message = f"{self.name} is an MCP tool; call it through a tool-server session"
            return ToolResult.error(call_id, "failed", message, elapsed())
        try:
            checked = self._arguments(arguments)
        except BadArguments as exc:
            return ToolResult.error(call_id, "bad_arguments", f"bad arguments for {self.name}: {exc}", elapsed())
        try:
            async with asyncio.timeout(self.timeout_s) as deadline:
                reply = await self._instance.call_tool(self.remote_name, checked)
        except InfraError:
            raise
        except TimeoutError as exc:
            if deadline.expired():
                message = f"{self.name} timed out after {self.timeout_s:g}s"
                return ToolResult.error(call_id, "timeout", message, elapsed())
            return ToolResult.error(call_id, "failed", f"{type(exc).__name__}: {exc}", elapsed())
        except ToolError as exc:
            return ToolResult.error(call_id, exc.error_type, str(exc), elapsed())
        except Exception as exc:  # noqa: BLE001 - what the client library raises for one call is an observation
            return ToolResult.error(call_id, "failed", f"{type(exc).__name__}: {exc}", elapsed())
        return result_from_mcp(reply, call_id, elapsed(), self.name)

    def _arguments(self, arguments: Mapping[str, Any] | str | None) -> dict[str, Any]:
        arguments = arguments_object(arguments)
        if self._validator is not None:
            errors = sorted(self._validator.iter_errors(arguments), key=lambda e: [str(p) for p in e.path])
            if errors:
                raise BadArguments(_errors_text(errors))
        return arguments


def policy_parameters(input_schema: Mapping[str, Any]) -> dict[str, Any]:
    """An MCP `inputSchema` as a Python tool's `parameters`: `$defs` inlined, titles and `$schema` dropped, and
    `properties` present (an object schema without it confuses some chat templates)."""
    schema = policy_schema({k: v for k, v in copy.deepcopy(dict(input_schema)).items() if k != "$schema"})
    schema.setdefault("type", "object")
    if schema["type"] == "object":
        schema.setdefault("properties", {})
    return schema


def result_from_mcp(result: Mapping[str, Any], call_id: str, elapsed_s: float = 0.0, name: str = "") -> ToolResult:
    """A `CallToolResult` (MCP's wire format) as a `ToolResult`: content joined as text. An `isError` result is
    the server's own error text, without the SDK's `Error executing tool NAME: ` wrapping, typed `bad_arguments`
    when the server rejected the arguments and `failed` otherwise; a crash whose text the server withheld says so."""
    text = "\n".join(_content_text(block) for block in result.get("content") or [])
    if not text and result.get("structuredContent") is not None:
        text = json.dumps(result["structuredContent"], ensure_ascii=False)
    if result.get("isError"):
        return _error_result(text, call_id, elapsed_s, name)
    return ToolResult(call_id=call_id, content=text, elapsed_s=elapsed_s)


_SDK_WRAPPING = re.compile(r"^Error executing tool (?P<tool>[^\s:]+)(?P<rest>: (?P<text>.*))?$", re.DOTALL)
_VALIDATION = re.compile(r"^\d+ validation errors? for ")
_warned_withheld: set[str] = set()


def _error_result(text: str, call_id: str, elapsed_s: float, name: str) -> ToolResult:
    wrapped = _SDK_WRAPPING.match(text.strip())
    if wrapped is None:  # a server that words its own errors
        return ToolResult.error(call_id, "failed", text or "the tool failed and gave no message", elapsed_s)
    tool = name or wrapped["tool"]
    if wrapped["rest"] is None:  # the SDK withholds what an unexpected exception said
        if tool not in _warned_withheld:
            _warned_withheld.add(tool)
            logger.warning(
                "MCP tool %s raised an unexpected exception and its server sent no message (its stderr has the "
                "traceback); raise the SDK's ToolError in the tool to give the policy the reason",
                tool,
            )
        return ToolResult.error(call_id, "failed", f"{tool} failed; the server gave no reason", elapsed_s)
    error_type = "bad_arguments" if _VALIDATION.match(wrapped["text"]) else "failed"
    return ToolResult.error(call_id, error_type, f"{tool}: {wrapped['text']}", elapsed_s)


def _content_text(block: Mapping[str, Any]) -> str:
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind in ("image", "audio"):
        return f"[{kind}: {block.get('mimeType', 'unknown type')}, {_decoded_size(block.get('data'))} bytes]"
    if kind == "resource_link":
        name = f" ({block['name']})" if block.get("name") else ""
        return f"[resource link: {block.get('uri', '?')}{name}]"
    if kind == "resource":
        resource = block.get("resource") or {}
        uri = resource.get("uri", "?")
        if "text" in resource:
            return f"[resource {uri}]\n{resource['text']}"
        mime = resource.get("mimeType", "unknown type")
        return f"[resource {uri}: {mime}, {_decoded_size(resource.get('blob'))} bytes]"
    return f"[{kind or 'unknown'} content]"


def _decoded_size(data: Any) -> int:
    if not isinstance(data, str):
        return 0
    try:
        return len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        return len(data)


def _validator(schema: Mapping[str, Any]) -> Any:
    """A JSON-schema validator of the arguments, or None when the schema is not one (the server then checks)."""
    from jsonschema.exceptions import SchemaError
    from jsonschema.validators import validator_for

    cls = validator_for(schema)
    try:
        cls.check_schema(schema)
    except SchemaError:
        return None
    return cls(schema)


def _errors_text(errors: list[Any]) -> str:
    """`field 'where.x': 'x' is a required property; …` — the shape of a Python tool's argument errors."""
    parts: list[str] = []
    for error in errors:
        location = ".".join(str(part) for part in error.path)
        text = f"field {location!r}: {error.message}" if location else error.message
        if text not in parts:
            parts.append(text)
    return "; ".join(parts[:_MAX_ARGUMENT_ERRORS])
