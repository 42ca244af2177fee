from __future__ import annotations

import json
from typing import Any

import pytest

from acp_agent.tools import builtin_tools

TOOLS = builtin_tools()


def test_the_builtin_tools_and_how_they_are_shown() -> None:
    assert {name: (tool.kind, tool.read_only) for name, tool in TOOLS.items()} == {
        "read_file": ("read", True),
        "search": ("search", True),
        "edit_file": ("edit", False),
        "write_file": ("edit", False),
        "shell": ("execute", False),
        "job_output": ("read", True),
        "job_kill": ("execute", False),
        "plan": ("think", True),
        "web_fetch": ("fetch", True),
        "agent": ("think", True),
    }


def properties(schema: Any) -> list[tuple[str, dict[str, Any]]]:
    """Every (name, schema) of an object property, nested ones included."""
    found: list[tuple[str, dict[str, Any]]] = []
    if isinstance(schema, dict):
        for name, child in schema.get("properties", {}).items():
            found.append((name, child))
        for value in schema.values():
            found.extend(properties(value))
    elif isinstance(schema, list):
        for item in schema:
            found.extend(properties(item))
    return found


@pytest.mark.parametrize("name", list(TOOLS))
def test_every_schema_is_self_contained_strict_and_described(name: str) -> None:
    spec = TOOLS[name].spec()

    assert "$ref" not in json.dumps(spec.parameters)
    assert "$defs" not in spec.parameters
    assert spec.parameters["additionalProperties"] is False
    assert spec.description
    for prop, schema in properties(spec.parameters):
        assert schema.get("description"), f"{name}.{prop} has no description"


def test_nested_items_are_inlined_with_their_constraints() -> None:
    edits = TOOLS["edit_file"].spec().parameters["properties"]["edits"]
    item = edits["anyOf"][0]["items"]

    assert item["additionalProperties"] is False
    assert item["required"] == ["old_text", "new_text"]
    assert item["properties"]["old_text"]["minLength"] == 1
