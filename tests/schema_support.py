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
from jsonschema.exceptions import best_match

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
    if closed and unstable:
        return _frame_validator(dialect, definition, closed=True)
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


# --- one frame against its exact definition ------------------------------------------------

Sender = Literal["agent", "client"]

NEWER_THAN_SCHEMA: dict[Dialect, dict[str, str]] = {
    "v1": {},
    "v2": {
        "replay_complete": "the Preview added this `session/update` kind after the npm 2.4.0"
        " schema, which accepts it only by its catch-all `unknown` branch",
    },
}
"""Allow-list, 1 of 2: `session/update` kinds intentionally outside the closed schema,
each with its reason. Their notifications are checked with the catch-all branches open
(still against their definition); nothing else is let through. (The legacy v1 `models`
field of session/new and session/load answers and `_meta` extensions need no entry: no
definition forbids extra fields.)"""


WITHOUT_DEFINITION: dict[Dialect, dict[str, str]] = {
    "v1": {
        "session/set_model": "the legacy model picker of clients that predate config options"
        " (the agent still answers it in v1); the npm 2.4.0 schema dropped the method",
    },
    "v2": {},
}
"""Allow-list, 2 of 2: methods whose answers the schema has no definition for, each with
its reason. Their results are not checked (their errors still are, as every `Error`)."""


@cache
def _closed_definitions(dialect: Dialect) -> dict[str, Any]:
    """The unstable schema's definitions without catch-all branches, built once: closing
    the v2 schema is the slow part of a validator."""
    closed: dict[str, Any] = _closed(schema_document(dialect, "schema.unstable.json")["$defs"])
    return closed


@cache
def _frame_validator(dialect: Dialect, definition: str, closed: bool) -> Any:
    definitions = (
        _closed_definitions(dialect)
        if closed
        else schema_document(dialect, "schema.unstable.json")["$defs"]
    )
    schema = {"$ref": f"#/$defs/{definition}", "$defs": definitions}
    return jsonschema.Draft202012Validator(schema)


@cache
def _definitions_by_method(dialect: Dialect) -> dict[tuple[str, str, str], str]:
    """(method, shape, side handling it) -> definition name, from the x-method/x-side tags;
    shape is Request, Response or Notification."""
    index: dict[tuple[str, str, str], str] = {}
    for name, definition in schema_document(dialect, "schema.unstable.json")["$defs"].items():
        if not isinstance(definition, dict) or "x-method" not in definition:
            continue
        for shape in ("Request", "Response", "Notification"):
            if name.endswith(shape):
                key = (definition["x-method"], shape, definition.get("x-side", ""))
                index.setdefault(key, name)
    return index


def frame_definition(
    dialect: Dialect, frame: dict[str, Any], sender: Sender, answered: str | None = None
) -> tuple[str | None, Any]:
    """The definition `frame` (sent by `sender`) must match, None when the schema has none,
    and the part of the frame it describes. `answered`: for a result, the method of the
    request it answers."""
    receiver = "client" if sender == "agent" else "agent"
    if "method" in frame:
        shape = "Request" if "id" in frame else "Notification"
        index = _definitions_by_method(dialect)
        name = index.get((frame["method"], shape, receiver))
        # `protocol` methods ($/cancel_request) either side sends
        name = name or index.get((frame["method"], shape, "protocol"))
        return name, frame.get("params")
    if "error" in frame:
        return "Error", frame["error"]
    name = _definitions_by_method(dialect).get((answered or "?", "Response", sender))
    return name, frame.get("result")


def frame_problem(
    dialect: Dialect, frame: dict[str, Any], sender: Sender, answered: str | None = None
) -> str | None:
    """Why `frame` is not what its dialect's unstable schema (catch-alls closed) defines
    for it, or None when it is."""
    name, value = frame_definition(dialect, frame, sender, answered)
    what = frame.get("method") or answered or "?"
    if name is None and what in WITHOUT_DEFINITION[dialect]:
        return None
    if name is None:
        return f"no {dialect} schema definition for a {what} frame from the {sender}"
    closed = not _newer_than_schema(dialect, value)
    error = best_match(_frame_validator(dialect, name, closed).iter_errors(value))
    if error is None:
        return None
    return (
        f"{dialect} frame from the {sender} is not a valid {name}: {error.message}"
        f" at {list(error.absolute_path)}\n{json.dumps(frame)[:2000]}"
    )


def assert_valid_frame(
    dialect: Dialect, frame: dict[str, Any], sender: Sender, answered: str | None = None
) -> None:
    problem = frame_problem(dialect, frame, sender, answered)
    if problem is not None:
        raise AssertionError(problem)


def _newer_than_schema(dialect: Dialect, params: Any) -> bool:
    update = params.get("update") if isinstance(params, dict) else None
    return isinstance(update, dict) and update.get("sessionUpdate") in NEWER_THAN_SCHEMA[dialect]


def assert_frames_from_agent(
    dialect: Dialect, received: list[dict[str, Any]], sent: list[dict[str, Any]]
) -> None:
    """Every frame the agent sent (`received` by the client) is valid; `sent`, the client's
    frames, name the method each answer is of."""
    asked = {f["id"]: f["method"] for f in sent if "method" in f and "id" in f}
    for frame in received:
        answered = None if "method" in frame else asked.get(frame.get("id"))
        assert_valid_frame(dialect, frame, "agent", answered)


def negotiated_dialect(received: list[dict[str, Any]], sent: list[dict[str, Any]]) -> Dialect:
    """The dialect the agent answered the client's `initialize` with (`received` by the
    client, `sent` by it)."""
    [asked] = [f for f in sent if f.get("method") == "initialize"]
    [answer] = [f for f in received if f.get("id") == asked["id"] and "method" not in f]
    version = answer["result"]["protocolVersion"]
    assert version in (1, 2), f"the agent answered initialize with protocolVersion {version!r}"
    return "v1" if version == 1 else "v2"
