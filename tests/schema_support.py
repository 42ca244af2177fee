"""The ACP JSON schemas (v1 and v2, each stable and with its unstable parts) as one strict
validator per definition, for tests that check a frame is what the schema defines.

The schemas are the ones the npm `@agentclientprotocol/sdk` ships (node_modules), the same
files as shared/spec/stable-v1 and shared/spec/v2. "Strict" as the agent's rule 7 asks of
what it emits: the unstable schema may be `closed`, its catch-all branches (kept for
extensions and future values) taken out, so a value only such a branch would let through
fails.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any, Literal

import jsonschema

SCHEMAS = Path(__file__).resolve().parent.parent / "node_modules/@agentclientprotocol/sdk/schema"
Dialect = Literal["v1", "v2"]
OPEN_BRANCHES = frozenset({"other", "unknown"})
"""Titles of the schemas' catch-all branches."""


@cache
def schema_document(dialect: Dialect, name: str) -> dict[str, Any]:
    """A schema file as JSON: `name` is `schema.json` (stable) or `schema.unstable.json`."""
    document: dict[str, Any] = json.loads((SCHEMAS / dialect / name).read_text(encoding="utf-8"))
    return document


@cache
def validator(
    dialect: Dialect, definition: str, *, unstable: bool = True, closed: bool = False
) -> jsonschema.Draft202012Validator:
    """Validates a `definition` of the dialect's stable schema, or of the one with its
    unstable parts; `closed`: without the catch-all branches."""
    name = "schema.unstable.json" if unstable else "schema.json"
    schema = {"$ref": f"#/$defs/{definition}", "$defs": schema_document(dialect, name)["$defs"]}
    return jsonschema.Draft202012Validator(_closed(schema) if closed else schema)


def assert_frame(
    value: Any, definition: str, dialect: Dialect, *, stable: bool = True, closed: bool = False
) -> None:
    """`value` is a `definition` of the dialect's schema with its unstable parts (`closed`:
    not by a catch-all branch) and, where `stable`, of the stable schema alone too."""
    validator(dialect, definition, closed=closed).validate(value)
    if stable:
        validator(dialect, definition, unstable=False).validate(value)


def assert_v1(value: Any, definition: str, *, stable: bool = True, closed: bool = False) -> None:
    assert_frame(value, definition, "v1", stable=stable, closed=closed)


def assert_v2(value: Any, definition: str, *, stable: bool = True, closed: bool = False) -> None:
    assert_frame(value, definition, "v2", stable=stable, closed=closed)


def _closed(node: Any) -> Any:
    if isinstance(node, list):
        return [_closed(item) for item in node]
    if not isinstance(node, dict):
        return node
    closed = {key: _closed(value) for key, value in node.items()}
    if isinstance(closed.get("anyOf"), list):
        closed["anyOf"] = [b for b in closed["anyOf"] if b.get("title") not in OPEN_BRANCHES]
    return closed
