"""Mentions over the wire: a prompt's `resource_link` to a `file://` URI is read (through
the client's fs when it offers it) and given to the model with its path and range; outside
the roots it asks first; a missing file is a note; directories are listed; large files cut;
images and PDFs go to the model as such; `session/load` shows the link the user typed.

The echo provider shows what the model got (a mention's link, then what was read for it);
its requests are recorded by wrapping `EchoProvider.stream`. PDFs go to the fake OpenAI
server, which records request bodies.
"""

from __future__ import annotations

import base64
import copy
import os
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp.schema import PromptRequest, RequestPermissionRequest, SessionNotification
from fake_acp_client import NO_FS_INITIALIZE, ZED_INITIALIZE, FakeClient, selected
from fake_llm import FakeLLM

from acp_agent.messages import ImagePart, Message, ResourceLinkPart, StreamEvent, TextPart
from acp_agent.providers import ModelRequest
from acp_agent.providers.echo import EchoProvider

pytestmark = pytest.mark.anyio

Connection = Callable[..., Any]

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
PDF = b"%PDF-1.4\n1 0 obj << /Type /Page >> endobj\ntrailer << >>\n%%EOF\n"


@pytest.fixture
def model_requests(monkeypatch: pytest.MonkeyPatch) -> list[ModelRequest]:
    """Every request the echo provider gets, as it was sent."""
    seen: list[ModelRequest] = []
    original = EchoProvider.stream

    def stream(
        self: EchoProvider, request: ModelRequest
    ) -> AbstractAsyncContextManager[AsyncIterator[StreamEvent]]:
        seen.append(copy.deepcopy(request))
        return original(self, request)

    monkeypatch.setattr(EchoProvider, "stream", stream)
    return seen


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "workspace"
    root.mkdir()
    (root / "app.py").write_text("def main():\n    return 'on disk'\n")
    return Path(os.path.realpath(root))


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "notes.txt").write_text("notes from outside\n")
    return Path(os.path.realpath(elsewhere))


def link(path: Path, fragment: str = "", name: str | None = None) -> dict[str, Any]:
    return {"type": "resource_link", "uri": path.as_uri() + fragment, "name": name or path.name}


def text(words: str) -> dict[str, Any]:
    return {"type": "text", "text": words}


async def prompt(client: FakeClient, session_id: str, *blocks: dict[str, Any]) -> dict[str, Any]:
    params = {"sessionId": session_id, "prompt": list(blocks)}
    PromptRequest.model_validate(params)
    return await client.request("session/prompt", params)


def reply_text(client: FakeClient, session_id: str) -> str:
    return "".join(
        u["content"]["text"]
        for u in client.updates(session_id)
        if u["sessionUpdate"] == "agent_message_chunk"
    )


def mentions_of(request: ModelRequest) -> list[ResourceLinkPart]:
    last = request.messages[-1]
    return [part for part in last.parts if isinstance(part, ResourceLinkPart)]


def fs_reads(client: FakeClient) -> list[dict[str, Any]]:
    return client.agent_requests_for("fs/read_text_file")


def assert_updates_match_the_schema(client: FakeClient) -> None:
    for frame in client.frames:
        if frame.get("method") == "session/update":
            SessionNotification.model_validate(frame["params"])


# --- reading ------------------------------------------------------------------------------


async def test_a_mention_is_read_through_the_client_which_has_the_unsaved_buffer(
    connection: Connection, workspace: Path, model_requests: list[ModelRequest]
) -> None:
    async def unsaved_buffer(request: dict[str, Any]) -> None:
        await client.send(
            {"jsonrpc": "2.0", "id": request["id"], "result": {"content": "UNSAVED = True\n"}}
        )

    async with connection() as client:
        await client.initialize(ZED_INITIALIZE)
        client.answer_overrides["fs/read_text_file"] = unsaved_buffer
        session_id = await client.new_session(workspace)
        reply = await prompt(client, session_id, text("explain "), link(workspace / "app.py"))

    assert reply["result"] == {"stopReason": "end_turn"}
    assert fs_reads(client) == [
        {"sessionId": session_id, "path": str(workspace / "app.py"), "line": 1}
    ]
    (mention,) = mentions_of(model_requests[-1])
    assert mention.uri == (workspace / "app.py").as_uri()
    assert mention.context == (
        TextPart(f'<file path="{workspace}/app.py">\nUNSAVED = True\n</file>'),
    )
    echoed = reply_text(client, session_id)
    assert "UNSAVED = True" in echoed and "on disk" not in echoed
    assert_updates_match_the_schema(client)


async def test_without_the_clients_fs_a_mention_is_read_from_the_disk(
    connection: Connection, workspace: Path, model_requests: list[ModelRequest]
) -> None:
    async with connection() as client:
        await client.initialize(NO_FS_INITIALIZE)
        session_id = await client.new_session(workspace)
        reply = await prompt(client, session_id, link(workspace / "app.py"), text(" please"))

    assert reply["result"] == {"stopReason": "end_turn"}
    assert fs_reads(client) == []
    (mention,) = mentions_of(model_requests[-1])
    assert mention.context == (
        TextPart(f"<file path=\"{workspace}/app.py\">\ndef main():\n    return 'on disk'\n</file>"),
    )


async def test_a_line_range_asks_the_client_for_those_lines_and_names_them(
    connection: Connection, workspace: Path, model_requests: list[ModelRequest]
) -> None:
    (workspace / "long.py").write_text("".join(f"line_{n} = {n}\n" for n in range(1, 41)))
    async with connection() as client:
        await client.initialize()
        session_id = await client.new_session(workspace)
        await prompt(client, session_id, link(workspace / "long.py", "#L10:12"))
        await prompt(client, session_id, link(workspace / "long.py", "#L20-21"))

    first, second = fs_reads(client)
    assert (first["line"], first["limit"]) == (10, 3)
    assert (second["line"], second["limit"]) == (20, 2)
    (mention,) = mentions_of(model_requests[-1])
    assert mention.context == (
        TextPart(
            f'<file path="{workspace}/long.py" lines="20-21">\nline_20 = 20\nline_21 = 21\n</file>'
        ),
    )


async def test_a_missing_file_is_a_note_and_the_prompt_goes_on(
    connection: Connection, workspace: Path
) -> None:
    async with connection() as client:
        await client.initialize()
        session_id = await client.new_session(workspace)
        reply = await prompt(client, session_id, text("look at "), link(workspace / "gone.py"))

    assert reply["result"] == {"stopReason": "end_turn"}
    assert f"the mentioned file {workspace}/gone.py was not read: it does not exist" in (
        reply_text(client, session_id)
    )


async def test_a_directory_mention_is_a_listing(
    connection: Connection, workspace: Path, model_requests: list[ModelRequest]
) -> None:
    (workspace / "pkg" / "sub").mkdir(parents=True)
    (workspace / "pkg" / "mod.py").write_text("")
    (workspace / "pkg" / "sub" / "deep.py").write_text("")
    (workspace / "pkg" / "cache.tmp").write_text("")
    (workspace / "pkg" / ".gitignore").write_text("*.tmp\n")
    async with connection() as client:
        await client.initialize()
        session_id = await client.new_session(workspace)
        await prompt(client, session_id, link(workspace / "pkg", "", "pkg"))

    (mention,) = mentions_of(model_requests[-1])
    assert mention.context == (
        TextPart(
            f'<directory path="{workspace}/pkg">\n'
            ".gitignore\nmod.py\nsub/\nsub/deep.py\n</directory>"
        ),
    )
    assert fs_reads(client) == []


async def test_a_large_file_is_cut_at_the_configured_limit_with_a_note(
    connection: Connection, workspace: Path, tmp_path: Path, model_requests: list[ModelRequest]
) -> None:
    config = tmp_path / "agent.toml"
    config.write_text('mention_max_bytes = 1024\n[providers.echo]\ntype = "echo"\n')
    (workspace / "big.txt").write_text("".join(f"row {n:05d}\n" for n in range(1, 5001)))
    async with connection(str(config)) as client:
        await client.initialize()
        session_id = await client.new_session(workspace)
        reply = await prompt(client, session_id, link(workspace / "big.txt"))

    assert reply["result"] == {"stopReason": "end_turn"}
    (read,) = fs_reads(client)
    assert read["limit"] == 103  # the 102 lines of 10 bytes that fit, and one to see more
    (mention,) = mentions_of(model_requests[-1])
    (part,) = mention.context or ()
    assert isinstance(part, TextPart)
    assert part.text.startswith(f'<file path="{workspace}/big.txt" lines="1-102">\nrow 00001\n')
    assert part.text.endswith(
        "row 00102\n[cut at 1024 bytes: showing lines 1-102; the file goes on "
        "(read_file with line=103 reads further)]\n</file>"
    )


def embedded(uri: str, text: str) -> dict[str, Any]:
    """A mention as Zed sends it to an agent with `embeddedContext`: the text comes along."""
    return {"type": "resource", "resource": {"uri": uri, "text": text, "mimeType": "text/x-python"}}


async def test_an_embedded_mention_is_given_with_its_path_and_range_and_nothing_is_read(
    connection: Connection, workspace: Path, outside: Path, model_requests: list[ModelRequest]
) -> None:
    selection = embedded((outside / "notes.txt").as_uri() + "#L10:11", "ten\neleven\n")
    async with connection() as client:
        await client.initialize(ZED_INITIALIZE)
        session_id = await client.new_session(workspace)
        reply = await prompt(client, session_id, text("why "), selection)

    assert reply["result"] == {"stopReason": "end_turn"}
    # The editor sent it: no read, and no question even outside the roots.
    assert fs_reads(client) == []
    assert client.agent_requests_for("session/request_permission") == []
    (mention,) = mentions_of(model_requests[-1])
    assert mention.name == "notes.txt"
    assert mention.context == (
        TextPart(f'<file path="{outside}/notes.txt" lines="10-11">\nten\neleven\n</file>'),
    )
    assert mention.embedded_text is None  # given once, kept as context
    assert client.updates(session_id)[-1]["title"] == "why @notes.txt"


async def test_a_large_embedded_mention_is_cut_at_the_configured_limit(
    connection: Connection, workspace: Path, tmp_path: Path, model_requests: list[ModelRequest]
) -> None:
    config = tmp_path / "agent.toml"
    config.write_text('mention_max_bytes = 1024\n[providers.echo]\ntype = "echo"\n')
    big = "".join(f"row {n:05d}\n" for n in range(1, 5001))
    async with connection(str(config)) as client:
        await client.initialize(ZED_INITIALIZE)
        session_id = await client.new_session(workspace)
        reply = await prompt(client, session_id, embedded((workspace / "big.txt").as_uri(), big))

    assert reply["result"] == {"stopReason": "end_turn"}
    (mention,) = mentions_of(model_requests[-1])
    (part,) = mention.context or ()
    assert isinstance(part, TextPart)
    assert part.text.startswith(f'<file path="{workspace}/big.txt" lines="1-102">\nrow 00001\n')
    assert "[cut at 1024 bytes: showing lines 1-102" in part.text
    assert "row 00103" not in part.text


# --- outside the roots --------------------------------------------------------------------


async def test_a_mention_outside_the_roots_asks_and_a_rejection_is_a_note_not_a_failure(
    connection: Connection, workspace: Path, outside: Path
) -> None:
    async with connection() as client:
        await client.initialize()
        client.permission_answer = selected("reject_once")
        session_id = await client.new_session(workspace)
        reply = await prompt(client, session_id, text("read "), link(outside / "notes.txt"))

    assert reply["result"] == {"stopReason": "end_turn"}
    (asked,) = client.agent_requests_for("session/request_permission")
    RequestPermissionRequest.model_validate(asked)
    call = asked["toolCall"]
    assert call["title"] == f"Read {outside}/notes.txt (mentioned)"
    assert call["kind"] == "read"
    assert [option["name"] for option in asked["options"]] == [
        "Allow",
        f"Always allow read_file in {outside}",
        "Reject",
        f"Always reject read_file in {outside}",
    ]
    calls = [
        u
        for u in client.updates(session_id)
        if u["sessionUpdate"] in ("tool_call", "tool_call_update")
    ]
    assert [(u["sessionUpdate"], u.get("status")) for u in calls] == [
        ("tool_call", "pending"),
        ("tool_call_update", "failed"),
    ]
    assert {u["toolCallId"] for u in calls} == {call["toolCallId"]}
    echoed = reply_text(client, session_id)
    assert "was not read: the user did not allow reading it" in echoed
    assert "notes from outside" not in echoed
    assert fs_reads(client) == []
    assert_updates_match_the_schema(client)


async def test_an_allowed_mention_outside_the_roots_is_read(
    connection: Connection, workspace: Path, outside: Path
) -> None:
    async with connection() as client:
        await client.initialize()
        session_id = await client.new_session(workspace)
        reply = await prompt(client, session_id, link(outside / "notes.txt"))

    assert reply["result"] == {"stopReason": "end_turn"}
    assert "notes from outside" in reply_text(client, session_id)
    assert [r["path"] for r in fs_reads(client)] == [str(outside / "notes.txt")]
    statuses = [
        u.get("status")
        for u in client.updates(session_id)
        if u["sessionUpdate"].startswith("tool_call")
    ]
    assert statuses == ["pending", "completed"]


async def test_a_cancel_while_asking_about_a_mention_cancels_the_prompt_before_it_joins(
    connection: Connection, workspace: Path, outside: Path, model_requests: list[ModelRequest]
) -> None:
    async with connection() as client:
        await client.initialize()
        session_id = await client.new_session(workspace)
        asked, withdrawn = anyio.Event(), anyio.Event()

        async def never_answered(params: dict[str, Any]) -> dict[str, Any]:
            asked.set()
            await withdrawn.wait()
            return {"outcome": {"outcome": "cancelled"}}

        client.permission_answer = never_answered
        request_id = await client.start_request(
            "session/prompt",
            {"sessionId": session_id, "prompt": [link(outside / "notes.txt")]},
        )
        await asked.wait()
        await client.notify("session/cancel", {"sessionId": session_id})
        reply = await client.reply(request_id)
        await client.wait_for(lambda f: f.get("method") == "$/cancel_request")
        withdrawn.set()
        after = await prompt(client, session_id, text("still here"))

    assert reply["result"] == {"stopReason": "cancelled"}
    assert after["result"] == {"stopReason": "end_turn"}
    failed = [u for u in client.updates(session_id) if u.get("status") == "failed"]
    assert len(failed) == 1
    (request,) = model_requests  # the cancelled prompt never reached the model
    assert [m.text for m in request.messages] == ["still here"]


# --- images and documents -----------------------------------------------------------------


async def test_images_embedded_or_mentioned_reach_the_model_as_images(
    connection: Connection, workspace: Path, model_requests: list[ModelRequest]
) -> None:
    (workspace / "shot.png").write_bytes(PNG)
    encoded = base64.b64encode(PNG).decode()
    embedded = {
        "type": "resource",
        "resource": {"uri": "file:///tmp/paste.png", "mimeType": "image/png", "blob": encoded},
    }
    async with connection() as client:
        await client.initialize()
        session_id = await client.new_session(workspace)
        reply = await prompt(client, session_id, embedded, link(workspace / "shot.png"))

    assert reply["result"] == {"stopReason": "end_turn"}
    message: Message = model_requests[-1].messages[-1]
    assert message.parts[0] == ImagePart(encoded, "image/png")
    (mention,) = mentions_of(model_requests[-1])
    assert mention.context is not None and mention.context[1] == ImagePart(encoded, "image/png")
    assert fs_reads(client) == []  # images are not text: read from the disk


def openai_config(tmp_path: Path, fake: FakeLLM) -> str:
    path = tmp_path / "openai.toml"
    path.write_text(
        f"""
[providers.fake]
type = "openai"
base_url = "{fake.base_url}"
api_key = "test-key"

[[providers.fake.models]]
id = "reads-pdf"

[[providers.fake.models]]
id = "text-only"
documents = false
""",
        encoding="utf-8",
    )
    return str(path)


async def test_a_pdf_goes_to_a_model_that_reads_documents_and_a_note_to_one_that_does_not(
    connection: Connection, workspace: Path, tmp_path: Path
) -> None:
    (workspace / "spec.pdf").write_bytes(PDF)
    data_url = "data:application/pdf;base64," + base64.b64encode(PDF).decode()
    embedded = {
        "type": "resource",
        "resource": {
            "uri": "file:///tmp/embedded.pdf",
            "mimeType": "application/pdf",
            "blob": base64.b64encode(PDF).decode(),
        },
    }
    with FakeLLM() as fake:
        async with connection(openai_config(tmp_path, fake)) as client:
            await client.initialize()
            session_id = await client.new_session(workspace)
            first = await prompt(
                client, session_id, text("summarise "), link(workspace / "spec.pdf")
            )
            await client.call(
                "session/set_config_option",
                {"sessionId": session_id, "configId": "model", "value": "fake/text-only"},
            )
            second = await prompt(client, session_id, text("and this "), embedded)
        bodies = list(fake.requests)

    assert first["result"] == second["result"] == {"stopReason": "end_turn"}
    reads_pdf, text_only = bodies
    content = reads_pdf["messages"][-1]["content"]
    assert content[0] == {
        "type": "text",
        "text": f"summarise [@spec.pdf]({(workspace / 'spec.pdf').as_uri()})",
    }
    assert content[-1] == {"type": "file", "file": {"filename": "spec.pdf", "file_data": data_url}}
    # The same history for a model without documents: every PDF is a note.
    notes = [m["content"] for m in text_only["messages"] if m["role"] == "user"]
    assert "[document spec.pdf (application/pdf) not sent" in notes[0]
    assert "[document file:///tmp/embedded.pdf (application/pdf) not sent" in notes[1]
    assert "file_data" not in str(text_only)


# --- replay -------------------------------------------------------------------------------


async def test_a_loaded_session_shows_the_mention_as_typed_and_its_read_after_the_prompt(
    connection: Connection, workspace: Path, outside: Path
) -> None:
    async with connection() as client:
        await client.initialize()
        session_id = await client.new_session(workspace)
        await prompt(
            client,
            session_id,
            text("compare "),
            link(workspace / "app.py"),
            text(" with "),
            link(outside / "notes.txt", "#L1"),
        )

    async with connection() as client:
        await client.initialize()
        start = len(client.frames)
        await client.call(
            "session/load", {"sessionId": session_id, "cwd": str(workspace), "mcpServers": []}
        )
        replayed = [
            f["params"]["update"]
            for f in client.frames[start:]
            if f.get("method") == "session/update"
        ]

    user = [u["content"] for u in replayed if u["sessionUpdate"] == "user_message_chunk"]
    assert user == [
        {"type": "text", "text": "compare "},
        {"type": "resource_link", "uri": (workspace / "app.py").as_uri(), "name": "app.py"},
        {"type": "text", "text": " with "},
        {
            "type": "resource_link",
            "uri": (outside / "notes.txt").as_uri() + "#L1",
            "name": "notes.txt",
        },
    ]
    kinds = [u["sessionUpdate"] for u in replayed]
    assert kinds.index("tool_call") > max(
        i for i, k in enumerate(kinds) if k == "user_message_chunk"
    )
    assert "on disk" not in str(user)
    for update in replayed:
        SessionNotification.model_validate({"sessionId": session_id, "update": update})
