"""`@tool`: a typed, documented Python function becomes a tool an LLM can call.

The decorator reads the signature and the docstring once, when the function is defined, and builds a pydantic
model of the arguments. That one model yields the OpenAI function schema (`f.schema`) and validates the
arguments a policy produced (`await f.call(arguments)`), so what the model is told and what is checked cannot
drift apart. A parameter without a description is a definition error, raised at decoration: the model only
knows what the docstring tells it.

    @tool
    def lookup(entity: str, field: Literal["capital", "population"] = "capital") -> str:
        '''Look up a fact.

        Args:
            entity: Name of the entity.
            field: Which fact to return.
        '''

`lookup("France")` still runs the function; `await lookup.call({"entity": "France"}, call_id="c1")` returns a
`ToolResult`. `call` never raises: bad arguments, a timeout and an exception inside the tool come back as
results with `is_error=True` and a typed `error_type` (bad_arguments, timeout, failed). A tool that knows
better raises `ToolError(message, error_type=...)` (a `SandboxError` is one, typed `sandbox_error`).

A toolset is a class whose methods are decorated. The tool server makes one instance per session (`cls()`),
so instance attributes are per-session state. Optional hooks: a `setup` classmethod runs once per server before
the first session (shared read-only resources) and a `teardown` classmethod when the server stops; a class with
`uses_sandbox = True` is made as `cls(sandbox)` and gets the session's sandbox (see `agentrl/sandbox`);
`close()` (sync or async) runs when the session ends; `fork()` replaces `copy.deepcopy` when a session is
forked; `serial = True` makes the calls of one session run one at a time.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import functools
import inspect
import json
import re
import time
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any, overload

import docstring_parser
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic.fields import FieldInfo
from pydantic_core import to_jsonable_python

from agentrl.errors import ToolDefinitionError, ToolError
from agentrl.tool_parameters import parameters_schema
from agentrl.types import ToolResult

_SKIPPED_PARAMS = ("self", "cls")
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_CONTENT_PART_TYPES = ("text", "image_url")


class BadArguments(Exception):
    """Arguments that do not fit the tool's signature or schema; becomes a `bad_arguments` result."""


def arguments_object(arguments: Mapping[str, Any] | str | None) -> dict[str, Any]:
    """A call's arguments as a dict: a mapping as given, JSON text decoded, nothing (or blank text) as {}; anything
    else raises `BadArguments`."""
    if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        return {}
    if isinstance(arguments, (str, bytes)):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError as exc:
            raise BadArguments(f"arguments are not valid JSON ({exc})") from None
    if not isinstance(arguments, Mapping):
        raise BadArguments(f"arguments must be a JSON object, not {type(arguments).__name__}")
    return dict(arguments)


@dataclasses.dataclass(frozen=True)
class _Param:
    name: str
    """The Python parameter name, which is also the JSON property name."""
    field: str
    """The pydantic field name; differs from `name` when `name` would shadow a BaseModel attribute."""
    positional_only: bool


class FunctionTool:
    """A function plus the schema an LLM sees. Calling it runs the function; `call` runs it for a policy."""

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        timeout_s: float | None = None,
    ) -> None:
        self.fn = fn
        self.name = name or fn.__name__
        if not _TOOL_NAME.match(self.name):
            raise ToolDefinitionError(f"tool name {self.name!r} must match {_TOOL_NAME.pattern}")
        self.description = description or _function_description(fn, self.name)
        self.timeout_s = timeout_s
        self.model, self._params, self.is_method = _arguments_model(fn, self.name)
        self._schema = {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": parameters_schema(self.model),
            },
        }
        self._instance: Any = None
        functools.update_wrapper(self, fn)

    @property
    def schema(self) -> dict[str, Any]:
        """The OpenAI function-tool dict `{"type": "function", "function": {name, description, parameters}}`."""
        return copy.deepcopy(self._schema)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._instance is not None:
            return self.fn(self._instance, *args, **kwargs)
        return self.fn(*args, **kwargs)

    def __get__(self, instance: Any, owner: type | None = None) -> FunctionTool:
        # Accessing a decorated method through an instance gives a tool bound to that instance, the way
        # functions become bound methods; the schema already leaves `self` out.
        if instance is None or not self.is_method:
            return self
        bound = copy.copy(self)
        bound._instance = instance
        return bound

    def __repr__(self) -> str:
        params = ", ".join(p.name for p in self._params)
        bound = f" bound to {type(self._instance).__name__}" if self._instance is not None else ""
        return f"<tool {self.name}({params}){bound}>"

    async def call(self, arguments: Mapping[str, Any] | str | None, call_id: str = "") -> ToolResult:
        """Validate `arguments` (a dict or a JSON string), run the tool, and return its result.

        Never raises (except on cancellation): every failure is a result with `is_error=True`. A sync tool
        runs in a worker thread; on timeout the thread cannot be stopped and its eventual result is discarded.
        """
        start = time.perf_counter()

        def elapsed() -> float:
            return time.perf_counter() - start

        if self.is_method and self._instance is None:
            message = f"{self.name} is a toolset method; call it on an instance of its class"
            return ToolResult.error(call_id, "failed", message, elapsed())
        try:
            args, kwargs = self._parse(arguments)
        except BadArguments as exc:
            return ToolResult.error(call_id, "bad_arguments", f"bad arguments for {self.name}: {exc}", elapsed())
        try:
            async with asyncio.timeout(self.timeout_s) as deadline:
                value = await self._invoke(args, kwargs)
            return _to_result(value, call_id, elapsed())
        except TimeoutError as exc:
            if deadline.expired():
                message = f"{self.name} timed out after {self.timeout_s:g}s"
                return ToolResult.error(call_id, "timeout", message, elapsed())
            return ToolResult.error(call_id, "failed", _exception_text(exc), elapsed())
        except ToolError as exc:
            return ToolResult.error(call_id, exc.error_type, str(exc), elapsed())
        except Exception as exc:  # noqa: BLE001 - a tool's exception is an observation for the policy
            return ToolResult.error(call_id, "failed", _exception_text(exc), elapsed())

    def _parse(self, arguments: Mapping[str, Any] | str | None) -> tuple[list[Any], dict[str, Any]]:
        try:
            validated = self.model.model_validate(arguments_object(arguments))
        except ValidationError as exc:
            raise BadArguments(_validation_text(exc)) from None
        args: list[Any] = [self._instance] if self.is_method else []
        kwargs: dict[str, Any] = {}
        for param in self._params:
            value = getattr(validated, param.field)
            if param.positional_only:
                args.append(value)
            else:
                kwargs[param.name] = value
        return args, kwargs

    async def _invoke(self, args: list[Any], kwargs: dict[str, Any]) -> Any:
        if inspect.iscoroutinefunction(self.fn):
            return await self.fn(*args, **kwargs)
        value = await asyncio.to_thread(functools.partial(self.fn, *args, **kwargs))
        if inspect.isawaitable(value):
            value = await value
        return value


@overload
def tool(fn: Callable[..., Any], /) -> FunctionTool: ...


@overload
def tool(
    *, name: str | None = None, description: str | None = None, timeout_s: float | None = None
) -> Callable[[Callable[..., Any]], FunctionTool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout_s: float | None = None,
) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """Make `fn` a tool: `@tool` or `@tool(name=..., description=..., timeout_s=...)`.

    Raises `ToolDefinitionError` if the function or one of its parameters has no description, a parameter has
    no type annotation, or the signature has `*args`/`**kwargs`.
    """

    def decorate(f: Callable[..., Any]) -> FunctionTool:
        return FunctionTool(f, name=name, description=description, timeout_s=timeout_s)

    return decorate if fn is None else decorate(fn)


def collect_tools(obj: Any) -> list[FunctionTool]:
    """The tools of a module, a toolset class (unbound), a toolset instance (bound), or a single tool."""
    if isinstance(obj, FunctionTool):
        return [obj]
    if isinstance(obj, types.ModuleType):
        return _unique(v for v in vars(obj).values() if isinstance(v, FunctionTool) and not v.is_method)
    klass = obj if isinstance(obj, type) else type(obj)
    attributes: dict[str, FunctionTool] = {}
    for base in reversed(klass.__mro__):
        for attribute, value in vars(base).items():
            if isinstance(value, FunctionTool):
                attributes[attribute] = value
            else:
                attributes.pop(attribute, None)  # a subclass replaced the tool with something else
    return [getattr(obj, attribute) for attribute in attributes]


def _unique(tools: Iterable[FunctionTool]) -> list[FunctionTool]:
    seen: dict[int, FunctionTool] = {}
    for t in tools:
        seen.setdefault(id(t), t)
    return list(seen.values())


def _function_description(fn: Callable[..., Any], name: str) -> str:
    doc = docstring_parser.parse(inspect.getdoc(fn) or "")
    text = "\n\n".join(part for part in (doc.short_description, doc.long_description) if part)
    if not text:
        raise ToolDefinitionError(f"tool {name!r} has no description: give the function a docstring")
    return text


def _arguments_model(fn: Callable[..., Any], name: str) -> tuple[type[BaseModel], tuple[_Param, ...], bool]:
    """The pydantic model of `fn`'s arguments, its fields' parameters, and whether `fn` is a method."""
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:
        raise ToolDefinitionError(f"cannot resolve the type hints of tool {name!r}: {exc}") from exc
    docs = {p.arg_name: p.description for p in docstring_parser.parse(inspect.getdoc(fn) or "").params}
    params = list(inspect.signature(fn).parameters.values())
    is_method = bool(params) and params[0].name in _SKIPPED_PARAMS
    fields: dict[str, Any] = {}
    mapping: list[_Param] = []
    for param in params[1:] if is_method else params:
        where = f"parameter {param.name!r} of tool {name!r}"
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ToolDefinitionError(f"{where}: *args/**kwargs are not supported; name every argument")
        if param.name not in hints:
            raise ToolDefinitionError(f"{where} has no type annotation")
        annotation, description = _split_annotated(hints[param.name])
        description = description or docs.get(param.name)
        if not description:
            raise ToolDefinitionError(
                f"{where} has no description: document it under 'Args:' in the docstring "
                f'or annotate it as Annotated[T, "description"]'
            )
        field = param.name if _is_plain_field_name(param.name) else f"arg_{param.name.lstrip('_')}"
        default = ... if param.default is param.empty else param.default
        alias = None if field == param.name else param.name
        fields[field] = (annotation, Field(default, description=description, alias=alias))
        mapping.append(_Param(param.name, field, param.kind is param.POSITIONAL_ONLY))
    config = ConfigDict(extra="forbid", arbitrary_types_allowed=True, protected_namespaces=())
    model = create_model(f"{name}_arguments", __config__=config, **fields)
    return model, tuple(mapping), is_method


def _split_annotated(hint: Any) -> tuple[Any, str | None]:
    """`Annotated[T, "text", *meta]` → (`Annotated[T, *meta]`, "text"); `Field(description=...)` counts too."""
    if typing.get_origin(hint) is not typing.Annotated:
        return hint, None
    base, *metadata = typing.get_args(hint)
    texts = [m for m in metadata if isinstance(m, str)]
    kept = [m for m in metadata if not isinstance(m, str)]
    field_texts = [m.description for m in kept if isinstance(m, FieldInfo) and m.description]
    description = (texts or field_texts or [None])[0]
    return (typing.Annotated[(base, *kept)] if kept else base), description


def _is_plain_field_name(name: str) -> bool:
    return not name.startswith("_") and not hasattr(BaseModel, name)


def _validation_text(exc: ValidationError) -> str:
    """`field 'x': Input should be ...; field 'y': Field required` — compact enough for a model to act on."""
    parts: list[str] = []
    for error in exc.errors(include_url=False):
        location = ".".join(str(part) for part in error["loc"])
        text = f"field {location!r}: {error['msg']}" if location else error["msg"]
        if text not in parts:
            parts.append(text)
    return "; ".join(parts)


def _exception_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _to_result(value: Any, call_id: str, elapsed_s: float) -> ToolResult:
    """str → text; ToolResult → itself; content parts → parts; anything else → JSON text."""
    if isinstance(value, ToolResult):
        return dataclasses.replace(value, call_id=call_id, elapsed_s=value.elapsed_s or elapsed_s)
    if isinstance(value, str):
        content: str | list[dict[str, Any]] = value
    elif _is_content_parts(value):
        content = [dict(part) for part in value]
    else:
        content = json.dumps(to_jsonable_python(value, fallback=str), ensure_ascii=False)
    return ToolResult(call_id=call_id, content=content, elapsed_s=elapsed_s)


def _is_content_parts(value: Any) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(p, Mapping) and p.get("type") in _CONTENT_PART_TYPES for p in value)
    )
