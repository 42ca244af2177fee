"""Live information for the user over the wire: retry waits (and other notices) as `notice`
updates to clients that advertise `session.notices`, else each as a line of its own in the
thoughts (or in the reply a restart voids); and a `usage_update` that always describes the
context the next request would carry, also after a cancel and after a failed call.

The model is the fake OpenAI-compatible server (`tests/fake_llm.py`), whose reported usage
leaves out the tool definitions our own estimate counts: a figure that switched between
the two would jump by over a thousand tokens.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from acp.schema import SessionNotification
from fake_acp_client import ZED_INITIALIZE, FakeClient
from fake_llm import FakeLLM, fake_reply

from acp_agent.messages import Notice
from acp_agent.protocol.handshake import parse_initialize
from acp_agent.protocol.updates import session_update

pytestmark = pytest.mark.anyio

Connection = Callable[..., Any]

NOTICE_SCHEMA = json.loads(
    (Path(__file__).parent / "fixtures" / "notice-updates.schema.json").read_text("utf-8")
)
NOTICES_CLIENT: dict[str, Any] = {
    "protocolVersion": 1,
    "clientCapabilities": {"session": {"notices": {}}},
    "clientInfo": {"name": "notices-test", "version": "1"},
}
RETRY_LINE = r"\[fake: .*500.*; retrying in \d+\.\ds \(attempt {n} of 3\)\]"


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    with FakeLLM() as fake:
        yield fake


@pytest.fixture
def config(fake_llm: FakeLLM, tmp_path: Path) -> str:
    path = tmp_path / "agent.toml"
    path.write_text(
        f"""
[providers.fake]
type = "openai-compatible"
base_url = "{fake_llm.base_url}"
retry = {{ max_attempts = 3, initial_delay = 0.01, max_delay = 0.02 }}
models = [{{ id = "fake-model", context_window = 100000 }}]
""",
        encoding="utf-8",
    )
    return str(path)


def of_kind(updates: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [u for u in updates if u["sessionUpdate"] == kind]


def text_of(updates: list[dict[str, Any]], kind: str) -> str:
    return "".join(u["content"]["text"] for u in of_kind(updates, kind))


def assert_valid(client: FakeClient) -> None:
    """Notices against the stable schema (1.25); the rest against the pinned package."""
    for frame in client.frames:
        if frame.get("method") != "session/update":
            continue
        if frame["params"]["update"]["sessionUpdate"] == "notice":
            jsonschema.validate(frame["params"], NOTICE_SCHEMA)
        else:
            SessionNotification.model_validate(frame["params"])


def usage_figures(client: FakeClient, session_id: str) -> list[int]:
    return [u["used"] for u in of_kind(client.updates(session_id), "usage_update")]


# --- the capability and the mapping ------------------------------------------------------------


@pytest.mark.parametrize(
    ("session", "advertised"),
    [({"notices": {}}, True), ({"notices": None}, False), ({"notices": True}, False), ({}, False)],
)
def test_the_notices_capability_is_an_object_under_session(session: Any, advertised: bool) -> None:
    params = {"protocolVersion": 1, "clientCapabilities": {"session": session}}

    assert parse_initialize(params).client.session_notices is advertised


def test_a_notice_is_a_notice_update_or_a_line_of_its_own() -> None:
    notice = Notice("openai: rate limited.", "retrying in 2.0s (attempt 2 of 5)", "warning")

    assert session_update(notice, notices=True) == {
        "sessionUpdate": "notice",
        "severity": "warning",
        "title": "openai: rate limited.",
        "description": "retrying in 2.0s (attempt 2 of 5)",
    }
    assert session_update(notice) == {
        "sessionUpdate": "agent_thought_chunk",
        "content": {
            "type": "text",
            "text": "[openai: rate limited; retrying in 2.0s (attempt 2 of 5)]\n\n",
        },
    }
    in_reply = Notice("local server refused", message_id="msg-1")
    assert session_update(in_reply) == {
        "sessionUpdate": "agent_message_chunk",
        "content": {"type": "text", "text": "[local server refused]\n\n"},
        "messageId": "msg-1",
    }
    for event in (notice, in_reply, Notice("  ")):
        update = session_update(event, notices=True)
        jsonschema.validate({"sessionId": "s", "update": update}, NOTICE_SCHEMA)


# --- retry waits -------------------------------------------------------------------------------


async def test_retry_waits_are_notices_for_a_client_that_advertised_them(
    connection: Connection, config: str, tmp_path: Path
) -> None:
    async with connection(config) as client:
        await client.initialize(NOTICES_CLIENT)
        session_id = await client.new_session(tmp_path)
        answer = await client.prompt(session_id, "[[status 500 2]] hi")

    assert answer["result"] == {"stopReason": "end_turn"}
    updates = client.updates(session_id)
    notices = of_kind(updates, "notice")
    assert [n["severity"] for n in notices] == ["warning", "warning"]
    assert re.fullmatch(r"retrying in \d+\.\ds \(attempt 2 of 3\)", notices[0]["description"])
    assert re.fullmatch(r"retrying in \d+\.\ds \(attempt 3 of 3\)", notices[1]["description"])
    assert all(n["title"].startswith("fake: ") and "500" in n["title"] for n in notices)
    assert of_kind(updates, "agent_thought_chunk") == []
    assert text_of(updates, "agent_message_chunk") == fake_reply("hi")
    assert_valid(client)


async def test_for_zeds_initialize_each_retry_wait_is_a_thought_line_of_its_own(
    connection: Connection, config: str, tmp_path: Path
) -> None:
    async with connection(config) as client:
        await client.initialize(ZED_INITIALIZE)
        session_id = await client.new_session(tmp_path)
        answer = await client.prompt(session_id, "[[status 500 2]] hi")

    assert answer["result"] == {"stopReason": "end_turn"}
    updates = client.updates(session_id)
    assert of_kind(updates, "notice") == []
    thoughts = text_of(updates, "agent_thought_chunk")
    # Paragraphs, so even a Markdown renderer (Toad's thought block) keeps them apart.
    first, second, rest = thoughts.split("\n\n")
    assert re.fullmatch(RETRY_LINE.format(n=2), first), thoughts
    assert re.fullmatch(RETRY_LINE.format(n=3), second), thoughts
    assert rest == ""
    assert text_of(updates, "agent_message_chunk") == fake_reply("hi")
    assert_valid(client)


async def test_a_reply_that_starts_over_is_a_notice_and_a_new_message_for_notice_clients(
    connection: Connection, config: str, tmp_path: Path
) -> None:
    async with connection(config) as client:
        await client.initialize(NOTICES_CLIENT)
        session_id = await client.new_session(tmp_path)
        answer = await client.prompt(session_id, "[[drop 1]] tell me a story")

    assert answer["result"] == {"stopReason": "end_turn"}
    updates = client.updates(session_id)
    [notice] = of_kind(updates, "notice")
    assert notice["severity"] == "warning"
    assert notice["title"].startswith("fake: the reply broke off")
    assert notice["description"].endswith("The reply starts over below.")
    by_message: dict[str, str] = {}
    for chunk in of_kind(updates, "agent_message_chunk"):
        by_message[chunk["messageId"]] = (
            by_message.get(chunk["messageId"], "") + chunk["content"]["text"]
        )
    partial, whole = by_message.values()
    assert partial.endswith("\n\n") and "[" not in partial  # set apart, no bracketed note
    assert whole == fake_reply("tell me a story")
    assert_valid(client)


async def test_a_reply_that_starts_over_says_so_in_the_reply_for_other_clients(
    connection: Connection, config: str, tmp_path: Path
) -> None:
    async with connection(config) as client:
        await client.initialize(ZED_INITIALIZE)
        session_id = await client.new_session(tmp_path)
        answer = await client.prompt(session_id, "[[drop 1]] tell me a story")

    assert answer["result"] == {"stopReason": "end_turn"}
    text = text_of(client.updates(session_id), "agent_message_chunk")
    before, note, after = text.partition("\n\n[fake: the reply broke off (")
    assert before and note
    assert "; asking again in " in after
    assert after.endswith(
        "(attempt 2 of 3). The reply starts over below.]\n\n" + fake_reply("tell me a story")
    )
    assert_valid(client)


# --- the context figure ------------------------------------------------------------------------


async def test_after_a_cancel_the_figure_grows_by_what_the_turn_added_not_by_a_jump(
    connection: Connection, config: str, tmp_path: Path
) -> None:
    async with connection(config) as client:
        await client.initialize()
        session_id = await client.new_session(tmp_path)
        first = await client.prompt(session_id, "hello")
        [reported] = usage_figures(client, session_id)

        earlier = {u["messageId"] for u in of_kind(client.updates(), "agent_message_chunk")}
        request_id = await client.start_prompt(session_id, "[[slow 0.2]] tell me a long story")
        await client.wait_for(
            lambda f: (
                f.get("method") == "session/update"
                and f["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
                and f["params"]["update"]["messageId"] not in earlier
            )
        )
        await client.notify("session/cancel", {"sessionId": session_id})
        cancelled = await client.reply(request_id)
        figures = usage_figures(client, session_id)

    assert first["result"]["stopReason"] == "end_turn"
    assert cancelled["result"]["stopReason"] == "cancelled"
    assert reported > 0
    after_cancel = figures[-1]
    # The prompt and the partial reply: a few dozen tokens, not the tool definitions.
    assert reported < after_cancel < reported + 60, figures
    assert_valid(client)


async def test_after_a_failed_call_the_figure_is_the_history_as_it_stands(
    connection: Connection, config: str, tmp_path: Path
) -> None:
    async with connection(config) as client:
        await client.initialize()
        session_id = await client.new_session(tmp_path)
        await client.prompt(session_id, "hello")
        [reported] = usage_figures(client, session_id)
        failed = await client.prompt(session_id, "[[status 500]] again")
        figures = usage_figures(client, session_id)

    assert failed["error"]["data"]["details"] == failed["error"]["message"]
    # The failed prompt stays in the history the next request carries; nothing else changed.
    assert reported < figures[-1] < reported + 30, figures
    assert_valid(client)
