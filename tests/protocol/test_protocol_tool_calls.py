"""Tool calls on the wire: what the client sees before it is asked (the diff, the command),
the permission request carrying it, and the same call continuing to its end with
`rawOutput`. Every tool frame is checked against the stable v1 schema (1.25), which has the
tool call's `name` the pinned package lacks."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from acp.schema import RequestPermissionRequest, SessionNotification
from fake_acp_client import ZED_INITIALIZE, FakeClient

pytestmark = pytest.mark.anyio

Connection = Callable[[], Any]
SCHEMA = json.loads(
    (Path(__file__).parent / "fixtures" / "tool-calls.schema.json").read_text("utf-8")
)
LOCAL_COMMANDS_INITIALIZE: dict[str, Any] = {
    "protocolVersion": 1,
    "clientCapabilities": {"fs": {"readTextFile": True, "writeTextFile": True}},
}
"""A client with files but no terminals: commands run locally, their output comes as text."""


def assert_schema(definition: str, value: Any) -> None:
    jsonschema.validate(value, {"$ref": f"#/$defs/{definition}", "$defs": SCHEMA["$defs"]})


def tool_frames(client: FakeClient, session_id: str) -> list[dict[str, Any]]:
    """`tool_call` / `tool_call_update` updates and `session/request_permission` params, in
    the order the agent sent them, each checked against its schema definition."""
    frames: list[dict[str, Any]] = []
    for frame in client.frames:
        method = frame.get("method")
        if method == "session/request_permission":
            assert_schema("RequestPermissionRequest", frame["params"])
            RequestPermissionRequest.model_validate(frame["params"])
            frames.append({"permission": frame["params"]})
        elif method == "session/update" and frame["params"]["sessionId"] == session_id:
            update = frame["params"]["update"]
            if update["sessionUpdate"] == "tool_call":
                assert_schema("ToolCall", update)
            elif update["sessionUpdate"] == "tool_call_update":
                assert_schema("ToolCallUpdate", update)
            else:
                continue
            SessionNotification.model_validate(frame["params"])
            frames.append(update)
    return frames


def tool(name: str, **arguments: Any) -> str:
    return f"@tool {name} {json.dumps(arguments)}"


async def run(
    client: FakeClient, cwd: Path, prompt: str, initialize: dict[str, Any] = ZED_INITIALIZE
) -> tuple[str, list[dict[str, Any]]]:
    await client.initialize(initialize)
    session_id = await client.new_session(cwd)
    reply = await client.prompt(session_id, prompt)
    assert reply["result"] == {"stopReason": "end_turn"}, reply
    return session_id, tool_frames(client, session_id)


async def test_an_edit_asks_with_its_diff_and_locations_then_the_same_call_completes(
    connection: Connection, tmp_path: Path
) -> None:
    target = tmp_path / "notes.txt"
    target.write_text("alpha\nbeta\n")
    arguments = {"path": "notes.txt", "old_text": "beta", "new_text": "gamma"}
    diff = {"type": "diff", "path": str(target), "oldText": "alpha\nbeta\n"}

    async with connection() as client:
        _, frames = await run(client, tmp_path, tool("edit_file", **arguments))

    started, asked, running, finished = frames
    call_id = started["toolCallId"]
    assert started == {
        "sessionUpdate": "tool_call",
        "toolCallId": call_id,
        "title": "Edit notes.txt",
        "kind": "edit",
        "status": "pending",
        "name": "edit_file",
        "rawInput": arguments,
        "locations": [{"path": str(target)}],
        "content": [{**diff, "newText": "alpha\ngamma\n"}],
    }
    tool_call = asked["permission"]["toolCall"]
    assert tool_call == {
        "toolCallId": call_id,
        "title": "Edit notes.txt",
        "kind": "edit",
        "name": "edit_file",
        "rawInput": arguments,
        "locations": [{"path": str(target)}],
        "content": [{**diff, "newText": "alpha\ngamma\n"}],
    }
    assert running == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": call_id,
        "status": "in_progress",
    }
    assert finished == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": call_id,
        "status": "completed",
        "locations": [{"path": str(target), "line": 2}],
        "content": [{**diff, "newText": "alpha\ngamma\n"}],
        "rawOutput": {
            "path": str(target),
            "edits": 1,
            "replacements": 1,
            "first_changed_line": 2,
        },
    }
    assert target.read_text() == "alpha\ngamma\n"


async def test_a_new_file_is_asked_for_as_a_diff_without_old_text(
    connection: Connection, tmp_path: Path
) -> None:
    target = tmp_path / "src" / "new.py"
    target.parent.mkdir()

    async with connection() as client:
        _, frames = await run(
            client, tmp_path, tool("write_file", path="src/new.py", content="x = 1\n")
        )

    started, asked, _, finished = frames
    created = [{"type": "diff", "path": str(target), "newText": "x = 1\n"}]
    assert started["content"] == asked["permission"]["toolCall"]["content"] == created
    assert asked["permission"]["toolCall"]["locations"] == [{"path": str(target)}]
    assert finished["toolCallId"] == started["toolCallId"]
    assert finished["content"] == created
    assert finished["rawOutput"] == {
        "path": str(target),
        "created": True,
        "changed": True,
        "lines": 1,
        "bytes": 6,
    }
    assert target.read_text() == "x = 1\n"


async def test_a_command_is_asked_for_as_its_command_line_and_a_non_zero_exit_fails_it(
    connection: Connection, tmp_path: Path
) -> None:
    command = "echo checking; exit 3"

    async with connection() as client:
        session_id, frames = await run(
            client, tmp_path, tool("shell", command=command), LOCAL_COMMANDS_INITIALIZE
        )
        said = "".join(
            u["content"]["text"]
            for u in client.updates(session_id)
            if u["sessionUpdate"] == "agent_message_chunk"
        )

    started, asked, *_, finished = frames
    shown = [{"type": "content", "content": {"type": "text", "text": f"```sh\n{command}\n```"}}]
    assert (started["name"], started["rawInput"]) == ("shell", {"command": command})
    assert started["content"] == asked["permission"]["toolCall"]["content"] == shown
    assert asked["permission"]["toolCall"]["title"] == command
    assert finished["toolCallId"] == started["toolCallId"]
    assert finished["status"] == "failed"
    assert [c["content"]["text"] for c in finished["content"]] == [
        "```\nchecking\n```",
        "Exited with code 3.",
    ]
    assert finished["rawOutput"] == {
        "exit_code": 3,
        "signal": None,
        "timed_out": False,
        "output_truncated": False,
    }
    assert "[exit code 3]" in said, "the model got the output as a normal result"


async def test_a_finished_read_shows_the_text_read(connection: Connection, tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("first line\nsecond line\nthird line\n")

    async with connection() as client:
        _, frames = await run(client, tmp_path, tool("read_file", path="a.txt", line=2, limit=1))

    started, _, finished = frames
    assert (started["name"], started["rawInput"]) == (
        "read_file",
        {"path": "a.txt", "line": 2, "limit": 1},
    )
    assert "content" not in started
    assert finished["status"] == "completed"
    assert finished["content"] == [
        {"type": "content", "content": {"type": "text", "text": "```a.txt#L2-2\nsecond line\n```"}}
    ]
    assert finished["rawOutput"] == {
        "path": str(tmp_path / "a.txt"),
        "line": 2,
        "lines": 1,
        "bytes": 12,
        "continues": True,
    }


async def test_every_finished_tool_call_carries_raw_output(
    connection: Connection, tmp_path: Path
) -> None:
    """A client that expands only `rawOutput` sees each result: tools with a structured
    result give it, the others what the model was told, a failure its reason."""
    (tmp_path / "a.txt").write_text("alpha\n")
    prompt = "\n".join(
        [
            tool("plan", entries=[{"content": "look", "status": "pending"}]),
            tool("search", grep="alpha"),
            tool("read_file", path="missing.txt"),
            tool("no_such_tool"),
        ]
    )

    async with connection() as client:
        _, frames = await run(client, tmp_path, prompt, LOCAL_COMMANDS_INITIALIZE)

    finished = [f for f in frames if f.get("status") in ("completed", "failed")]
    assert len(finished) == 4
    assert all(isinstance(f.get("rawOutput"), dict) and f["rawOutput"] for f in finished)
    failed = [f for f in finished if f["status"] == "failed"]
    assert [sorted(f["rawOutput"]) for f in failed] == [["error"], ["error"]]
