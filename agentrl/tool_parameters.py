"""A tool's `parameters` schema: the JSON schema of its pydantic arguments model, as a model reads it.

Pydantic writes nested models as `$ref`s into `$defs` and titles every node. A schema a model reads in its prompt
should be self-contained and short, so references are inlined (only recursive models keep a `$defs` entry, since
they cannot be written out) and generated titles are dropped.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

SCHEMA_DATA_KEYS = ("default", "enum", "const", "examples")
"""Keys whose values are data, not schema: a `title` inside a default value is kept."""


def parameters_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON schema with `$defs` inlined and pydantic's `title`s dropped (see `policy_schema`)."""
    return policy_schema(model.model_json_schema())


def policy_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A JSON schema as a model reads it: `$defs` inlined and generated `title`s dropped.

    Only recursive definitions keep an entry in `$defs`, since they cannot be written out inline.
    """
    schema = dict(schema)
    defs = schema.pop("$defs", {})
    recursive: set[str] = set()
    schema = _inline_refs(schema, defs, (), recursive)
    kept: dict[str, Any] = {}
    while missing := recursive - kept.keys():
        for name in missing:
            kept[name] = _inline_refs(defs[name], defs, (name,), recursive)
    if kept:
        schema["$defs"] = kept
    return _drop_titles(schema)


def _inline_refs(node: Any, defs: dict[str, Any], stack: tuple[str, ...], recursive: set[str]) -> Any:
    if isinstance(node, list):
        return [_inline_refs(item, defs, stack, recursive) for item in node]
    if not isinstance(node, dict):
        return node
    out = {k: _inline_refs(v, defs, stack, recursive) for k, v in node.items() if k != "$ref"}
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        target = ref.removeprefix("#/$defs/")
        if target in stack:
            recursive.add(target)
            return {"$ref": ref, **out}
        return {**_inline_refs(defs[target], defs, (*stack, target), recursive), **out}
    if "$ref" in node:
        out["$ref"] = node["$ref"]
    all_of = out.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1 and isinstance(all_of[0], dict):
        out = {**out.pop("allOf")[0], **out}
    return out


def _drop_titles(node: Any) -> Any:
    if isinstance(node, list):
        return [_drop_titles(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "title" and isinstance(value, str):
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: _drop_titles(sub) for name, sub in value.items()}
        else:
            out[key] = value if key in SCHEMA_DATA_KEYS else _drop_titles(value)
    return out
