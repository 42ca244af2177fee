"""Sessions that survive, over the wire and in-process: load, resume, list, fork, close and
delete, titles, and what a restart keeps.

Two `connection()` blocks in one test are two agent processes sharing one state dir (the
test's HOME, see tests/conftest.py): the second knows only what the first wrote to disk.
The offline echo provider answers; `@tool NAME {json}` lines script its tool calls.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from acp.schema import (
    CloseSessionResponse,
    DeleteSessionResponse,
    ForkSessionResponse,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    ResumeSessionResponse,
    SessionNotification,
)
from fake_acp_client import FakeClient, selected

from acp_agent.protocol.methods import REQUESTS
from acp_agent.sessions.store import default_state_dir

pytestmark = pytest.mark.anyio

Connection = Callable[..., Any]

SESSIONS_DIR = Path("sessions")
HISTORY_KINDS = frozenset({"user_message_chunk", "agent_message_chunk", "agent_thought_chunk"})
RESOURCE_NOT_FOUND = -32002
INVALID_PARAMS = -32602
FIXTURE_V1 = Path(__file__).parent.parent / "sessions" / "fixtures" / "store-v1.jsonl"
RESPONSES_SCHEMA = Path(__file__).parent / "fixtures" / "session-responses.schema.json"

LOCAL_SHELL_INITIALIZE: dict[str, Any] = {
    "protocolVersion": 1,
    "clientCapabilities": {
        "fs": {"readTextFile": True, "writeTextFile": True},
        "terminal": False,
        "_meta": {"terminal_output": True},
    },
    "clientInfo": {"name": "sessions-test", "version": "1"},
}
"""Zed-like without terminals: `shell` runs locally and shows a (display) terminal."""

SHELL_PROMPT = 'Run it\n@tool shell {"command": "echo hi-there"}'
WRITE_PROMPT = 'Change it\n@tool write_file {"path": "notes.txt", "content": "new text\\n"}'
PLAN_ENTRIES = [
    {"content": "Read the code", "priority": "medium", "status": "completed"},
    {"content": "Fix the bug", "priority": "high", "status": "in_progress"},
]
PLAN_PROMPT = "Plan it\n@tool plan " + json.dumps({"entries": PLAN_ENTRIES})


# --- helpers -------------------------------------------------------------------------------


def sessions_dir() -> Path:
    """Where the in-process agent keeps its logs (its env is empty: HOME decides)."""
    return default_state_dir({}) / "sessions"


def log_file(session_id: str) -> Path:
    return sessions_dir() / f"{session_id}.jsonl"


def session_params(session_id: str, cwd: Path, **extra: Any) -> dict[str, Any]:
    return {"sessionId": session_id, "cwd": str(cwd), "mcpServers": [], **extra}


def updates_between(
    client: FakeClient, session_id: str, start: int, end: int | None = None
) -> list[dict[str, Any]]:
    """The `session/update` payloads for `session_id` among frames[start:end]."""
    return [
        f["params"]["update"]
        for f in client.frames[start:end]
        if f.get("method") == "session/update" and f["params"]["sessionId"] == session_id
    ]


async def load(
    client: FakeClient, session_id: str, cwd: Path, **extra: Any
) -> tuple[dict[str, Any], list[dict[str, Any]], int]:
    """The `session/load` reply, the updates for the session sent before it, and the
    reply's index in the frames."""
    start = len(client.frames)
    request_id = await client.start_request(
        "session/load", session_params(session_id, cwd, **extra)
    )
    reply = await client.reply(request_id)
    index = client.frames.index(reply)
    return reply, updates_between(client, session_id, start, index), index


async def run_prompt(client: FakeClient, session_id: str, text: str) -> dict[str, Any]:
    reply = await client.prompt(session_id, text)
    assert "error" not in reply, reply
    return reply


def of_kind(updates: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [u for u in updates if u["sessionUpdate"] == kind]


def texts_by_message(updates: list[dict[str, Any]], kind: str) -> dict[str | None, str]:
    """Chunk text of one kind joined per `messageId`, in order of first appearance."""
    joined: dict[str | None, str] = {}
    for update in of_kind(updates, kind):
        message_id = update.get("messageId")
        joined[message_id] = joined.get(message_id, "") + update["content"]["text"]
    return joined


def user_texts(updates: list[dict[str, Any]]) -> list[str]:
    return [
        u["content"]["text"]
        for u in of_kind(updates, "user_message_chunk")
        if u["content"]["type"] == "text"
    ]


def tool_calls(updates: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each tool call as the client would hold it after the updates: started, then every
    update's fields merged in."""
    calls: dict[str, dict[str, Any]] = {}
    for update in updates:
        if update["sessionUpdate"] == "tool_call":
            calls[update["toolCallId"]] = dict(update)
        elif update["sessionUpdate"] == "tool_call_update":
            fields = {k: v for k, v in update.items() if k not in ("sessionUpdate", "_meta")}
            calls.setdefault(update["toolCallId"], {}).update(fields)
    return calls


def content_types(update: dict[str, Any]) -> list[str]:
    """The kinds of a tool call's content items (none for a message chunk)."""
    content = update.get("content")
    return [item["type"] for item in content] if isinstance(content, list) else []


@cache
def _responses_schema() -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(RESPONSES_SCHEMA.read_text(encoding="utf-8"))
    return schema


def assert_schema(definition: str, value: Any) -> None:
    """`value` is valid as `definition` of the ACP schema (1.25, unstable additions too),
    as the ACP TCK checks answers; the pinned package's models are older."""
    schema = _responses_schema()
    jsonschema.validate(value, {"$ref": f"#/$defs/{definition}", "$defs": schema["$defs"]})


def assert_valid_updates(updates: list[dict[str, Any]], session_id: str) -> None:
    for update in updates:
        SessionNotification.model_validate({"sessionId": session_id, "update": update})


def option_value(result: dict[str, Any], option_id: str) -> Any:
    return next(o["currentValue"] for o in result["configOptions"] if o["id"] == option_id)


async def working_session(client: FakeClient, cwd: Path) -> tuple[str, list[dict[str, Any]]]:
    """A session with a local command, a file edit (diff) and a plan: its id and what the
    client was shown live."""
    (cwd / "notes.txt").write_text("old text\n")
    await client.initialize(LOCAL_SHELL_INITIALIZE)
    session_id = await client.new_session(cwd)
    start = len(client.frames)
    for text in (SHELL_PROMPT, WRITE_PROMPT, PLAN_PROMPT):
        assert (await run_prompt(client, session_id, text))["result"]["stopReason"] == "end_turn"
    return session_id, updates_between(client, session_id, start)


# --- initialize ----------------------------------------------------------------------------


async def test_initialize_advertises_load_and_exactly_the_session_methods_it_routes(
    connection: Connection,
) -> None:
    async with connection() as client:
        result = await client.initialize()

    InitializeResponse.model_validate(result)
    assert_schema("InitializeResponse", result)
    capabilities = result["agentCapabilities"]
    assert capabilities["loadSession"] is True
    assert "session/load" in REQUESTS
    advertised = capabilities["sessionCapabilities"]
    assert advertised == {
        "list": {},
        "resume": {},
        "close": {},
        "delete": {},
        "additionalDirectories": {},
        "fork": {},
        # Unstable: `session/set_title`, `archive`/`unarchive`, `status`.
        "title": {},
        "archive": {},
        "status": {},
        "systemPrompt": {"mode": {"override": {}}},  # fields of the lifecycle requests
    }
    methods = {name for name in advertised if name not in ("additionalDirectories", "systemPrompt")}
    routed_as = {"title": "set_title"}
    assert {f"session/{routed_as.get(name, name)}" for name in methods} <= set(REQUESTS)
    lifecycle = {m.removeprefix("session/") for m in REQUESTS if m.startswith("session/")}
    optional = {"list", "resume", "close", "delete", "fork", "set_title", "archive", "status"}
    assert lifecycle & optional == {routed_as.get(name, name) for name in methods}


# --- session/load --------------------------------------------------------------------------


async def test_load_in_a_new_process_replays_the_whole_conversation_before_answering(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        session_id, live = await working_session(client, tmp_path)

    async with connection() as client:
        await client.initialize()
        reply, replayed, _ = await load(client, session_id, tmp_path)

    LoadSessionResponse.model_validate(reply["result"])
    assert_schema("LoadSessionResponse", reply["result"])
    assert_valid_updates(replayed, session_id)
    assert user_texts(replayed) == [SHELL_PROMPT, WRITE_PROMPT, PLAN_PROMPT]
    assert texts_by_message(replayed, "agent_message_chunk") == texts_by_message(
        live, "agent_message_chunk"
    )

    live_calls, replayed_calls = tool_calls(live), tool_calls(replayed)
    assert replayed_calls.keys() == live_calls.keys() and len(live_calls) == 3
    for call_id, call in live_calls.items():
        again = replayed_calls[call_id]
        assert (again["title"], again["kind"], again["status"]) == (
            call["title"],
            call["kind"],
            "completed",
        )
    shell, write, plan = (replayed_calls[i] for i in live_calls)
    # The command's terminal died with the first process: its output comes back as text.
    assert content_types(shell) == ["content"]
    assert "hi-there" in shell["content"][0]["content"]["text"]
    assert not [u for u in replayed if "terminal" in json.dumps(u.get("content"))]
    assert write["content"] == live_calls[list(live_calls)[1]]["content"]
    [diff] = write["content"]
    assert (diff["type"], diff["oldText"], diff["newText"]) == ("diff", "old text\n", "new text\n")
    assert write["locations"] == [{"path": str(tmp_path / "notes.txt"), "line": 1}]
    assert plan["kind"] == "think"
    assert [u["entries"] for u in of_kind(replayed, "plan")] == [PLAN_ENTRIES]


async def test_replayed_chunks_carry_the_message_ids_the_live_chunks_had(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        session_id, live = await working_session(client, tmp_path)

    async with connection() as client:
        await client.initialize()
        _, replayed, _ = await load(client, session_id, tmp_path)

    live_texts = texts_by_message(live, "agent_message_chunk")
    assert None not in live_texts, "every live chunk names its message"
    assert len(live_texts) == 3  # one reply per turn: after each tool result
    assert texts_by_message(replayed, "agent_message_chunk") == live_texts
    prompts = [u.get("messageId") for u in of_kind(replayed, "user_message_chunk")]
    assert None not in prompts and len(set(prompts)) == 3


@pytest.mark.parametrize("restart", [True, False], ids=["new-process", "same-connection"])
async def test_load_answers_an_object_and_sends_nothing_for_the_session_after_it(
    connection: Connection, tmp_path: Path, restart: bool
) -> None:
    """The TCK's load checks (which load on the connection that made the session), and
    the same after a restart.

    What follows the load's answer is checked up to the answer of a prompt sent after it:
    a late update of the load (it would be sent right after the answer) lands in between,
    among the prompt's own updates, so no quiet period needs waiting out."""
    async with connection() as client:
        await client.initialize()
        session_id = await client.new_session(tmp_path)
        await run_prompt(client, session_id, "hello")
        if not restart:
            reply, replayed, index = await load(client, session_id, tmp_path)
            barrier = await run_prompt(client, session_id, "after loading")
            after = updates_between(client, session_id, index + 1, client.frames.index(barrier))
    if restart:
        async with connection() as client:
            await client.initialize()
            reply, replayed, index = await load(client, session_id, tmp_path)
            barrier = await run_prompt(client, session_id, "after loading")
            after = updates_between(client, session_id, index + 1, client.frames.index(barrier))

    assert isinstance(reply["result"], dict)
    LoadSessionResponse.model_validate(reply["result"])
    assert_schema("LoadSessionResponse", reply["result"])
    assert user_texts(replayed) == ["hello"]
    prompt_kinds = {"agent_message_chunk", "usage_update"}
    assert [u for u in after if u["sessionUpdate"] not in prompt_kinds] == []
    # Zed and acpx still learn the commands: before the answer (they sent the id).
    assert "available_commands_update" in {u["sessionUpdate"] for u in replayed}
    assert "".join(texts_by_message(after, "agent_message_chunk").values()) == (
        "Echo: after loading"
    )


@pytest.mark.parametrize("session_id", ["sess_never_created", "../../etc/passwd", ""])
async def test_loading_an_unknown_session_is_a_clear_error(
    connection: Connection, tmp_path: Path, session_id: str
) -> None:
    async with connection() as client:
        await client.initialize()
        reply, replayed, _ = await load(client, session_id, tmp_path)

    assert replayed == []
    assert reply["error"]["code"] == RESOURCE_NOT_FOUND
    assert repr(session_id) in reply["error"]["message"]
    assert "unknown session" in reply["error"]["message"]


async def test_always_allow_answers_are_remembered_across_a_restart(
    connection: Connection, tmp_path: Path
) -> None:
    command = 'Again\n@tool shell {"command": "echo remembered"}'
    async with connection() as client:
        await client.initialize(LOCAL_SHELL_INITIALIZE)
        session_id = await client.new_session(tmp_path)
        client.permission_answer = selected("allow_always")
        await run_prompt(client, session_id, command)
        assert len(client.agent_requests_for("session/request_permission")) == 1

    async with connection() as client:
        await client.initialize(LOCAL_SHELL_INITIALIZE)
        await load(client, session_id, tmp_path)
        client.permission_answer = selected("reject_once")  # were it asked, it would fail
        start = len(client.frames)
        await run_prompt(client, session_id, command)

    assert client.agent_requests_for("session/request_permission") == []
    shown = updates_between(client, session_id, start)
    [call] = tool_calls(shown).values()
    assert call["status"] == "completed"
    reply = "".join(texts_by_message(shown, "agent_message_chunk").values())
    assert "Tool shell returned:\nremembered" in reply


async def test_a_read_only_mode_survives_a_restart_and_still_refuses_writes(
    connection: Connection, tmp_path: Path
) -> None:
    target = tmp_path / "notes.txt"
    target.write_text("keep me\n")
    async with connection() as client:
        await client.initialize()
        session_id = await client.new_session(tmp_path)
        await client.call("session/set_mode", {"sessionId": session_id, "modeId": "read-only"})

    async with connection() as client:
        await client.initialize()
        reply, _, _ = await load(client, session_id, tmp_path)
        start = len(client.frames)
        await run_prompt(client, session_id, WRITE_PROMPT)

    assert reply["result"]["modes"]["currentModeId"] == "read-only"
    assert option_value(reply["result"], "mode") == "read-only"
    [call] = tool_calls(updates_between(client, session_id, start)).values()
    assert call["status"] == "failed"
    assert client.agent_requests_for("fs/write_text_file") == []
    assert target.read_text() == "keep me\n"


TWO_MODELS = """
default_model = "fast/echo"

[providers.fast]
type = "echo"
models = [{ id = "echo" }]

[providers.deep]
type = "echo"
models = [{ id = "thinker", reasoning = true, thought_level = "low", context_window = 200000 }]
"""


async def test_the_model_and_thought_level_survive_a_restart(
    connection: Connection, tmp_path: Path
) -> None:
    config = tmp_path / "agent.toml"
    config.write_text(TWO_MODELS)
    async with connection(str(config)) as client:
        await client.initialize()
        session_id = await client.new_session(tmp_path)
        for option, value in (("model", "deep/thinker"), ("thought_level", "high")):
            await client.call(
                "session/set_config_option",
                {"sessionId": session_id, "configId": option, "value": value},
            )

    async with connection(str(config)) as client:
        await client.initialize()
        reply, _, _ = await load(client, session_id, tmp_path)
        fresh = await client.call("session/new", {"cwd": str(tmp_path), "mcpServers": []})

    assert option_value(reply["result"], "model") == "deep/thinker"
    assert option_value(reply["result"], "thought_level") == "high"
    assert reply["result"]["models"]["currentModelId"] == "deep/thinker"
    assert option_value(fresh, "model") == "fast/echo", "the default itself did not change"


# --- session/resume ------------------------------------------------------------------------


async def test_resume_with_only_id_and_cwd_continues_without_replaying(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        await client.initialize()
        session_id = await client.new_session(tmp_path)
        await run_prompt(client, session_id, "first question")

    async with connection() as client:
        await client.initialize()
        start = len(client.frames)
        request_id = await client.start_request(
            "session/resume", {"sessionId": session_id, "cwd": str(tmp_path)}
        )
        reply = await client.reply(request_id)
        before = updates_between(client, session_id, start, client.frames.index(reply))
        second = await run_prompt(client, session_id, "second question")
        unknown = await client.error(
            "session/resume", {"sessionId": "sess_nope", "cwd": str(tmp_path)}
        )

    ResumeSessionResponse.model_validate(reply["result"])
    assert_schema("ResumeSessionResponse", reply["result"])
    assert [u for u in before if u["sessionUpdate"] in HISTORY_KINDS] == []
    assert second["result"]["stopReason"] == "end_turn"
    assert unknown["code"] == RESOURCE_NOT_FOUND

    async with connection() as client:
        await client.initialize()
        _, replayed, _ = await load(client, session_id, tmp_path)
    assert user_texts(replayed) == ["first question", "second question"]


async def test_resume_of_a_session_live_on_the_connection_sends_no_history(
    connection: Connection, tmp_path: Path
) -> None:
    """The TCK's resume checks: params `{sessionId, cwd}` only, on the connection that made
    the session; no history-kind update before the answer."""
    async with connection() as client:
        await client.initialize()
        session_id = await client.new_session(tmp_path)
        await run_prompt(client, session_id, "hello")
        start = len(client.frames)
        request_id = await client.start_request(
            "session/resume", {"sessionId": session_id, "cwd": str(tmp_path)}
        )
        reply = await client.reply(request_id)
        before = updates_between(client, session_id, start, client.frames.index(reply))
        again = await run_prompt(client, session_id, "still here")

    ResumeSessionResponse.model_validate(reply["result"])
    assert_schema("ResumeSessionResponse", reply["result"])
    assert [u for u in before if u["sessionUpdate"] in HISTORY_KINDS] == []
    assert again["result"]["stopReason"] == "end_turn"


# --- session/fork --------------------------------------------------------------------------


async def test_a_fork_is_an_independent_copy_and_the_original_is_unchanged(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        await client.initialize()
        original = await client.new_session(tmp_path)
        await run_prompt(client, original, "original question")
        original_log = log_file(original).read_bytes()
        result = await client.call("session/fork", {"sessionId": original, "cwd": str(tmp_path)})
        fork = result["sessionId"]
        await run_prompt(client, fork, "asked in the fork")
        assert log_file(original).read_bytes() == original_log
        await run_prompt(client, original, "asked in the original")
        listed = {s["sessionId"]: s for s in (await client.call("session/list", {}))["sessions"]}
        unknown = await client.error("session/fork", {"sessionId": "sess_nope", "cwd": "/"})

    ForkSessionResponse.model_validate(result)
    assert_schema("ForkSessionResponse", result)
    assert fork != original
    assert listed[fork]["title"] == listed[original]["title"] == "original question"
    assert unknown["code"] == RESOURCE_NOT_FOUND

    async with connection() as client:
        await client.initialize()
        _, fork_replay, _ = await load(client, fork, tmp_path)
        _, original_replay, _ = await load(client, original, tmp_path)
    assert user_texts(fork_replay) == ["original question", "asked in the fork"]
    assert user_texts(original_replay) == ["original question", "asked in the original"]


# --- session/list --------------------------------------------------------------------------


async def test_list_pages_with_a_cursor_and_filters_by_cwd(
    connection: Connection, tmp_path: Path
) -> None:
    here, there, nowhere = tmp_path / "here", tmp_path / "there", tmp_path / "nowhere"
    for directory in (here, there, nowhere):
        directory.mkdir()
    async with connection() as client:
        await client.initialize()
        created_here = [await client.new_session(here) for _ in range(57)]
        created_there = [await client.new_session(there) for _ in range(3)]
        await run_prompt(client, created_there[0], "the one with a title")
        # Listed while they are open: sessions never used are not kept past their close.
        first = await client.call("session/list", {})
        second = await client.call("session/list", {"cursor": first["nextCursor"]})
        filtered = await client.call("session/list", {"cwd": str(there)})
        unmatched = await client.call("session/list", {"cwd": str(nowhere)})
        bad_cursor = await client.error("session/list", {"cursor": "not-a-cursor"})
        relative = await client.error("session/list", {"cwd": "relative/dir"})

    for page in (first, second, filtered, unmatched):
        ListSessionsResponse.model_validate(page)
        assert_schema("ListSessionsResponse", page)
    assert len(first["sessions"]) == 50 and first["nextCursor"]
    assert len(second["sessions"]) == 10 and "nextCursor" not in second
    every = first["sessions"] + second["sessions"]
    assert sorted(s["sessionId"] for s in every) == sorted(created_here + created_there)
    times = [s["updatedAt"] for s in every]
    assert times == sorted(times, reverse=True), "newest first"
    assert every[0]["sessionId"] == created_there[0], "the last active comes first"
    assert every[0]["title"] == "the one with a title"
    assert all(s["cwd"] in (str(here), str(there)) for s in every)
    assert {s["sessionId"] for s in filtered["sessions"]} == set(created_there)
    assert unmatched["sessions"] == []
    assert bad_cursor["code"] == INVALID_PARAMS
    assert relative["code"] == INVALID_PARAMS


# --- session/close and session/delete ------------------------------------------------------


async def test_close_of_an_idle_session_frees_it_and_it_loads_again(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        await client.initialize()
        session_id = await client.new_session(tmp_path)
        await run_prompt(client, session_id, "before closing")
        result = await client.call("session/close", {"sessionId": session_id})
        after_close = await client.prompt(session_id, "into the void")
        _, replayed, _ = await load(client, session_id, tmp_path)
        again = await run_prompt(client, session_id, "after loading")

    CloseSessionResponse.model_validate(result)
    assert_schema("CloseSessionResponse", result)
    assert after_close["error"]["code"] == RESOURCE_NOT_FOUND
    assert user_texts(replayed) == ["before closing"]
    assert again["result"]["stopReason"] == "end_turn"


async def test_close_during_a_prompt_makes_that_prompt_answer_cancelled(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        await client.initialize()
        session_id = await client.new_session(tmp_path)
        prompt_id = await client.start_prompt(
            session_id, "@slow 5\none two three four five six seven eight"
        )
        await client.wait_for(
            lambda f: (
                f.get("method") == "session/update"
                and f["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
            )
        )
        close = await client.request("session/close", {"sessionId": session_id})
        prompt = await client.reply(prompt_id)
        _, replayed, _ = await load(client, session_id, tmp_path)
        again = await run_prompt(client, session_id, "still usable")

    assert close["result"] == {}
    assert prompt["result"]["stopReason"] == "cancelled"
    assert user_texts(replayed)[0].endswith("one two three four five six seven eight")
    assert again["result"]["stopReason"] == "end_turn"
    assert '"stop_reason":"cancelled"' in log_file(session_id).read_text()


async def test_delete_removes_the_session_and_an_unknown_id_is_no_error(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        await client.initialize()
        stored = await client.new_session(tmp_path)
        await run_prompt(client, stored, "kept on disk only")

    async with connection() as client:
        await client.initialize()
        live = await client.new_session(tmp_path)
        await run_prompt(client, live, "live one")
        results = [
            await client.call("session/delete", {"sessionId": session_id})
            for session_id in (live, stored, "sess_never_created", "../escape")
        ]
        listed = await client.call("session/list", {})
        prompt = await client.prompt(live, "gone?")
        reply, _, _ = await load(client, stored, tmp_path)

    for result in results:
        DeleteSessionResponse.model_validate(result)
        assert_schema("DeleteSessionResponse", result)
    assert listed["sessions"] == []
    assert sorted(p.name for p in sessions_dir().iterdir()) == []
    assert prompt["error"]["code"] == RESOURCE_NOT_FOUND
    assert reply["error"]["code"] == RESOURCE_NOT_FOUND


# --- additional directories and titles -----------------------------------------------------


async def test_additional_directories_are_listed_and_replaced_by_each_load(
    connection: Connection, tmp_path: Path
) -> None:
    project, library = tmp_path / "project", tmp_path / "library"
    project.mkdir()
    library.mkdir()
    (library / "lib.txt").write_text("library text\n")
    read = '@tool read_file {"path": "' + str(library / "lib.txt") + '"}'
    async with connection() as client:
        await client.initialize()
        session_id = await client.new_session(project, additionalDirectories=[str(library)])
        [listed] = (await client.call("session/list", {}))["sessions"]
        await run_prompt(client, session_id, "hello")  # a session never used is not kept

    assert listed["additionalDirectories"] == [str(library)]

    async with connection() as client:
        await client.initialize()
        await load(client, session_id, project, additionalDirectories=[str(library)])
        client.permission_answer = selected("reject_once")
        start = len(client.frames)
        await run_prompt(client, session_id, read)
        inside = tool_calls(updates_between(client, session_id, start))
        asked_inside = client.agent_requests_for("session/request_permission")

    async with connection() as client:
        await client.initialize()
        await load(client, session_id, project)  # no additional directories this time
        client.permission_answer = selected("reject_once")
        start = len(client.frames)
        await run_prompt(client, session_id, read)
        outside = tool_calls(updates_between(client, session_id, start))
        asked_outside = client.agent_requests_for("session/request_permission")

    assert asked_inside == [] and [c["status"] for c in inside.values()] == ["completed"]
    assert len(asked_outside) == 1 and [c["status"] for c in outside.values()] == ["failed"]


async def test_the_first_turn_names_the_session_once_and_the_list_shows_it(
    connection: Connection, tmp_path: Path
) -> None:
    first = "Please   fix the flaky login test in the auth module and explain why it failed"
    async with connection() as client:
        await client.initialize()
        session_id = await client.new_session(tmp_path)
        reply = await run_prompt(client, session_id, first)
        reply_index = client.frames.index(reply)
        await run_prompt(client, session_id, "and a second prompt")
        infos = of_kind(client.updates(session_id), "session_info_update")
        [listed] = (await client.call("session/list", {}))["sessions"]

    [info] = infos
    assert client.index_of(lambda f: f.get("params", {}).get("update") == info) < reply_index
    title = info["title"]
    assert title.startswith("Please fix the flaky login test") and title.endswith("…")
    assert len(title) <= 60
    assert listed["title"] == title
    assert listed["updatedAt"] >= info["updatedAt"]

    async with connection() as client:
        await client.initialize()
        [listed_later] = (await client.call("session/list", {}))["sessions"]
        _, replayed, _ = await load(client, session_id, tmp_path)
    assert listed_later == listed
    assert [u["title"] for u in of_kind(replayed, "session_info_update")] == [title]


# --- damaged and old stores ----------------------------------------------------------------


@pytest.mark.parametrize(
    "garbage",
    [b'{"v":1,"kind":"message","message":{"role":"assi', b"\x00\xff not json at all\n"],
    ids=["torn-last-line", "garbage-line"],
)
async def test_a_corrupted_trailing_record_is_skipped_and_the_session_goes_on(
    connection: Connection, tmp_path: Path, garbage: bytes
) -> None:
    async with connection() as client:
        await client.initialize()
        session_id = await client.new_session(tmp_path)
        await run_prompt(client, session_id, "before the crash")
    with log_file(session_id).open("ab") as file:
        file.write(garbage)

    async with connection() as client:
        await client.initialize()
        reply, replayed, _ = await load(client, session_id, tmp_path)
        after = await run_prompt(client, session_id, "after the crash")

    assert "result" in reply
    assert user_texts(replayed) == ["before the crash"]
    assert after["result"]["stopReason"] == "end_turn"

    async with connection() as client:
        await client.initialize()
        _, replayed, _ = await load(client, session_id, tmp_path)
    assert user_texts(replayed) == ["before the crash", "after the crash"]
    assert "Echo: after the crash" in "".join(
        texts_by_message(replayed, "agent_message_chunk").values()
    )


async def test_a_version_1_store_loads_over_the_protocol_and_goes_on(
    connection: Connection, tmp_path: Path
) -> None:
    sessions_dir().mkdir(parents=True)
    shutil.copy(FIXTURE_V1, sessions_dir() / "fixture-v1.jsonl")

    async with connection() as client:
        await client.initialize()
        [listed] = (await client.call("session/list", {}))["sessions"]
        reply, replayed, _ = await load(client, "fixture-v1", tmp_path)
        after = await run_prompt(client, "fixture-v1", "carry on")

    assert listed["sessionId"] == "fixture-v1" and listed["title"] == "Fix the café bug"
    assert listed["cwd"] == "/home/ada/project"
    LoadSessionResponse.model_validate(reply["result"])
    assert_schema("LoadSessionResponse", reply["result"])
    assert_valid_updates(replayed, "fixture-v1")
    assert (
        user_texts(replayed)[0]
        == 'Fix the bug in café.py:\nline one\u2028line two "quoted" \\ tab\t'
    )
    assert [u["content"]["type"] for u in of_kind(replayed, "user_message_chunk")][:2] == [
        "text",
        "image",
    ]
    assert texts_by_message(replayed, "agent_thought_chunk") == {
        "msg-2": "Let me look at the file.",
        None: "unlabelled thought",
    }
    assert texts_by_message(replayed, "agent_message_chunk")["msg-2"] == "I will read it first. 🙂"
    calls = tool_calls(replayed)
    assert (calls["call_1"]["status"], calls["call_2"]["status"]) == ("completed", "failed")
    assert calls["call_1"]["locations"] == [{"path": "/home/ada/project/café.py", "line": 12}]
    # The v1 log kept a command's live terminal stream: it is not shown again (the
    # terminal is gone), so no display terminal opens and the call keeps its title.
    assert not [u for u in replayed if "_meta" in u]
    assert calls["call_2"]["title"] == "Run tests"
    [started] = [u for u in of_kind(replayed, "tool_call") if u["toolCallId"] == "call_2"]
    # The dead terminal shows as the text the command returned to the model.
    assert content_types(started) == ["content", "diff", "diff", "content"]
    assert [c.get("path") for c in started["content"]] == [None, "/a.py", "/new.py", None]
    assert "1 failed" in started["content"][-1]["content"]["text"]
    assert not [u for u in replayed if "terminal" in content_types(u)]
    assert [len(u["entries"]) for u in of_kind(replayed, "plan")] == [3, 0]
    assert reply["result"]["modes"]["currentModeId"] == "accept-edits"
    assert after["result"]["stopReason"] == "end_turn"


async def test_slash_commands_and_their_answers_are_shown_again_on_load(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        await client.initialize()
        session_id = await client.new_session(tmp_path)
        await run_prompt(client, session_id, "/model")
        live = client.updates(session_id)

    async with connection() as client:
        await client.initialize()
        _, replayed, _ = await load(client, session_id, tmp_path)

    assert user_texts(replayed) == ["/model"]
    [answer] = texts_by_message(live, "agent_message_chunk").values()
    assert "Models:" in answer
    assert list(texts_by_message(replayed, "agent_message_chunk").values()) == [answer]
