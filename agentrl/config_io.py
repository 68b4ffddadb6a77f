"""Frozen config dataclasses ⇄ TOML and `key.sub=value` overrides, with type checks and clear errors.

Generic over any (nested) frozen dataclass: `agentrl.config` builds `RunConfig` and `EvalRunConfig` with it,
`agentrl serve-tools` builds `ToolServerConfig`. A field's attribute docstring is its help (`field_docs`). A
section whose class names a `primary_field` also takes a bare value for it (`tasks=data.jsonl` sets `tasks.path`).
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import functools
import inspect
import tomllib
import types
import typing
from pathlib import Path
from typing import Any

from agentrl.errors import ConfigError


def load_dataclass(cls: type, path: str | Path | None = None, overrides: list[str] | tuple[str, ...] = ()):
    """`cls` from its defaults, then an optional TOML file, then `key.sub=value` overrides, in that order."""
    data: dict[str, Any] = {}
    if path is not None:
        data = _read_toml(Path(path))
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep:
            raise ConfigError(f"override {item!r} is not of the form key=value")
        _set_dotted(data, key.strip(), _parse_value(raw.strip()), cls)
    return from_dict(cls, data)


def _read_toml(path: Path) -> dict[str, Any]:
    """A TOML file's tables; a file that is not TOML is a `ConfigError` naming the file and the line."""
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML ({e})") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML (not UTF-8 text: {e.reason})") from None


def from_dict(cls: type, data: dict[str, Any], prefix: str = ""):
    """Instantiate dataclass `cls` from nested plain data, with type checks and clear errors."""
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = set(data) - names
    if unknown:
        key = sorted(unknown)[0]
        near = difflib.get_close_matches(key, sorted(names), n=1, cutoff=0.6)
        if near:
            raise ConfigError(f"unknown config key {prefix + key!r}; did you mean {prefix + near[0]!r}?")
        raise ConfigError(f"unknown config key {prefix + key!r}; known: {', '.join(sorted(names))}")
    kwargs = {}
    for name, value in data.items():
        hint = hints[name]
        if dataclasses.is_dataclass(hint):
            value = _expand_shorthand(hint, value)
            if not isinstance(value, dict):
                raise ConfigError(f"{prefix + name} is a section; set its fields, e.g. {prefix + name}.<field>=…")
            kwargs[name] = from_dict(hint, value, prefix=f"{prefix}{name}.")
        else:
            kwargs[name] = _coerce(value, hint, prefix + name)
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as e:  # missing fields, or a __post_init__ check
        raise ConfigError(str(e)) from e


def to_dict(config: Any) -> dict[str, Any]:
    """Plain nested data (TOML-writable: None values are omitted)."""
    out = {}
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if dataclasses.is_dataclass(value):
            out[f.name] = to_dict(value)
        elif value is not None:
            out[f.name] = list(value) if isinstance(value, tuple) else value
    return out


def dump_toml(config: Any) -> str:
    """Serialise a config to TOML (flat scalars first, then one table per section, nested ones dotted)."""
    return "\n".join(_toml_lines(to_dict(config), "")) + "\n"


def _toml_lines(data: dict[str, Any], table: str) -> list[str]:
    lines = [f"{k} = {_toml_value(v)}" for k, v in data.items() if not isinstance(v, dict)]
    for section, values in data.items():
        if isinstance(values, dict):
            name = f"{table}.{section}" if table else section
            lines += ["", f"[{name}]", *_toml_lines(values, name)]
    return lines


def field_docs(cls: type, prefix: str = "") -> list[tuple[str, str, str]]:
    """(dotted name, default, help) for every leaf field, help taken from the attribute docstrings."""
    docs = _attribute_docstrings(cls)
    rows = []
    for f in dataclasses.fields(cls):
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        if dataclasses.is_dataclass(default):
            rows += field_docs(type(default), prefix=f"{prefix}{f.name}.")
        else:
            rows.append((prefix + f.name, repr(default), docs.get(f.name, "")))
    return rows


@functools.cache
def _attribute_docstrings(cls: type) -> dict[str, str]:
    tree = ast.parse(inspect.getsource(cls))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs = {}
    for node, nxt in zip(body, body[1:], strict=False):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            if isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant) and isinstance(nxt.value.value, str):
                docs[node.target.id] = " ".join(nxt.value.value.split())
    return docs


def _set_dotted(data: dict[str, Any], key: str, value: Any, cls: type | None = None) -> None:
    """Set `key` (dotted) in nested `data`; `cls`, when given, lets a section's shorthand combine with its fields
    in either order (`tasks=x tasks.a=1` and `tasks.a=1 tasks=x` both set `tasks.path` and `tasks.a`)."""
    parts = key.split(".")
    for part in parts[:-1]:
        cls = _section_class(cls, part)
        section = data[part] = _expand_shorthand(cls, data.setdefault(part, {}))
        if not isinstance(section, dict):
            raise ConfigError(f"cannot set {key!r}: {part!r} is not a section")
        data = section
    leaf, section_cls = parts[-1], _section_class(cls, parts[-1])
    if isinstance(data.get(leaf), dict) and not isinstance(value, dict):
        value = {**data[leaf], **_expand_shorthand(section_cls, value)} if _primary(section_cls) else value
    data[leaf] = value


def _primary(cls: type | None) -> str | None:
    """The field a bare value of section `cls` sets, when the section declares one (`primary_field`)."""
    return getattr(cls, "primary_field", None) if cls is not None else None


def _expand_shorthand(cls: type | None, value: Any) -> Any:
    """`{primary: value}` for a bare value given to a section that has a primary field; `value` otherwise."""
    primary = _primary(cls)
    return {primary: value} if primary and not isinstance(value, dict) else value


def _section_class(cls: type | None, name: str) -> type | None:
    """The dataclass of field `name` of dataclass `cls`, when that field is a section."""
    if cls is None or not dataclasses.is_dataclass(cls) or name not in {f.name for f in dataclasses.fields(cls)}:
        return None
    hint = typing.get_type_hints(cls)[name]
    return hint if isinstance(hint, type) and dataclasses.is_dataclass(hint) else None


def _parse_value(raw: str) -> Any:
    """Parse an override value as TOML when possible (numbers, booleans, lists), else as a bare string."""
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        if raw.lower() in ("none", "null"):
            return None
        return raw


def _coerce(value: Any, hint: Any, name: str) -> Any:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in (a for a in args if a is not type(None)):
            try:
                return _coerce(value, arg, name)
            except ConfigError as e:
                errors.append(str(e))
        raise ConfigError(errors[0])
    if origin is tuple:
        if isinstance(value, str):  # `a,b` or `[a,b]` (bare words are not TOML) on the command line
            if value.startswith("[") and value.endswith("]"):
                value = value[1:-1]
            value = [part.strip() for part in value.split(",") if part.strip()]
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{name} expects a list, got {value!r}")
        item_type = args[0] if args else Any
        return tuple(_coerce(v, item_type, name) for v in value)
    if hint is Any:
        return value
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if hint is bool and isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if hint in (int, float, bool, str) and not (
        isinstance(value, hint) and (hint is bool or not isinstance(value, bool))
    ):
        raise ConfigError(f"{name} expects {hint.__name__}, got {value!r}")
    return value


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'
