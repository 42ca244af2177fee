"""Turn events as v2 `session/update` notifications (ACP v2 Preview).

Each notification is validated against the v2 schemas the npm `@agentclientprotocol/sdk`
ships, as `UpdateSessionNotification`: the unstable schema *closed* (its open "other" and
"unknown" branches removed, so a misspelt kind, content type or status fails instead of
passing as a future extension), and the stable schema as it is.
"""

from __future__ import annotations

import base64
import subprocess
import typing
from pathlib import Path
from typing import Any

import pytest
import schema_support
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acp_agent.messages import (
    BackgroundChanged,
    CommandInfo,
    CommandsChanged,
    CompactionFinished,
    CompactionStarted,
    CompactionSummaryChunk,
    DiffContent,
    DocumentPart,
    ImagePart,
    Location,
    MessageChunk,
    Notice,
    PlanEntry,
    PlanUpdated,
    ResourceLinkPart,
    SessionInfoChanged,
    SubagentChanged,
    TerminalContent,
    TerminalStream,
    TextPart,
    ThoughtChunk,
    ToolCallStarted,
    ToolCallUpdated,
    TurnEvent,
    UsageUpdated,
    UserMessageChunk,
)
from acp_agent.protocol.handshake import ClientCapabilities
from acp_agent.protocol.v2_updates import (
    BackgroundSubagent,
    BackgroundTerminal,
    BackgroundToolCall,
    git_patch,
    replay_complete,
    session_update_v2,
    session_updates_v2,
    state_update,
    user_message,
)
from acp_agent.rpc.errors import INTERNAL_ERROR, RpcError

CAPS = ClientCapabilities()


def assert_v2(update: dict[str, Any]) -> None:
    """The notification carrying `update` is what the v2 schemas define."""
    notification = {"sessionId": "sess_1", "update": update}
    schema_support.assert_v2(notification, "UpdateSessionNotification", closed=True)


def frames(event: TurnEvent) -> list[dict[str, Any]]:
    return session_updates_v2(event, CAPS)


# --- every event kind ----------------------------------------------------------------------

EVENTS: dict[str, TurnEvent] = {
    "message chunk": MessageChunk("Hello", message_id="m1"),
    "whole message": MessageChunk("\n\n[The conversation is too long. Start a new session.]"),
    "thought chunk": ThoughtChunk("Let me think", message_id="t1"),
    "whole thought": ThoughtChunk("An old thought"),
    "user text": UserMessageChunk(TextPart("fix it"), message_id="u1"),
    "user image": UserMessageChunk(ImagePart("aGk=", "image/png"), message_id="u1"),
    "user link": UserMessageChunk(ResourceLinkPart("file:///w/a.py", "a.py", "text/x-python")),
    "user document": UserMessageChunk(
        DocumentPart("JVBE", "application/pdf", "file:///w/a.pdf"), message_id="u1"
    ),
    "tool call": ToolCallStarted(
        "call_1",
        "Edit a.py",
        "edit",
        raw_input={"path": "a.py", "old": "x", "new": "y"},
        locations=(Location("/w/a.py", 3),),
        content=(DiffContent("/w/a.py", "x = 1\n", "x = 2\n"),),
        name="edit_file",
    ),
    "bare tool call": ToolCallStarted("call_2", "Think", "think"),
    "tool update": ToolCallUpdated(
        "call_1",
        status="completed",
        title="Edit a.py",
        content=(
            TextPart("done"),
            DiffContent("/w/new.py", None, "print('hi')\n"),
            TerminalContent("local-call_3"),
        ),
        locations=(Location("/w/a.py", 0),),
        raw_output={"changed": 1},
    ),
    "tool update clearing content": ToolCallUpdated("call_1", status="failed", content=()),
    "terminal opens": ToolCallUpdated(
        "call_3",
        status="in_progress",
        title="pytest -q",
        terminal=TerminalStream("local-call_3", cwd="/w"),
    ),
    "terminal output": ToolCallUpdated(
        "call_3", terminal=TerminalStream("local-call_3", output="2 passed ✓\n")
    ),
    "terminal exits": ToolCallUpdated(
        "call_3", terminal=TerminalStream("local-call_3", exited=True, exit_code=1)
    ),
    "terminal killed": ToolCallUpdated(
        "call_3", terminal=TerminalStream("local-call_3", exited=True, signal="SIGKILL")
    ),
    "items plan": PlanUpdated((PlanEntry("Read"), PlanEntry("Fix", "high", "in_progress"))),
    "markdown plan": PlanUpdated((), "p-2", "# Plan\n- [ ] step", "/w/PLAN.md"),
    "plan removed": PlanUpdated((), "p-2"),
    "usage": UsageUpdated(used=1200, size=200_000, cost_usd=0.01234567),
    "usage without cost": UsageUpdated(used=0, size=8192),
    "session info": SessionInfoChanged(title="Fix the tests", updated_at="2026-12-02T03:00:00Z"),
    "commands": CommandsChanged(
        (CommandInfo("compact", "Summarise the history"), CommandInfo("mcp", "Servers", "name"))
    ),
    "compaction starts": CompactionStarted("c1"),
    "compaction summary": CompactionSummaryChunk("c1", "We fixed"),
    "compaction completed": CompactionFinished("c1", "completed", "We fixed a.py", summarised=4),
    "compaction failed": CompactionFinished("c1", "failed", error="the model refused"),
    "notice": Notice("openai: rate limited", "retrying in 2.0s", "warning", message_id="m1"),
    "notice without title": Notice("  ", severity="error"),
    "subagent runs": SubagentChanged("child-1", "Test runner", "running"),
    "subagent ends": SubagentChanged("child-1", "Test runner", "idle", "end_turn"),
    "subagent failed": SubagentChanged("child-1", "Test runner", "idle"),
}


def test_every_turn_event_kind_has_an_example() -> None:
    # A change of background work is a `state_update` of the connection's session states
    # (tests/protocol/test_v2_cancel.py), not a translation of the event alone.
    kinds = set(typing.get_args(TurnEvent)) - {BackgroundChanged}
    assert {type(event) for event in EVENTS.values()} == kinds


@pytest.mark.parametrize("name", EVENTS)
def test_every_event_becomes_schema_valid_v2_updates(name: str) -> None:
    updates = frames(EVENTS[name])

    assert updates
    for update in updates:
        assert_v2(update)


@pytest.mark.parametrize("name", EVENTS)
def test_no_v1_only_shape_is_sent(name: str) -> None:
    for update in frames(EVENTS[name]):
        assert update["sessionUpdate"] not in {"tool_call", "plan", "current_mode_update"}
        assert "_meta" not in update  # no Zed `terminal_*` extension: v2 has real terminals


# --- messages ------------------------------------------------------------------------------


def test_chunks_of_one_message_share_its_id_and_another_message_has_its_own() -> None:
    first, second = frames(MessageChunk("Hel", "m1")) + frames(MessageChunk("lo", "m1"))
    other = frames(MessageChunk("Bye", "m2"))[0]

    assert first == {
        "sessionUpdate": "agent_message_chunk",
        "messageId": "m1",
        "content": {"type": "text", "text": "Hel"},
    }
    assert second["messageId"] == "m1"
    assert other["messageId"] == "m2"


def test_thoughts_and_user_parts_are_chunks_of_their_own_messages() -> None:
    thought = frames(ThoughtChunk("hmm", "t1"))[0]
    user = frames(UserMessageChunk(ResourceLinkPart("file:///w/a.py", "a.py"), "u1"))[0]

    assert thought["sessionUpdate"] == "agent_thought_chunk"
    assert thought["messageId"] == "t1"
    assert user == {
        "sessionUpdate": "user_message_chunk",
        "messageId": "u1",
        "content": {"type": "resource_link", "uri": "file:///w/a.py", "name": "a.py"},
    }


def test_a_message_without_id_is_a_whole_message_under_an_id_that_is_always_the_same() -> None:
    note = MessageChunk("\n\n[Stopped after 25 tool calls.]")

    update = frames(note)[0]

    assert update["sessionUpdate"] == "agent_message"
    assert update["content"] == [{"type": "text", "text": note.text}]
    assert update["messageId"] == frames(note)[0]["messageId"]  # a replay names it again
    assert update["messageId"] != frames(MessageChunk("other"))[0]["messageId"]
    assert update["messageId"] != frames(ThoughtChunk(note.text))[0]["messageId"]


def test_the_inserted_user_message_is_one_upsert_with_all_its_parts() -> None:
    update = user_message("u7", [TextPart("look at"), ResourceLinkPart("file:///w/a", "a")])

    assert update == {
        "sessionUpdate": "user_message",
        "messageId": "u7",
        "content": [
            {"type": "text", "text": "look at"},
            {"type": "resource_link", "uri": "file:///w/a", "name": "a"},
        ],
    }
    assert_v2(update)


# --- tool calls ----------------------------------------------------------------------------


def test_the_first_tool_call_update_creates_the_call_with_all_it_has() -> None:
    (created,) = frames(EVENTS["tool call"])

    assert created["sessionUpdate"] == "tool_call_update"
    assert {key: created[key] for key in ("toolCallId", "title", "kind", "status", "name")} == {
        "toolCallId": "call_1",
        "title": "Edit a.py",
        "kind": "edit",
        "status": "pending",
        "name": "edit_file",
    }
    assert created["rawInput"] == {"path": "a.py", "old": "x", "new": "y"}
    assert created["locations"] == [{"path": "/w/a.py", "line": 3}]
    assert created["content"][0]["type"] == "diff"


def test_a_later_update_sends_only_what_changed_and_an_empty_list_clears() -> None:
    assert frames(ToolCallUpdated("call_1", status="in_progress")) == [
        {"sessionUpdate": "tool_call_update", "toolCallId": "call_1", "status": "in_progress"}
    ]
    assert frames(EVENTS["tool update clearing content"])[0]["content"] == []


def test_a_location_without_a_real_line_names_the_file_alone() -> None:
    update = frames(EVENTS["tool update"])[0]

    assert update["locations"] == [{"path": "/w/a.py"}]


# --- display terminals ---------------------------------------------------------------------


def test_a_local_command_opens_a_display_terminal_the_call_shows() -> None:
    terminal, call = frames(EVENTS["terminal opens"])

    assert terminal == {
        "sessionUpdate": "terminal_update",
        "terminalId": "local-call_3",
        "cwd": "/w",
    }
    assert call == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "call_3",
        "status": "in_progress",
        "title": "pytest -q",
        "content": [{"type": "terminal", "terminalId": "local-call_3"}],
    }


def test_terminal_output_is_base64_of_the_bytes_and_decodes_back() -> None:
    text = "2 passed ✓ in 0.1s\r\n\x1b[32mok\x1b[0m"

    (chunk,) = frames(ToolCallUpdated("call_3", terminal=TerminalStream("t1", output=text)))

    assert chunk["sessionUpdate"] == "terminal_output_chunk"
    assert chunk["terminalId"] == "t1"
    assert base64.b64decode(chunk["data"], validate=True).decode("utf-8") == text


def test_the_exit_is_a_terminal_update_with_the_exit_status() -> None:
    (exited,) = frames(EVENTS["terminal exits"])
    (killed,) = frames(EVENTS["terminal killed"])

    assert exited == {
        "sessionUpdate": "terminal_update",
        "terminalId": "local-call_3",
        "exitStatus": {"exitCode": 1},
        "capabilities": None,  # an exited terminal cannot be cancelled any more
    }
    assert killed["exitStatus"] == {"signal": "SIGKILL"}


def test_one_payload_api_refuses_an_event_that_makes_two_rather_than_drop_one() -> None:
    with pytest.raises(ValueError, match="session_updates_v2"):
        session_update_v2(EVENTS["terminal opens"], CAPS)
    assert session_update_v2(EVENTS["usage"], CAPS) == frames(EVENTS["usage"])[0]


# --- diffs ---------------------------------------------------------------------------------


def _applied_by_git(root: Path, diff: DiffContent) -> str:
    """What the file at `diff.path` holds after git applies our patch to it."""
    update = frames(ToolCallUpdated("call_1", content=(diff,)))[0]
    patch = update["content"][0]["patch"]
    assert patch["format"] == "git_patch"
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    strip = f"-p{len(root.parts)}"  # the absolute path's leading directories, down to root
    subprocess.run(
        ["git", "apply", strip, "-"], cwd=root, input=patch["text"], text=True, check=True
    )
    return Path(diff.path).read_text(encoding="utf-8")


@pytest.mark.parametrize("name", ["a.py", "a file.py", 'é "quoted".py'])
def test_an_edit_is_a_modify_change_whose_patch_git_applies(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    old = "".join(f"line {n}\n" for n in range(1, 12))
    new = old.replace("line 2\n", "line two\n").replace("line 11\n", "line 11")
    path.write_text(old, encoding="utf-8")
    diff = DiffContent(str(path), old, new)

    change = frames(ToolCallUpdated("call_1", content=(diff,)))[0]["content"][0]

    assert change["changes"] == [{"operation": "modify", "path": str(path), "fileType": "text"}]
    assert _applied_by_git(tmp_path, diff) == new


def test_a_new_file_is_an_add_change_whose_patch_git_applies(tmp_path: Path) -> None:
    diff = DiffContent(str(tmp_path / "new.py"), None, "print('hi')\n")

    change = frames(ToolCallUpdated("call_1", content=(diff,)))[0]["content"][0]

    assert change["changes"][0]["operation"] == "add"
    assert _applied_by_git(tmp_path, diff) == "print('hi')\n"


def test_patch_paths_are_absolute_without_prefixes_and_quoted_as_git_quotes_them() -> None:
    plain = git_patch("/w/a.py", "a\n", "b\n")
    odd = git_patch('/w/é"x.py', "a\n", "b\n")

    assert plain.splitlines()[:3] == ["diff --git /w/a.py /w/a.py", "--- /w/a.py", "+++ /w/a.py"]
    assert odd.splitlines()[0] == 'diff --git "/w/\\303\\251\\"x.py" "/w/\\303\\251\\"x.py"'
    assert git_patch("/w/a.py", "same\n", "same\n") == ""


# --- plans, commands -----------------------------------------------------------------------


def test_plans_are_always_plan_operations_by_id() -> None:
    (items,) = frames(EVENTS["items plan"])
    (markdown,) = frames(EVENTS["markdown plan"])

    assert items["sessionUpdate"] == "plan_update"
    assert items["plan"]["planId"] == "plan"
    assert markdown["plan"] == {
        "type": "markdown",
        "planId": "p-2",
        "content": "# Plan\n- [ ] step",
        "path": "/w/PLAN.md",
    }
    assert frames(EVENTS["plan removed"]) == [{"sessionUpdate": "plan_removed", "planId": "p-2"}]


def test_slash_commands_and_their_input_carry_their_types() -> None:
    (update,) = frames(EVENTS["commands"])

    assert update["availableCommands"] == [
        {"type": "command", "name": "compact", "description": "Summarise the history"},
        {
            "type": "command",
            "name": "mcp",
            "description": "Servers",
            "input": {"type": "text", "hint": "name"},
        },
    ]


def test_notices_compaction_and_subagents_need_no_client_capability() -> None:
    assert frames(EVENTS["notice"])[0]["sessionUpdate"] == "notice"
    assert frames(EVENTS["compaction starts"])[0]["sessionUpdate"] == "compaction_update"
    assert frames(EVENTS["subagent ends"])[0]["state"] == {
        "state": "idle",
        "stopReason": "end_turn",
    }


# --- lifecycle builders --------------------------------------------------------------------


@pytest.mark.parametrize(
    "update",
    [
        state_update("running"),
        state_update("requires_action", background=[]),
        state_update("idle", "end_turn"),
        state_update("idle", "cancelled", background=[BackgroundTerminal("t-3")]),
        state_update(
            "idle",
            "error",
            RpcError(INTERNAL_ERROR, "openai: 500", {"provider": "openai"}),
            [BackgroundToolCall("call_9"), BackgroundSubagent("child-1")],
        ),
        state_update("idle"),
    ],
)
def test_state_updates_are_schema_valid(update: dict[str, Any]) -> None:
    assert_v2(update)


def test_an_idle_after_a_failure_carries_the_error_and_the_background_work() -> None:
    update = state_update(
        "idle", "error", RpcError(INTERNAL_ERROR, "boom"), [BackgroundTerminal("t-3")]
    )

    assert update == {
        "sessionUpdate": "state_update",
        "state": "idle",
        "stopReason": "error",
        "error": {"code": INTERNAL_ERROR, "message": "boom"},
        "background": [{"type": "terminal", "terminalId": "t-3"}],
    }
    assert "background" not in state_update("running")  # not reported is not "nothing"


def test_a_stop_reason_or_error_out_of_place_is_refused() -> None:
    with pytest.raises(ValueError):
        state_update("running", "end_turn")
    with pytest.raises(ValueError):
        state_update("idle", "end_turn", RpcError(INTERNAL_ERROR, "boom"))


def test_replay_complete_is_the_bare_marker() -> None:
    # Newer than the npm 2.4.0 schemas: they accept it only as an unknown update kind.
    update = replay_complete()

    assert update == {"sessionUpdate": "replay_complete"}
    notification = {"sessionId": "s", "update": update}
    schema_support.assert_v2(notification, "UpdateSessionNotification", stable=False)


# --- any sequence --------------------------------------------------------------------------

ids = st.sampled_from(["m1", "m2", "t1", "u1"]) | st.none()
texts = st.text(max_size=40)
paths = st.builds(lambda name: f"/w/{name}", st.text(min_size=1, max_size=12))
locations = st.builds(Location, paths, st.none() | st.integers(0, 10_000))
tool_contents = st.one_of(
    st.builds(TextPart, texts),
    st.builds(DiffContent, paths, st.none() | texts, texts),
    st.builds(TerminalContent, st.text(min_size=1, max_size=8)),
)
statuses = st.sampled_from(["pending", "in_progress", "completed", "failed"])
kinds = st.sampled_from(typing.get_args(typing.get_type_hints(ToolCallStarted)["kind"]))
streams = st.builds(
    TerminalStream,
    st.text(min_size=1, max_size=8),
    st.none() | paths,
    st.none() | texts,
    st.booleans(),
    st.none() | st.integers(-255, 255),
    st.none() | st.sampled_from(["SIGKILL", "SIGTERM"]),
)
user_parts = st.one_of(
    st.builds(TextPart, texts),
    st.builds(ImagePart, st.just("aGk="), st.just("image/png")),
    st.builds(ResourceLinkPart, st.just("file:///w/a.py"), texts, st.none() | st.just("text/x")),
    st.builds(DocumentPart, st.just("JVBE"), st.just("application/pdf"), texts),
)
plan_entries = st.builds(
    PlanEntry,
    texts,
    st.sampled_from(["high", "medium", "low"]),
    st.sampled_from(["pending", "in_progress", "completed"]),
)
events = st.one_of(
    st.builds(MessageChunk, texts, ids),
    st.builds(ThoughtChunk, texts, ids),
    st.builds(UserMessageChunk, user_parts, ids),
    st.builds(
        ToolCallStarted,
        st.text(min_size=1, max_size=8),
        texts,
        kinds,
        statuses,
        st.none() | st.dictionaries(st.text(max_size=5), st.integers() | texts, max_size=3),
        st.lists(locations, max_size=2).map(tuple),
        st.lists(tool_contents, max_size=3).map(tuple),
        st.none() | texts,
    ),
    st.builds(
        ToolCallUpdated,
        st.text(min_size=1, max_size=8),
        st.none() | statuses,
        st.none() | texts,
        st.none() | st.lists(tool_contents, max_size=3).map(tuple),
        st.none() | st.lists(locations, max_size=2).map(tuple),
        st.none() | st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
        st.none() | streams,
    ),
    st.builds(
        PlanUpdated,
        st.lists(plan_entries, max_size=3).map(tuple),
        st.none() | st.text(min_size=1, max_size=8),
    ),
    st.builds(PlanUpdated, st.just(()), st.none() | st.just("p"), texts, st.none() | paths),
    st.builds(
        UsageUpdated,
        st.integers(0, 2**40),
        st.integers(0, 2**40),
        st.none() | st.floats(0, 1e6, allow_nan=False),
    ),
    st.builds(SessionInfoChanged, st.none() | texts, st.none() | st.just("2026-12-02T03:00:00Z")),
    st.builds(
        CommandsChanged,
        st.lists(st.builds(CommandInfo, texts, texts, st.none() | texts), max_size=3).map(tuple),
    ),
    st.builds(CompactionStarted, st.text(min_size=1, max_size=8)),
    st.builds(CompactionSummaryChunk, st.text(min_size=1, max_size=8), texts),
    st.builds(
        CompactionFinished,
        st.text(min_size=1, max_size=8),
        st.sampled_from(["completed", "failed", "cancelled"]),
        st.none() | texts,
        st.none() | texts,
    ),
    st.builds(Notice, texts, st.none() | texts, st.sampled_from(["info", "warning", "error"]), ids),
    st.builds(
        SubagentChanged,
        st.text(min_size=1, max_size=8),
        texts,
        st.sampled_from(["running", "idle"]),
        st.none() | st.sampled_from(["end_turn", "cancelled", "max_tokens"]),
    ),
)


@settings(max_examples=150, deadline=None, derandomize=True, database=None)
@given(st.lists(events, min_size=1, max_size=12))
def test_any_sequence_of_events_translates_to_schema_valid_updates(
    sequence: list[TurnEvent],
) -> None:
    for event in sequence:
        for update in frames(event):
            assert_v2(update)
            if update["sessionUpdate"].endswith("_chunk") and hasattr(event, "message_id"):
                assert update["messageId"] == event.message_id


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(old=st.none() | st.text(max_size=200), new=st.text(max_size=200))
def test_git_applies_every_patch_we_write(tmp_path: Path, old: str | None, new: str) -> None:
    root = tmp_path / "git"
    root.mkdir(exist_ok=True)
    path = root / "f.txt"
    path.unlink(missing_ok=True)
    if old is not None:
        path.write_bytes(old.encode("utf-8"))
    if git_patch(str(path), old, new) == "":
        assert old == new
        return
    diff = DiffContent(str(path), old, new)
    update = frames(ToolCallUpdated("c", content=(diff,)))[0]
    patch = update["content"][0]["patch"]["text"]
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(
        ["git", "apply", f"-p{len(root.parts)}", "-"], cwd=root, input=patch.encode(), check=True
    )
    assert path.read_bytes() == new.encode("utf-8")
