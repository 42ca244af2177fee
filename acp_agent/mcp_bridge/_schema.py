"""Input schemas as vendors accept them, or a reason to skip the tool.

An MCP server may describe its arguments in JSON Schema that a vendor rejects, failing the
whole model request: OpenAI wants an object schema without `anyOf`/`oneOf`/`allOf`/`enum`/
`not` at the top and `items` on every array; Anthropic wants `type: object`; some
OpenAI-compatible servers reject `$ref`. `repair_schema` fixes what it can without changing
what arguments mean, and says why it gave up otherwise (the tool is then not offered).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

_COMBINATORS = ("anyOf", "oneOf", "allOf")
_DROPPED_AT_TOP = ("not", "enum", "const", "$schema", "$id")
_DATA_KEYS = frozenset({"enum", "const", "default", "examples", "example"})
"""Keys whose values are data, not schemas: never rewritten."""
MAX_SCHEMA_CHARS = 100_000


def repair_schema(schema: object) -> tuple[dict[str, Any] | None, list[str]]:
    """(the schema to offer, notes on what was repaired), or (None, [why it was skipped])."""
    if not isinstance(schema, dict):
        return None, ["its input schema is not a JSON object"]
    try:
        size = len(json.dumps(schema))
    except (TypeError, ValueError):
        return None, ["its input schema is not JSON"]
    if size > MAX_SCHEMA_CHARS:
        return None, [f"its input schema is too large ({size} characters)"]
    notes: list[str] = []
    top: dict[str, Any] = copy.deepcopy(schema)

    kind = top.get("type")
    if kind is None:
        top["type"] = "object"
        notes.append("added the missing type 'object'")
    elif isinstance(kind, list) and "object" in kind:
        top["type"] = "object"
        notes.append(f"narrowed type {kind} to 'object'")
    elif kind != "object":
        return None, [f"it takes {kind!r} arguments, not an object of named arguments"]

    for key in _COMBINATORS:
        if key in top:
            _merge_variants(top, key, top.pop(key))
            notes.append(f"merged the top-level {key} into one object")
    for key in _DROPPED_AT_TOP:
        if top.pop(key, None) is not None and not key.startswith("$"):
            notes.append(f"dropped the top-level {key}")

    properties = top.setdefault("properties", {})
    if not isinstance(properties, dict):
        return None, ["its 'properties' is not an object"]
    for name in [n for n, value in properties.items() if not isinstance(value, dict | bool)]:
        del properties[name]
        notes.append(f"dropped property {name!r}, whose schema is not an object")
    required = top.get("required")
    if required is not None:
        names = required if isinstance(required, list) else []
        kept = [name for name in names if isinstance(name, str)]
        if kept != required:
            notes.append("dropped entries of 'required' that are not names")
            top["required"] = kept

    definitions = {
        name: value
        for key in ("definitions", "$defs")
        if isinstance(top.get(key), dict)
        for name, value in top[key].items()
    }
    if definitions and _has_local_refs(top):
        try:
            top = _inline(top, definitions, ())
        except _Recursive:
            pass  # a recursive schema keeps its `$ref`s: vendors that take `$ref` take these
        else:
            top.pop("$defs", None)
            top.pop("definitions", None)
            notes.append("inlined its $ref definitions")

    if _add_missing_items(top):
        notes.append("added 'items' to arrays that had none")
    return top, notes


def _merge_variants(top: dict[str, Any], key: str, variants: object) -> None:
    """Fold object variants into the top schema: every variant's properties; required only
    what all variants require (`allOf`: what any requires)."""
    objects = [v for v in variants if isinstance(v, dict)] if isinstance(variants, list) else []
    properties = top.setdefault("properties", {})
    if not isinstance(properties, dict):
        return
    required_sets: list[set[str]] = []
    for variant in objects:
        found = variant.get("properties")
        if isinstance(found, dict):
            for name, value in found.items():
                properties.setdefault(name, value)
        names = variant.get("required")
        listed = names if isinstance(names, list) else []
        required_sets.append({name for name in listed if isinstance(name, str)})
    if not required_sets:
        return
    merged = set.union(*required_sets) if key == "allOf" else set.intersection(*required_sets)
    found = top.get("required")
    existing = [name for name in found if isinstance(name, str)] if isinstance(found, list) else []
    top["required"] = sorted({*existing, *merged})


ORIGINAL_SCHEMA = "acp-agent/originalInputSchema"
"""Where `shield_listing` keeps a tool's input schema that the SDK would have rejected."""


def shield_listing(result: dict[str, Any]) -> None:
    """Make a `tools/list` result pass the SDK's validation whatever its schemas are.

    The SDK rejects a whole listing when one tool's input schema is not an object schema
    (and with it the server); we would rather skip or repair that one tool. So before the
    SDK sees the result, such a schema moves into the tool's `_meta` (`ORIGINAL_SCHEMA`),
    where `repair_schema` judges it; an invalid output schema (we do not use them) goes.
    """
    tools = result.get("tools")
    if not isinstance(tools, list):
        return
    for tool in tools:
        if not isinstance(tool, dict):
            continue
        if "outputSchema" in tool and not _wire_valid(tool["outputSchema"]):
            del tool["outputSchema"]
        schema = tool.get("inputSchema")
        if _wire_valid(schema):
            continue
        meta = tool.get("_meta")
        tool["_meta"] = {**(meta if isinstance(meta, dict) else {}), ORIGINAL_SCHEMA: schema}
        tool["inputSchema"] = {"type": "object"}


def _wire_valid(schema: object) -> bool:
    """What the 2025-11-25 wire model takes as a tool's input (or output) schema."""
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return False
    properties = schema.get("properties")
    required = schema.get("required")
    return (
        (properties is None or isinstance(properties, dict))
        and all(isinstance(value, dict | bool) for value in (properties or {}).values())
        and (required is None or isinstance(required, list))
        and all(isinstance(name, str) for name in required or ())
        and isinstance(schema.get("$schema", ""), str)
    )


class _Recursive(Exception):
    pass


def _has_local_refs(node: Any) -> bool:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(("#/$defs/", "#/definitions/")):
            return True
        return any(_has_local_refs(v) for k, v in node.items() if k not in _DATA_KEYS)
    if isinstance(node, list):
        return any(_has_local_refs(item) for item in node)
    return False


def _inline(node: Any, definitions: Mapping[str, Any], seen: tuple[str, ...]) -> Any:
    if isinstance(node, list):
        return [_inline(item, definitions, seen) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith(("#/$defs/", "#/definitions/")):
        name = ref.rsplit("/", 1)[1]
        if name in seen or name not in definitions or not isinstance(definitions[name], dict):
            raise _Recursive
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        return _inline({**definitions[name], **siblings}, definitions, (*seen, name))
    return {
        key: value if key in _DATA_KEYS else _inline(value, definitions, seen)
        for key, value in node.items()
        if key not in ("$defs", "definitions") or not seen
    }


def _add_missing_items(node: Any) -> bool:
    """Give every array schema without `items` an `items: {}`; True if any was changed."""
    changed = False
    if isinstance(node, dict):
        kind = node.get("type")
        is_array = kind == "array" or (isinstance(kind, list) and "array" in kind)
        if is_array and "items" not in node and "prefixItems" not in node:
            node["items"] = {}
            changed = True
        for key, value in node.items():
            if key not in _DATA_KEYS:
                changed = _add_missing_items(value) or changed
    elif isinstance(node, list):
        for item in node:
            changed = _add_missing_items(item) or changed
    return changed
