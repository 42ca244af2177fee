"""An MCP result is cut as a shell command's output is (`McpToolResult.bounded`, applied by
`sessions/mcp_tools.py`): the model, the log and the editor get the head and the tail of its
text within the shell's limits and a note of what was left out; images past the size a read
file may have become notes. A real server (tests/mcp_servers/huge.py) answers through the hub.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from mcp_bridge_support import stdio_spec

from acp_agent.mcp_bridge import McpHub, McpToolResult
from acp_agent.mcp_bridge.model import ResourceContent
from acp_agent.messages import ImagePart, TextPart
from acp_agent.sessions.mcp_tools import McpArguments, mcp_tools, outcome_of
from acp_agent.tools import ToolContext, ToolOutcome
from acp_agent.tools.file_context import MAX_MEDIA_BYTES
from acp_agent.tools.shell import MODEL_HEAD_CHARS, MODEL_TAIL_CHARS

pytestmark = pytest.mark.anyio

HUGE = 5_000_000
LIMIT = MODEL_HEAD_CHARS + MODEL_TAIL_CHARS
NOTE_ROOM = 300
"""Room for the marker, a resource's heading and the closing note."""


class NoEditor:
    can_read_files = False
    can_write_files = False
    can_run_terminals = False


@pytest.fixture
async def hub(tmp_path: Path) -> AsyncIterator[McpHub]:
    async with McpHub([stdio_spec("huge", "huge.py")], cwd=tmp_path, connect_timeout=30) as hub:
        yield hub


async def call_huge(hub: McpHub, tmp_path: Path, size: int, kind: str) -> ToolOutcome:
    tool = mcp_tools(hub)["mcp__huge__huge"]
    ctx = ToolContext(
        session_id="s",
        cwd=tmp_path,
        roots=(tmp_path,),
        editor=NoEditor(),  # type: ignore[arg-type]
        tool_call_id="c1",
    )
    return await tool.run(McpArguments.model_validate({"size": size, "kind": kind}), ctx)


def assert_cut(text: str) -> None:
    """Head and tail present, the middle left out and said so, within the shell's limits."""
    assert len(text) <= LIMIT + NOTE_ROOM, len(text)
    assert "HEAD" in text and "TAIL" in text
    omitted = HUGE - LIMIT
    assert f"[... {omitted} characters omitted ...]" in text
    assert text.endswith(
        f"[result truncated: {omitted} characters from the middle were left out; "
        "ask the tool for less at a time]"
    )


async def test_a_huge_text_result_reaches_the_model_as_head_and_tail(
    hub: McpHub, tmp_path: Path
) -> None:
    outcome = await call_huge(hub, tmp_path, HUGE, "text")

    assert_cut(outcome.model_text)
    assert outcome.model_text.startswith("HEAD" + "x" * (MODEL_HEAD_CHARS - 4) + "\n[...")
    assert ("x" * (MODEL_TAIL_CHARS - 4) + "TAIL\n") in outcome.model_text
    assert sum(len(p.text) for p in outcome.model_parts if isinstance(p, TextPart)) <= (
        LIMIT + NOTE_ROOM
    )
    assert outcome.display == (TextPart(outcome.model_text),)  # the editor gets no more
    assert outcome.raw_output is None  # so the engine sends the model's text as rawOutput


async def test_a_huge_embedded_resource_is_cut_and_keeps_its_name(
    hub: McpHub, tmp_path: Path
) -> None:
    outcome = await call_huge(hub, tmp_path, HUGE, "resource")

    assert outcome.model_text.startswith("[resource file:///big.log]\nHEAD")
    assert_cut(outcome.model_text)


async def test_huge_structured_content_is_cut_as_json_text_and_not_passed_on_whole(
    hub: McpHub, tmp_path: Path
) -> None:
    outcome = await call_huge(hub, tmp_path, HUGE, "structured")

    assert outcome.raw_output is None
    assert outcome.model_text.startswith('{"log": "HEAD')
    assert 'TAIL"}\n[result truncated: ' in outcome.model_text
    assert len(outcome.model_text) <= LIMIT + NOTE_ROOM


async def test_an_image_past_the_media_limit_becomes_a_note(hub: McpHub, tmp_path: Path) -> None:
    outcome = await call_huge(hub, tmp_path, MAX_MEDIA_BYTES + 1024, "image")

    assert not [p for p in outcome.model_parts if isinstance(p, ImagePart)]
    assert outcome.model_text == (
        f"the picture:\n[image (image/png), {MAX_MEDIA_BYTES + 1024} bytes: too large, not shown]"
    )


async def test_a_result_within_the_limits_is_passed_whole(hub: McpHub, tmp_path: Path) -> None:
    text = await call_huge(hub, tmp_path, LIMIT, "text")
    image = await call_huge(hub, tmp_path, 1000, "image")

    assert text.model_text == "HEAD" + "x" * (LIMIT - 8) + "TAIL"
    [picture] = [p for p in image.model_parts if isinstance(p, ImagePart)]
    assert len(picture.data) > 1000


def test_the_cut_spans_parts_and_one_marker_sits_where_it_starts() -> None:
    head, tail = MODEL_HEAD_CHARS, MODEL_TAIL_CHARS
    result = McpToolResult(
        (
            TextPart("a" * (head - 10)),
            ResourceContent("file:///mid.txt", "text/plain", text="b" * head),
            TextPart("c" * tail),
            TextPart("d" * 10),
        )
    )

    outcome = outcome_of(result)

    first, resource, third, last, note = outcome.model_parts
    assert first == TextPart("a" * (head - 10))
    marker = f"\n[... {head} characters omitted ...]\n"
    assert resource == TextPart(f"[resource file:///mid.txt]\n{'b' * 10}{marker}")
    assert (third, last) == (TextPart("c" * (tail - 10)), TextPart("d" * 10))
    assert note == TextPart(
        f"[result truncated: {head} characters from the middle were left out; "
        "ask the tool for less at a time]"
    )


def test_small_structured_content_stays_the_editors_raw_output() -> None:
    outcome = outcome_of(McpToolResult((TextPart("ok"),), structured={"sum": 5}))
    assert outcome.raw_output == {"sum": 5}
    assert json.loads(outcome_of(McpToolResult((), structured={"sum": 5})).model_text) == {"sum": 5}
