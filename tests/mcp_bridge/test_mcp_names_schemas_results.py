"""Pure parts of the bridge: tool names, schema repair, result mapping for the model."""

from __future__ import annotations

import base64
import re
from typing import Any

import pytest

from acp_agent.mcp_bridge import (
    AudioContent,
    McpToolResult,
    ResourceContent,
    ResourceLinkContent,
    qualified_name,
)
from acp_agent.mcp_bridge._names import prompt_command
from acp_agent.mcp_bridge._schema import ORIGINAL_SCHEMA, repair_schema, shield_listing
from acp_agent.messages import ImagePart, TextPart

VENDOR_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


# --- names -----------------------------------------------------------------------------------


def test_a_plain_name_is_server_qualified() -> None:
    assert qualified_name("github", "create_issue") == "mcp__github__create_issue"


@pytest.mark.parametrize(
    ("server", "tool"),
    [
        ("github", "issues.create"),
        ("my server", "tool"),
        ("a__b", "c"),
        ("srv", "x" * 80),
        ("s" * 70, "t"),
        ("ünïcode", "wérk"),
        ("srv", ""),
    ],
)
def test_odd_names_become_vendor_safe_and_stay_the_same(server: str, tool: str) -> None:
    name = qualified_name(server, tool)
    assert VENDOR_NAME.match(name)
    assert name == qualified_name(server, tool)
    assert re.search(r"_[0-9a-f]{8}$", name)


def test_names_that_would_collide_do_not() -> None:
    pairs = [("a", "b__c"), ("a__b", "c"), ("srv", "x.y"), ("srv", "x_y"), ("srv", "x y")]
    names = [qualified_name(server, tool) for server, tool in pairs]
    assert len(set(names)) == len(names)
    long_a, long_b = qualified_name("srv", "x" * 70 + "a"), qualified_name("srv", "x" * 70 + "b")
    assert long_a != long_b and len(long_a) == len(long_b) == 64


def test_a_prompt_is_a_slash_command_without_spaces() -> None:
    assert prompt_command("github", "review pr") == "github:review-pr"


# --- schemas ---------------------------------------------------------------------------------


def test_a_good_schema_passes_unchanged() -> None:
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    assert repair_schema(schema) == (schema, [])


@pytest.mark.parametrize(
    ("schema", "expected", "note"),
    [
        (
            {"properties": {"q": {"type": "string"}}},
            {"type": "object", "properties": {"q": {"type": "string"}}},
            "added the missing type 'object'",
        ),
        ({}, {"type": "object", "properties": {}}, "added the missing type 'object'"),
        (
            {"type": ["object", "null"], "properties": {}},
            {"type": "object", "properties": {}},
            "narrowed type ['object', 'null'] to 'object'",
        ),
        (
            {"type": "object", "properties": {"tags": {"type": "array"}}},
            {"type": "object", "properties": {"tags": {"type": "array", "items": {}}}},
            "added 'items' to arrays that had none",
        ),
        (
            {
                "type": "object",
                "oneOf": [
                    {"properties": {"a": {"type": "string"}}, "required": ["a", "z"]},
                    {"properties": {"b": {"type": "string"}}, "required": ["z"]},
                ],
            },
            {
                "type": "object",
                "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
                "required": ["z"],
            },
            "merged the top-level oneOf into one object",
        ),
        (
            {"type": "object", "properties": {"a": {"type": "string"}}, "enum": [{"a": "x"}]},
            {"type": "object", "properties": {"a": {"type": "string"}}},
            "dropped the top-level enum",
        ),
        (
            {
                "type": "object",
                "properties": {"p": {"$ref": "#/definitions/P", "description": "a point"}},
                "definitions": {"P": {"type": "object", "properties": {"x": {"type": "number"}}}},
            },
            {
                "type": "object",
                "properties": {
                    "p": {
                        "type": "object",
                        "properties": {"x": {"type": "number"}},
                        "description": "a point",
                    }
                },
            },
            "inlined its $ref definitions",
        ),
        (
            {"type": "object", "properties": {"a": {"type": "string"}, "b": 3}},
            {"type": "object", "properties": {"a": {"type": "string"}}},
            "dropped property 'b', whose schema is not an object",
        ),
    ],
)
def test_schemas_vendors_reject_are_repaired(
    schema: dict[str, Any], expected: dict[str, Any], note: str
) -> None:
    repaired, notes = repair_schema(schema)
    assert repaired == expected
    assert note in notes


def test_a_recursive_schema_keeps_its_refs() -> None:
    schema = {
        "type": "object",
        "properties": {"tree": {"$ref": "#/$defs/Node"}},
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}},
            }
        },
    }
    repaired, notes = repair_schema(schema)
    assert repaired == schema and notes == []


def test_enum_and_default_values_are_data_not_schemas() -> None:
    schema = {
        "type": "object",
        "properties": {"v": {"default": {"type": "array"}, "enum": [{"type": "array"}]}},
    }
    assert repair_schema(schema) == (schema, [])


@pytest.mark.parametrize(
    ("schema", "reason"),
    [
        ({"type": "string"}, "it takes 'string' arguments, not an object of named arguments"),
        (["not", "a", "schema"], "its input schema is not a JSON object"),
        (None, "its input schema is not a JSON object"),
        ({"type": "object", "properties": ["a"]}, "its 'properties' is not an object"),
        ({"type": "object", "default": object()}, "its input schema is not JSON"),
        (
            {"type": "object", "description": "x" * 100_001},
            "its input schema is too large (100038 characters)",
        ),
    ],
)
def test_schemas_that_cannot_be_repaired_skip_the_tool(schema: Any, reason: str) -> None:
    assert repair_schema(schema) == (None, [reason])


def test_a_listing_with_schemas_the_sdk_rejects_is_shielded_not_lost() -> None:
    good = {"type": "object", "properties": {"q": {"type": "string"}}}
    result: dict[str, Any] = {
        "tools": [
            {"name": "good", "inputSchema": good},
            {"name": "untyped", "inputSchema": {"properties": {}}, "_meta": {"k": 1}},
            {"name": "missing"},
            {"name": "out", "inputSchema": good, "outputSchema": {"type": "string"}},
        ]
    }
    shield_listing(result)
    good_tool, untyped, missing, out = result["tools"]
    assert good_tool == {"name": "good", "inputSchema": good}
    assert untyped["inputSchema"] == {"type": "object"}
    assert untyped["_meta"] == {"k": 1, ORIGINAL_SCHEMA: {"properties": {}}}
    assert missing["_meta"] == {ORIGINAL_SCHEMA: None}
    assert "outputSchema" not in out


# --- results for the model -------------------------------------------------------------------


def test_every_kind_of_content_reaches_the_model() -> None:
    png = base64.b64encode(b"png").decode()
    result = McpToolResult(
        (
            TextPart("text"),
            ImagePart(png, "image/png"),
            AudioContent(base64.b64encode(b"1234").decode(), "audio/wav"),
            ResourceContent("file:///a.txt", "text/plain", text="A"),
            ResourceContent("file:///b.png", "image/png", blob=png),
            ResourceContent("file:///c.bin", None, blob=base64.b64encode(b"xy").decode()),
            ResourceContent("file:///d"),
            ResourceLinkContent("https://x/y", "y"),
        )
    )
    assert result.model_parts() == (
        TextPart("text"),
        ImagePart(png, "image/png"),
        TextPart("[audio (audio/wav), 4 bytes: not shown]"),
        TextPart("[resource file:///a.txt]\nA"),
        ImagePart(png, "image/png"),
        TextPart("[resource file:///c.bin (binary), 2 bytes]"),
        TextPart("[resource file:///d]"),
        TextPart("[resource link y https://x/y]"),
    )


def test_structured_content_reaches_the_model_once() -> None:
    with_text = McpToolResult((TextPart('{"a": 1}'),), structured={"a": 1})
    assert with_text.model_parts() == (TextPart('{"a": 1}'),)
    alone = McpToolResult((), structured={"a": "é"})
    assert alone.model_parts() == (TextPart('{"a": "é"}'),)
    with_image = McpToolResult((ImagePart("aGk=", "image/png"),), structured={"a": 1})
    assert with_image.model_parts()[1] == TextPart('{"a": 1}')


def test_an_empty_result_still_says_something() -> None:
    assert McpToolResult(()).model_parts() == (TextPart("(the tool returned no content)"),)
    assert McpToolResult((ImagePart("aGk=", "image/png"),)).text == "[image (image/png)]"
