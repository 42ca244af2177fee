"""The scenarios a user relies on, in both ACP dialects: each test runs once as v1 (the
Python SDK's client, an editor with its own fs and terminals) and once as v2 (the npm SDK's
v2 client; the agent edits and runs commands itself), from one script (`dialect_support`).
Every frame that crossed the pipe is checked against its dialect's schema, and the
assertions are on what the user saw, whichever dialect carried it.

Needs the npm SDK (`npm install` at the repository root): its schemas check both dialects.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from dialect_support import DIALECTS, Dialect, Script, Transcript, assert_schema_valid, run_script
from e2e_support import HELLO_TEXT, needs_v2_sdk, tool
from fake_anthropic import FakeAnthropic, anthropic_reply
from fake_llm import FakeLLM, fake_reply, last_user_text
from mcp_e2e import new_mark, stdio_entry
from test_e2e_model_switching import CLAUDE, GPT, fake_anthropic, switch_env

pytestmark = [pytest.mark.e2e, pytest.mark.anyio, needs_v2_sdk]  # its schemas check v1 too
__all__ = ["fake_anthropic", "switch_env"]  # fixtures this module uses

HANG_GUARD = 30.0
"""Seconds one script may take (an agent start, a few turns) before it counts as a hang."""


@pytest.fixture(params=DIALECTS)
def dialect(request: pytest.FixtureRequest) -> Dialect:
    value: Dialect = request.param
    return value


@pytest.fixture
def script(dialect: Dialect) -> Script:
    return Script(dialect)


@pytest.fixture
def run(agent_env: dict[str, str], agent_stderr: Path, workspace: Path) -> Any:
    """Runs a script against a fresh agent in the workspace, with the default environment."""

    async def run(script: Script, env: dict[str, str] | None = None) -> Transcript:
        return await run_script(script, env or agent_env, agent_stderr, workspace, HANG_GUARD)

    return run


def session_of(transcript: Transcript, name: str = "new") -> str:
    session_id: str = transcript.result(name)["sessionId"]
    return session_id


def config_option(answer: dict[str, Any], config_id: str) -> dict[str, Any]:
    """The config option `config_id` of an answer (v1 calls its id `id`, v2 `configId`)."""
    [option] = [o for o in answer["configOptions"] if o.get("configId", o.get("id")) == config_id]
    return option


def client_requests(transcript: Transcript) -> list[str]:
    """The methods the agent called on the client, in order."""
    return [f["method"] for f in transcript.received() if "method" in f and "id" in f]


async def test_a_prompt_streams_the_models_reply_and_ends_the_turn(
    script: Script, run: Any, workspace: Path
) -> None:
    session = script.new_session(workspace)
    script.prompt(session, "hello there", "prompt")

    transcript = await run(script)

    session_id = session_of(transcript)
    seen = transcript.seen(session_id)
    assert seen.text == fake_reply("hello there")
    assert len(transcript.updates(session_id, "agent_message_chunk")) > 1, "streamed"
    assert seen.stop_reasons == ["end_turn"]
    assert seen.tool_calls == {} and seen.permissions == []


async def test_a_permission_is_asked_a_rejection_changes_nothing_and_an_approval_edits(
    script: Script, run: Any, workspace: Path, dialect: Dialect
) -> None:
    script.permissions = ["reject_once", "allow_once"]
    session = script.new_session(workspace)
    edit = tool("edit_file", path="hello.txt", old_text="Second line.", new_text="Edited.")
    script.prompt(session, f"{edit} first", "rejected")
    script.prompt(session, f"{edit} again", "approved")

    transcript = await run(script)

    seen = transcript.seen(session_of(transcript))
    rejected, approved = seen.tool_calls.values()
    assert seen.permissions == list(seen.tool_calls), "asked before each edit"
    assert (rejected["name"], rejected["kind"], rejected["status"]) == (
        "edit_file",
        "edit",
        "failed",
    )
    assert (approved["name"], approved["status"]) == ("edit_file", "completed")
    assert (workspace / "hello.txt").read_text() == HELLO_TEXT.replace("Second line.", "Edited.")
    assert seen.stop_reasons == ["end_turn", "end_turn"]
    # The editor's own fs wrote it in v1; v2 has no client fs, so the agent did.
    assert ("fs/write_text_file" in client_requests(transcript)) == (dialect == "v1")


async def test_a_command_runs_in_a_terminal_the_user_sees_with_its_output(
    script: Script, run: Any, workspace: Path, dialect: Dialect
) -> None:
    session = script.new_session(workspace)
    script.prompt(session, tool("shell", command="echo from-the-terminal; exit 3"), "run")

    transcript = await run(script)

    seen = transcript.seen(session_of(transcript))
    call = seen.tool("shell")
    assert call["status"] == "failed"  # its exit code
    assert seen.terminal_output(call) == "from-the-terminal\n"
    # Still shown when it ended (a v2 upsert replaces the content: it must keep it).
    [terminal] = call["terminals"]
    assert call["content"] == [
        {"type": "terminal", "terminalId": terminal},
        {"type": "content", "content": {"type": "text", "text": "Exited with code 3."}},
    ]
    assert "[exit code 3]" in seen.text  # the model was told (the fake echoes tool results)
    # v1: the editor's terminal; v2: the agent's own, streamed to the client.
    assert ("terminal/create" in client_requests(transcript)) == (dialect == "v1")


async def test_cancel_mid_turn_stops_the_reply_and_ends_the_turn_cancelled(
    script: Script, run: Any, workspace: Path, fake_llm: FakeLLM
) -> None:
    session = script.new_session(workspace)
    words = " ".join(f"word{n}" for n in range(40))
    script.prompt(session, f"[[slow 0.2]] {words}", "slow", wait=False)
    script.until_update(session, sessionUpdate="agent_message_chunk")
    script.notify("session/cancel", {"sessionId": session})
    script.turns_ended(session, 1)

    transcript = await run(script)

    seen = transcript.seen(session_of(transcript))
    assert seen.stop_reasons == ["cancelled"]
    assert seen.text and fake_reply(words).startswith(seen.text)
    assert seen.text != fake_reply(words)
    assert fake_llm.wait_for_disconnect(timeout=HANG_GUARD), "the model call was dropped"


async def test_a_session_is_listed_and_reopened_in_a_new_process_with_its_history(
    dialect: Dialect, run: Any, workspace: Path, fake_llm: FakeLLM
) -> None:
    first = Script(dialect)
    first.prompt(first.new_session(workspace), "remember the teapot", "prompt")
    session = session_of(await run(first))

    again = Script(dialect)
    again.request("session/list", {}, "list")
    again.reopen(session, workspace)
    again.prompt(session, "what did I say?", "prompt")
    transcript = await run(again)

    listed = transcript.result("list")["sessions"]
    assert [s["sessionId"] for s in listed] == [session]
    assert listed[0]["title"] == "remember the teapot"
    seen = transcript.seen(session)
    assert seen.user_text.startswith("remember the teapot")  # the history, shown again
    assert seen.text.startswith(fake_reply("remember the teapot"))
    assert seen.stop_reasons[-1:] == ["end_turn"]
    # The model got the whole conversation back.
    history = fake_llm.requests[-1]["messages"]
    assert [m["role"] for m in history[1:]] == ["user", "assistant", "user"]
    assert last_user_text(fake_llm.requests[-1]) == "what did I say?"


async def test_a_model_chosen_in_the_config_options_answers_the_next_prompt(
    script: Script,
    run: Any,
    workspace: Path,
    switch_env: dict[str, str],
    fake_llm: FakeLLM,
    fake_anthropic: FakeAnthropic,
) -> None:
    session = script.new_session(workspace)
    script.prompt(session, "first to gpt", "gpt")
    script.set_config_option(session, "model", CLAUDE, "switched")
    script.prompt(session, "then to claude", "claude")

    transcript = await run(script, switch_env)

    assert config_option(transcript.result("new"), "model")["currentValue"] == GPT
    assert config_option(transcript.result("switched"), "model")["currentValue"] == CLAUDE
    seen = transcript.seen(session_of(transcript))
    assert seen.text == fake_reply("first to gpt") + anthropic_reply("then to claude")
    assert len(fake_llm.requests) == 1 and len(fake_anthropic.requests) == 1


async def test_an_mcp_servers_tool_is_called_and_its_result_shown(
    script: Script, run: Any, workspace: Path
) -> None:
    server = stdio_entry("local", mark=new_mark())
    session = script.new_session(workspace, mcp_servers=[server])
    script.prompt(session, tool("mcp__local__echo", text="from mcp"), "call")

    transcript = await run(script)

    seen = transcript.seen(session_of(transcript))
    call = seen.tool("mcp__local__echo")
    assert call["status"] == "completed"
    assert "from mcp" in seen.text  # the tool result reached the model and the user
    assert seen.stop_reasons == ["end_turn"]


def test_the_schema_check_fails_a_frame_of_the_other_dialect() -> None:
    # The check every scenario relies on can fail: v1's `tool_call` is no v2 update (v2's
    # first `tool_call_update` creates a call), and a v2 prompt is answered with its id.
    v1_call = {"sessionUpdate": "tool_call", "toolCallId": "call_1", "title": "Read"}
    notification = {"jsonrpc": "2.0", "method": "session/update"}
    notification["params"] = {"sessionId": "sess_1", "update": v1_call}
    assert_schema_valid(Transcript("v1", [{"in": notification}]))
    with pytest.raises(AssertionError, match="not a valid UpdateSessionNotification"):
        assert_schema_valid(Transcript("v2", [{"in": notification}]))

    prompt = {"jsonrpc": "2.0", "id": 3, "method": "session/prompt"}
    prompt["params"] = {"sessionId": "sess_1", "prompt": [{"type": "text", "text": "hi"}]}
    answer = {"jsonrpc": "2.0", "id": 3, "result": {"stopReason": "end_turn"}}
    assert_schema_valid(Transcript("v1", [{"out": prompt}, {"in": answer}]))
    with pytest.raises(AssertionError, match="not a valid PromptResponse"):
        assert_schema_valid(Transcript("v2", [{"out": prompt}, {"in": answer}]))
