"""Context compaction over the wire, with the offline echo provider and a small context
window: automatic at the threshold, `/compact` on demand, what clients with and without the
`session.compaction` capability are shown, what the log keeps, and `session/load`.

Echo answers a summary request like any other, by echoing its last user message (the
summary instruction): that echo is the summary. The requests the model gets are recorded by
wrapping `EchoProvider.stream`.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from acp.schema import SessionNotification
from fake_acp_client import FakeClient

from acp_agent.messages import (
    CompactionFinished,
    CompactionStarted,
    CompactionSummaryChunk,
    Message,
    StreamEvent,
)
from acp_agent.protocol.handshake import parse_initialize
from acp_agent.protocol.updates import session_update
from acp_agent.providers import ModelRequest
from acp_agent.providers.echo import EchoProvider
from acp_agent.sessions.compaction import SUMMARY_INSTRUCTION, SUMMARY_OPENING
from acp_agent.sessions.records import CompactionRecord, MessageRecord
from acp_agent.sessions.store import SessionStore, default_state_dir

pytestmark = pytest.mark.anyio

Connection = Callable[..., Any]

WINDOW = 10_000
CONFIG = f"""
compaction_threshold = 0.6
compaction_keep_turns = 2
system_prompt = "A test agent."

[providers.echo]
type = "echo"

[[providers.echo.models]]
id = "echo"
context_window = {WINDOW}
"""
"""The built-in tools' definitions count about 2,900 tokens of the 6,000 allowed, so the
history decides (a short system prompt of the config's keeps it that way); a new tool that
pushes them past the threshold shows here as an early compaction."""

COMPACTION_SCHEMA = json.loads(
    (Path(__file__).parent / "fixtures" / "compaction-updates.schema.json").read_text("utf-8")
)
COMPACTION_KINDS = ("compaction_update", "compaction_summary_chunk")
COMPACTION_CLIENT: dict[str, Any] = {
    "protocolVersion": 1,
    "clientCapabilities": {"session": {"compaction": {}}},
    "clientInfo": {"name": "compaction-test", "version": "1"},
}
PLAIN_CLIENT: dict[str, Any] = {
    "protocolVersion": 1,
    "clientCapabilities": {"session": {}},
    "clientInfo": {"name": "plain-test", "version": "1"},
}
BIG_PROMPT = " ".join(["x"] * 13_000)
"""About 6,500 tokens: past the threshold by itself (the echo provider reports no tokens
for the tools), yet the compacted request, tools included, fits the window."""
ECHOED_SUMMARY = "Echo: " + SUMMARY_INSTRUCTION


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
def config(tmp_path: Path) -> str:
    path = tmp_path / "agent.toml"
    path.write_text(CONFIG, encoding="utf-8")
    return str(path)


def texts(messages: list[Message]) -> list[tuple[str, str]]:
    return [(m.role, m.text) for m in messages]


def stored(session_id: str) -> list[Any]:
    return SessionStore(default_state_dir({})).read(session_id)


def updates_since(client: FakeClient, session_id: str, start: int) -> list[dict[str, Any]]:
    return [
        f["params"]["update"]
        for f in client.frames[start:]
        if f.get("method") == "session/update" and f["params"]["sessionId"] == session_id
    ]


def assert_valid(client: FakeClient) -> None:
    """Compaction updates against the stable schema; the rest against the pinned package."""
    for frame in client.frames:
        if frame.get("method") != "session/update":
            continue
        if frame["params"]["update"]["sessionUpdate"] in COMPACTION_KINDS:
            jsonschema.validate(frame["params"], COMPACTION_SCHEMA)
        else:
            SessionNotification.model_validate(frame["params"])


def summary_of(update: dict[str, Any]) -> str:
    [block] = update["summary"]
    assert block["type"] == "text"
    text: str = block["text"]
    return text


async def converse(client: FakeClient, session_id: str, *prompts: str) -> None:
    for text in prompts:
        reply = await client.prompt(session_id, text)
        assert reply["result"]["stopReason"] == "end_turn", reply


# --- the capability and the mapping --------------------------------------------------------


@pytest.mark.parametrize(
    ("session", "advertised"),
    [
        ({"compaction": {}}, True),
        ({"compaction": None}, False),
        ({"compaction": True}, False),
        ({}, False),
        (None, False),
        ("yes", False),
    ],
)
def test_the_compaction_capability_is_an_object_under_session(
    session: Any, advertised: bool
) -> None:
    params = {"protocolVersion": 1, "clientCapabilities": {"session": session}}

    assert parse_initialize(params).client.session_compaction is advertised


def test_a_failed_compaction_shows_as_update_or_message_a_cancelled_one_as_update() -> None:
    failed = CompactionFinished("cmp_1", "failed", error="echo: overloaded")
    cancelled = CompactionFinished("cmp_2", "cancelled")

    assert session_update(failed, compaction=True) == {
        "sessionUpdate": "compaction_update",
        "compactionId": "cmp_1",
        "status": "failed",
        "error": "echo: overloaded",
    }
    assert session_update(cancelled, compaction=True) == {
        "sessionUpdate": "compaction_update",
        "compactionId": "cmp_2",
        "status": "cancelled",
    }
    message = session_update(failed)
    assert message is not None
    assert message["content"]["text"] == "[Context compaction failed: echo: overloaded]\n\n"
    assert session_update(cancelled) is None
    assert session_update(CompactionStarted("cmp_3")) is None
    assert session_update(CompactionSummaryChunk("cmp_3", "Goals")) is None
    for event in (failed, cancelled):
        update = session_update(event, compaction=True)
        jsonschema.validate({"sessionId": "s", "update": update}, COMPACTION_SCHEMA)


# --- /compact ------------------------------------------------------------------------------


async def test_compact_shows_compaction_updates_to_a_client_that_advertised_them(
    connection: Connection, config: str, tmp_path: Path, model_requests: list[ModelRequest]
) -> None:
    async with connection(config) as client:
        await client.initialize(COMPACTION_CLIENT)
        session_id = await client.new_session(tmp_path)
        await converse(client, session_id, "first question", "second question", "third one")
        start = len(client.frames)

        reply = await client.prompt(session_id, "/compact the parser")

        assert reply["result"] == {"stopReason": "end_turn"}
        updates = updates_since(client, session_id, start)
        kinds = [u["sessionUpdate"] for u in updates]
        assert kinds[0] == "compaction_update" and updates[0]["status"] == "in_progress"
        finished = updates[kinds.index("compaction_update", 1)]
        assert finished["status"] == "completed"
        assert finished["compactionId"] == updates[0]["compactionId"]
        chunks = [u for u in updates if u["sessionUpdate"] == "compaction_summary_chunk"]
        assert "".join(c["content"]["text"] for c in chunks) == summary_of(finished)
        assert summary_of(finished).startswith(ECHOED_SUMMARY)
        assert summary_of(finished).endswith("focus on: the parser")
        assert kinds[-1] == "usage_update"
        assert "agent_message_chunk" not in kinds
        assert_valid(client)

        await converse(client, session_id, "fourth")

    summary_call, after = model_requests[-2:]
    assert summary_call.tools == ()
    assert [m.role for m in summary_call.messages] == ["user", "assistant", "user"]
    assert summary_call.messages[0].text == "first question"
    assert after.messages[0].text == f"{SUMMARY_OPENING}\n\n{summary_of(finished)}"
    assert texts(list(after.messages[1:])) == [
        ("user", "second question"),
        ("assistant", "Echo: second question"),
        ("user", "third one"),
        ("assistant", "Echo: third one"),
        ("user", "fourth"),
    ]


async def test_compact_is_a_short_agent_message_for_a_client_without_the_capability(
    connection: Connection, config: str, tmp_path: Path, model_requests: list[ModelRequest]
) -> None:
    async with connection(config) as client:
        await client.initialize(PLAIN_CLIENT)
        session_id = await client.new_session(tmp_path)
        await converse(client, session_id, "first question", "second question", "third one")
        start = len(client.frames)

        reply = await client.prompt(session_id, "/compact")

        assert reply["result"] == {"stopReason": "end_turn"}
        updates = updates_since(client, session_id, start)
        assert not [u for u in updates if u["sessionUpdate"] in COMPACTION_KINDS]
        [message] = [u for u in updates if u["sessionUpdate"] == "agent_message_chunk"]
        text = message["content"]["text"]
        assert text.startswith("[Context compacted: ")
        assert text.endswith("of the context window used; 2 earlier messages summarised.]\n\n")
        assert_valid(client)
    assert model_requests[-1].tools == ()


async def test_compact_with_nothing_to_summarise_says_so_without_calling_the_model(
    connection: Connection, config: str, tmp_path: Path, model_requests: list[ModelRequest]
) -> None:
    async with connection(config) as client:
        await client.initialize(COMPACTION_CLIENT)
        session_id = await client.new_session(tmp_path)

        reply = await client.prompt(session_id, "/compact")

        assert reply["result"] == {"stopReason": "end_turn"}
        [message] = client.updates(session_id)[-1:]
        assert message["sessionUpdate"] == "agent_message_chunk"
        assert message["content"]["text"].startswith("Nothing to compact")
    assert model_requests == []


async def test_compact_is_announced_among_the_available_commands(
    connection: Connection, config: str, tmp_path: Path
) -> None:
    async with connection(config) as client:
        await client.initialize(COMPACTION_CLIENT)
        session_id = await client.new_session(tmp_path)
        frame = await client.wait_for(
            lambda f: (
                f.get("method") == "session/update"
                and f["params"]["update"]["sessionUpdate"] == "available_commands_update"
            )
        )

    assert frame["params"]["sessionId"] == session_id
    commands = {c["name"]: c for c in frame["params"]["update"]["availableCommands"]}
    assert commands["compact"]["description"]
    assert commands["compact"]["input"] == {"hint": "focus (optional)"}


# --- automatic compaction ------------------------------------------------------------------


async def test_a_prompt_that_would_pass_the_threshold_compacts_the_older_turns_first(
    connection: Connection, config: str, tmp_path: Path, model_requests: list[ModelRequest]
) -> None:
    async with connection(config) as client:
        await client.initialize(COMPACTION_CLIENT)
        session_id = await client.new_session(tmp_path)
        await converse(client, session_id, "first question", "second question")
        assert len(model_requests) == 2  # under the threshold: no compaction
        start = len(client.frames)

        await converse(client, session_id, BIG_PROMPT)

        updates = updates_since(client, session_id, start)
        kinds = [u["sessionUpdate"] for u in updates]
        first_reply = kinds.index("agent_message_chunk")
        assert "compaction_update" in kinds[:first_reply]
        finished = [u for u in updates if u.get("status") == "completed"]
        assert len(finished) == 1
        assert_valid(client)

    _, _, summary_call, compacted = model_requests
    assert summary_call.tools == () and compacted.tools
    assert texts(list(summary_call.messages[:2])) == [
        ("user", "first question"),
        ("assistant", "Echo: first question"),
    ]
    # The next request: the summary, the kept turn, the running one (the prompt).
    assert compacted.messages[0].text.startswith(SUMMARY_OPENING)
    assert texts(list(compacted.messages[1:])) == [
        ("user", "second question"),
        ("assistant", "Echo: second question"),
        ("user", BIG_PROMPT),
    ]
    # The log keeps the whole conversation, and how much of it the summary replaces.
    records = stored(session_id)
    assert texts([r.message for r in records if isinstance(r, MessageRecord)]) == [
        ("user", "first question"),
        ("assistant", "Echo: first question"),
        ("user", "second question"),
        ("assistant", "Echo: second question"),
        ("user", BIG_PROMPT),
        ("assistant", "Echo: " + BIG_PROMPT),
    ]
    [compaction] = [r for r in records if isinstance(r, CompactionRecord)]
    assert compaction.replaced == 2
    assert compaction.summary == compacted.messages[0]


async def test_a_plain_client_is_told_with_the_share_of_the_window_that_was_used(
    connection: Connection, config: str, tmp_path: Path, model_requests: list[ModelRequest]
) -> None:
    async with connection(config) as client:
        await client.initialize(PLAIN_CLIENT)
        session_id = await client.new_session(tmp_path)
        await converse(client, session_id, "first question", "second question", BIG_PROMPT)

        notes = [
            u["content"]["text"]
            for u in client.updates(session_id)
            if u["sessionUpdate"] == "agent_message_chunk"
            and u["content"]["text"].startswith("[Context compacted")
        ]
        assert_valid(client)

    [note] = notes
    # "[Context compacted: 3.1K of 4.0K tokens (78%) of the context window used; …"
    figures = re.fullmatch(
        r"\[Context compacted: ([\d.]+)K of ([\d.,]+)K tokens \((\d+)%\) of the context "
        r"window used; 2 earlier messages summarised\.\]\n\n",
        note,
    )
    assert figures is not None, note
    used, window, percent = (float(value.replace(",", "")) for value in figures.groups())
    assert percent > 60  # past the threshold
    assert abs(100 * used / window - percent) < 3


# --- load ----------------------------------------------------------------------------------


async def test_loading_a_compacted_session_replays_the_compaction_and_sends_the_summary(
    connection: Connection, config: str, tmp_path: Path, model_requests: list[ModelRequest]
) -> None:
    async with connection(config) as client:
        await client.initialize(COMPACTION_CLIENT)
        session_id = await client.new_session(tmp_path)
        await converse(client, session_id, "first question", "second question")
        await converse(client, session_id, "/compact")
        live = [u for u in client.updates(session_id) if u.get("status") == "completed"]

    async with connection(config) as client:
        await client.initialize(COMPACTION_CLIENT)
        await client.call(
            "session/load", {"sessionId": session_id, "cwd": str(tmp_path), "mcpServers": []}
        )
        replayed = client.updates(session_id)
        kinds = [u["sessionUpdate"] for u in replayed]
        shown = [(u["sessionUpdate"], u.get("content", {}).get("text")) for u in replayed]
        assert_valid(client)
        await converse(client, session_id, "third")

    # What the user saw: the turns, the typed command, then the compaction as it ended.
    assert shown[:5] == [
        ("user_message_chunk", "first question"),
        ("agent_message_chunk", "Echo: first question"),
        ("user_message_chunk", "second question"),
        ("agent_message_chunk", "Echo: second question"),
        ("user_message_chunk", "/compact"),
    ]
    [compaction] = [u for u in replayed if u["sessionUpdate"] == "compaction_update"]
    assert compaction == live[0]
    assert kinds.index("compaction_update") == 5
    # The model gets the summary and the kept turns, not the whole conversation.
    after = model_requests[-1]
    assert after.messages[0].text == f"{SUMMARY_OPENING}\n\n{summary_of(compaction)}"
    assert texts(list(after.messages[1:])) == [
        ("user", "second question"),
        ("assistant", "Echo: second question"),
        ("user", "third"),
    ]


async def test_a_plain_client_loading_a_compacted_session_sees_the_note_again(
    connection: Connection, config: str, tmp_path: Path
) -> None:
    async with connection(config) as client:
        await client.initialize(COMPACTION_CLIENT)
        session_id = await client.new_session(tmp_path)
        await converse(client, session_id, "first question", "second question", "/compact")

    async with connection(config) as client:
        await client.initialize(PLAIN_CLIENT)
        await client.call(
            "session/load", {"sessionId": session_id, "cwd": str(tmp_path), "mcpServers": []}
        )
        replayed = client.updates(session_id)
        assert_valid(client)

    assert not [u for u in replayed if u["sessionUpdate"] in COMPACTION_KINDS]
    notes = [
        u["content"]["text"]
        for u in replayed
        if u["sessionUpdate"] == "agent_message_chunk"
        and u["content"]["text"].startswith("[Context compacted: ")
    ]
    assert len(notes) == 1
