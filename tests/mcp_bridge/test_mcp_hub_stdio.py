"""The hub against real MCP servers started as stdio subprocesses."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import anyio
import pytest
from e2e_support import processes_with_env
from everything import DOTTED_TOOL, LONG_TOOL, PNG
from mcp_bridge_support import MARK, Changes, stdio_spec

from acp_agent.config import AgentConfig, EchoProviderConfig
from acp_agent.mcp_bridge import (
    CallFailed,
    ElicitationReply,
    ElicitationRequest,
    HubHandlers,
    McpHub,
    McpProgress,
    McpServerSpec,
    ResourceContent,
    ResourceLinkContent,
    SamplingReply,
    SamplingRequest,
    ServerUnavailable,
)
from acp_agent.messages import ImagePart, TextPart

pytestmark = pytest.mark.anyio


async def test_a_stdio_server_connects_and_offers_its_tools_and_prompts(tmp_path: Path) -> None:
    changes = Changes()
    hub = McpHub(
        [stdio_spec("every", "everything.py")],
        cwd=tmp_path,
        handlers=HubHandlers(on_change=changes),
    )
    async with hub:
        [status] = hub.statuses()
        assert status.state == "ready" and status.error is None
        names = {tool.qualified_name: tool for tool in hub.tools()}
        assert {"mcp__every__echo", "mcp__every__add", "mcp__every__wipe"} <= set(names)
        echo = names["mcp__every__echo"]
        assert (echo.server, echo.name, echo.description) == (
            "every",
            "echo",
            "Echo the text back.",
        )
        assert echo.input_schema["properties"]["text"]["type"] == "string"
        assert echo.read_only and not echo.destructive
        assert names["mcp__every__wipe"].destructive and not names["mcp__every__wipe"].read_only
        assert names["mcp__every__fetch_page"].open_world
        assert [p.command for p in hub.prompts()] == ["every:greet", "every:review"]
        assert hub.find_tool("mcp__every__echo") == echo
        assert [s.state for s in changes.seen] == ["ready"]
    assert hub.statuses()[0].state == "closed"


async def test_tools_and_prompts_are_listed_at_once_not_one_round_trip_after_the_other(
    tmp_path: Path,
) -> None:
    # The server answers neither list before it was asked both (a remote server's latency
    # is paid once, not twice): listing one after the other never connects.
    hub = McpHub([stdio_spec("both", "lists_together.py")], cwd=tmp_path, connect_timeout=10.0)
    async with hub:
        [status] = hub.statuses()
        assert status.state == "ready", status.error
        assert [tool.qualified_name for tool in hub.tools()] == ["mcp__both__ping"]
        assert [prompt.command for prompt in hub.prompts()] == ["both:hello"]


async def test_tool_names_are_vendor_safe_and_stable_for_odd_and_long_names(
    tmp_path: Path,
) -> None:
    async with McpHub([stdio_spec("every", "everything.py")], cwd=tmp_path) as hub:
        by_tool = {tool.name: tool.qualified_name for tool in hub.tools()}
    for name in by_tool.values():
        assert len(name) <= 64 and name.replace("_", "").replace("-", "").isalnum()
    assert len(set(by_tool.values())) == len(by_tool)
    assert by_tool[LONG_TOOL].startswith("mcp__every__summarise") and len(by_tool[LONG_TOOL]) == 64
    assert by_tool[DOTTED_TOOL].startswith("mcp__every__ns_lookup_")
    async with McpHub([stdio_spec("every", "everything.py")], cwd=tmp_path) as again:
        assert {tool.name: tool.qualified_name for tool in again.tools()} == by_tool
        result = await again.call_tool("every", DOTTED_TOOL, {"key": "k"})
        assert result.content == (TextPart("looked up k"),)


async def test_calls_return_text_structured_content_and_every_content_kind(tmp_path: Path) -> None:
    async with McpHub([stdio_spec("every", "everything.py")], cwd=tmp_path) as hub:
        echoed = await hub.call_tool("every", "echo", {"text": "hi"})
        assert echoed.content == (TextPart("hi"),) and not echoed.is_error
        assert echoed.model_parts() == (TextPart("hi"),)

        added = await hub.call_tool("every", "add", {"a": 2, "b": 3})
        assert added.structured == {"sum": 5}

        only = await hub.call_tool("every", "structured_only", {})
        assert only.content == () and only.model_parts() == (TextPart('{"answer": 42}'),)

        mixed = await hub.call_tool("every", "mixed", {})
        text, image, note, blob, link = mixed.content
        assert text == TextPart("some text")
        assert image == ImagePart(PNG, "image/png")
        assert note == ResourceContent("file:///notes.txt", "text/plain", text="note body")
        assert isinstance(blob, ResourceContent) and blob.blob is not None
        assert isinstance(link, ResourceLinkContent) and link.uri == "file:///big.log"
        parts = mixed.model_parts()
        assert parts[1] == ImagePart(PNG, "image/png")
        assert parts[2] == TextPart("[resource file:///notes.txt]\nnote body")
        assert parts[3] == TextPart(
            "[resource file:///data.bin (application/octet-stream), 5 bytes]"
        )
        assert parts[4] == TextPart(
            "[resource link big.log file:///big.log (text/plain): the full log]"
        )


async def test_an_is_error_result_comes_back_as_an_error_with_its_message(tmp_path: Path) -> None:
    async with McpHub([stdio_spec("every", "everything.py")], cwd=tmp_path) as hub:
        result = await hub.call_tool("every", "fail", {"reason": "no disk"})
    assert result.is_error
    assert "failed on purpose: no disk" in result.text


async def test_a_server_that_hangs_at_startup_fails_within_the_budget_the_others_work(
    tmp_path: Path,
) -> None:
    specs = [stdio_spec("hang", "hang.py"), stdio_spec("every", "everything.py")]
    changes = Changes()
    hub = McpHub(specs, cwd=tmp_path, connect_timeout=3.0, handlers=HubHandlers(on_change=changes))
    started = time.monotonic()
    async with hub:
        elapsed = time.monotonic() - started
        hang, every = hub.statuses()
        assert elapsed < 3.0 + 1.0  # the budget, and a margin for a busy machine
        assert hang.state == "failed" and hang.error == "did not connect within 3s"
        assert hang.stderr == ("warming up, this may take a while",)
        assert "MCP server 'hang'" in hang.describe_failure()
        assert "warming up" in hang.describe_failure()
        assert every.state == "ready"
        assert (await hub.call_tool("every", "echo", {"text": "still here"})).text == "still here"
        assert any(s.name == "hang" and s.state == "failed" for s in changes.seen)


async def test_a_missing_command_is_reported_at_once_and_the_session_goes_on(
    tmp_path: Path,
) -> None:
    specs = [
        McpServerSpec("ghost", command="no-such-mcp-server-here"),
        stdio_spec("every", "everything.py"),
    ]
    async with McpHub(specs, cwd=tmp_path) as hub:
        ghost, every = hub.statuses()
        assert ghost.state == "failed"
        assert ghost.error == "cannot start 'no-such-mcp-server-here': command not found"
        assert every.state == "ready"
        assert all(tool.server == "every" for tool in hub.tools())
        with pytest.raises(ServerUnavailable, match="command not found"):
            await hub.call_tool("ghost", "anything", {})


async def test_a_crash_mid_call_fails_the_call_with_its_stderr_and_a_retry_revives_it(
    tmp_path: Path,
) -> None:
    changes = Changes()
    hub = McpHub(
        [stdio_spec("every", "everything.py")],
        cwd=tmp_path,
        handlers=HubHandlers(on_change=changes),
    )
    async with hub:
        with anyio.fail_after(10), pytest.raises(CallFailed) as failed:
            await hub.call_tool("every", "crash", {})
        assert "closed the connection during the call" in str(failed.value)
        assert "about to crash: goodbye" in str(failed.value)
        status = await changes.wait_for("every", "failed")
        assert status.error == "the server closed the connection"
        assert "about to crash: goodbye" in status.stderr
        assert hub.tools() == []
        # The next use retries it.
        assert (await hub.call_tool("every", "echo", {"text": "back"})).text == "back"
        assert hub.statuses()[0].state == "ready" and hub.tools()


async def test_a_failed_server_is_retried_on_next_use_and_its_tools_come_back(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "ready"
    changes = Changes()
    hub = McpHub(
        [stdio_spec("flaky", "flaky.py", str(marker))],
        cwd=tmp_path,
        handlers=HubHandlers(on_change=changes),
    )
    async with hub:
        [status] = hub.statuses()
        assert status.state == "failed"
        assert status.error == "the server closed the connection before it answered"
        assert status.stderr == (f"not ready: {marker} is missing",)
        await hub.reconnect()
        assert hub.statuses()[0].state == "failed"
        marker.touch()
        await hub.reconnect()
        assert hub.statuses()[0].state == "ready"
        assert [tool.qualified_name for tool in hub.tools()] == ["mcp__flaky__ping"]
        assert (await changes.wait_for("flaky", "ready")).tools == ("mcp__flaky__ping",)


async def test_a_background_retry_reports_the_tools_when_they_come_back(tmp_path: Path) -> None:
    marker = tmp_path / "ready"
    changes = Changes()
    hub = McpHub(
        [stdio_spec("flaky", "flaky.py", str(marker))],
        cwd=tmp_path,
        handlers=HubHandlers(on_change=changes),
    )
    async with hub:
        marker.touch()
        await hub.reconnect(wait=False)
        await changes.wait_for("flaky", "ready", tool="mcp__flaky__ping")
        assert hub.tools()


async def test_tools_list_changed_refreshes_the_tools(tmp_path: Path) -> None:
    changes = Changes()
    hub = McpHub(
        [stdio_spec("every", "everything.py")],
        cwd=tmp_path,
        handlers=HubHandlers(on_change=changes),
    )
    async with hub:
        assert hub.find_tool("mcp__every__grown") is None
        await hub.call_tool("every", "grow", {})
        await changes.wait_for("every", "ready", tool="mcp__every__grown")
        grown = hub.find_tool("mcp__every__grown")
        assert grown is not None and grown.description == "A tool added later."
        assert (await hub.call_tool("every", "grown", {})).text == "grown"


async def test_an_elicitation_goes_to_the_callback(tmp_path: Path) -> None:
    asked: list[ElicitationRequest] = []

    async def elicit(request: ElicitationRequest) -> ElicitationReply:
        asked.append(request)
        return ElicitationReply("accept", {"name": "Ada", "age": 36})

    hub = McpHub(
        [stdio_spec("every", "everything.py")], cwd=tmp_path, handlers=HubHandlers(elicit=elicit)
    )
    async with hub:
        result = await hub.call_tool("every", "ask", {})
    assert result.text == "accept: Ada 36"
    [request] = asked
    assert (request.server, request.message, request.mode) == ("every", "Who are you?", "form")
    assert request.schema is not None and set(request.schema["properties"]) == {"name", "age"}


async def test_an_elicitation_the_callback_declines_is_declined(tmp_path: Path) -> None:
    async def elicit(request: ElicitationRequest) -> None:
        return None

    hub = McpHub(
        [stdio_spec("every", "everything.py")], cwd=tmp_path, handlers=HubHandlers(elicit=elicit)
    )
    async with hub:
        assert (await hub.call_tool("every", "ask", {})).text == "decline"


async def test_without_an_elicitation_callback_a_request_is_declined_with_a_message(
    tmp_path: Path,
) -> None:
    async with McpHub([stdio_spec("every", "everything.py")], cwd=tmp_path) as hub:
        result = await hub.call_tool("every", "ask", {})
    assert result.text == "error: Elicitation not supported"


async def test_roots_list_answers_the_session_roots(tmp_path: Path) -> None:
    other = tmp_path / "other root"
    roots = HubHandlers(roots=lambda: (tmp_path, other))
    async with McpHub([stdio_spec("every", "everything.py")], cwd=tmp_path, handlers=roots) as hub:
        result = await hub.call_tool("every", "roots", {})
    assert result.text == f"{tmp_path.as_uri()} {other.as_uri()}"
    async with McpHub([stdio_spec("every", "everything.py")], cwd=tmp_path) as hub:
        assert (await hub.call_tool("every", "roots", {})).text == tmp_path.as_uri()


async def test_sampling_is_declined_unless_the_config_allows_it(tmp_path: Path) -> None:
    asked: list[SamplingRequest] = []

    async def sample(request: SamplingRequest) -> SamplingReply:
        asked.append(request)
        return SamplingReply("hi there", "echo")

    handlers = HubHandlers(sample=sample)
    async with McpHub(
        [stdio_spec("every", "everything.py")], cwd=tmp_path, handlers=handlers
    ) as hub:
        assert (
            await hub.call_tool("every", "sample", {})
        ).text == "declined: Sampling not supported"
    assert asked == []
    config = AgentConfig(
        providers={"echo": EchoProviderConfig(type="echo")}, mcp_allow_sampling=True
    )
    spec = stdio_spec("every", "everything.py")
    async with McpHub([spec], cwd=tmp_path, handlers=handlers, config=config) as hub:
        assert (await hub.call_tool("every", "sample", {})).text == "sampled: hi there"
    [request] = asked
    assert request.server == "every" and request.messages[0].text == "Say hi"
    assert request.max_tokens == 20


async def test_prompts_are_listed_and_their_messages_fetched(tmp_path: Path) -> None:
    async with McpHub([stdio_spec("every", "everything.py")], cwd=tmp_path) as hub:
        greet, review = hub.prompts()
        assert (greet.server, greet.name, greet.description) == ("every", "greet", "Greet someone.")
        assert [(a.name, a.required) for a in greet.arguments] == [("name", True)]
        assert hub.find_prompt("every:review") == review
        fetched = await hub.get_prompt("every", "greet", {"name": "Ada"})
        assert [(m.role, m.text) for m in fetched.messages] == [
            ("user", "Please greet Ada warmly.")
        ]
        two = await hub.get_prompt("every", "review", {"code": "x = 1"})
        assert [m.role for m in two.messages] == ["user", "assistant"]


async def test_cancelling_a_call_cancels_it_on_the_server(tmp_path: Path) -> None:
    progress: list[McpProgress] = []
    reported = anyio.Event()

    async def on_progress(report: McpProgress) -> None:
        progress.append(report)
        reported.set()

    async with McpHub([stdio_spec("every", "everything.py")], cwd=tmp_path) as hub:
        async with anyio.create_task_group() as tg:

            async def call() -> None:
                await hub.call_tool("every", "slow", {}, on_progress=on_progress)

            tg.start_soon(call)
            with anyio.fail_after(10):
                await reported.wait()
            tg.cancel_scope.cancel()
        assert progress == [McpProgress(1.0, 10.0, "warming up")]
        assert progress[0].describe() == "warming up (1/10)"
        # The server saw `notifications/cancelled`: its handler was cancelled.
        assert (await hub.call_tool("every", "was_cancelled", {})).text == "cancelled"
        assert hub.statuses()[0].state == "ready"


async def test_no_server_process_outlives_the_hub(tmp_path: Path) -> None:
    specs = [
        stdio_spec("every", "everything.py", **{MARK: "mark-every"}),
        stdio_spec("hang", "hang.py", **{MARK: "mark-hang"}),
    ]
    async with McpHub(specs, cwd=tmp_path, connect_timeout=4.0) as hub:
        assert processes_with_env(MARK, "mark-every")
        assert len(processes_with_env(MARK, "mark-hang")) == 2  # the server and its child
    assert processes_with_env(MARK, "mark-every") == []
    assert processes_with_env(MARK, "mark-hang") == []
    assert [s.state for s in hub.statuses()] == ["closed", "closed"]


async def test_aclose_from_another_task_closes_a_hub_run_in_a_task_group(tmp_path: Path) -> None:
    hub = McpHub([stdio_spec("every", "everything.py", **{MARK: "mark-run"})], cwd=tmp_path)
    async with anyio.create_task_group() as tg:
        await tg.start(hub.run)
        await hub.connected()
        assert hub.statuses()[0].state == "ready"

        async def close() -> None:
            await hub.aclose()

        tg.start_soon(close)
    await hub.aclose()  # idempotent
    assert hub.statuses()[0].state == "closed"
    assert processes_with_env(MARK, "mark-run") == []
    with pytest.raises(ServerUnavailable):
        await hub.call_tool("every", "echo", {"text": "x"})


async def test_cancelling_the_task_group_that_runs_the_hub_ends_its_servers(
    tmp_path: Path,
) -> None:
    hub = McpHub([stdio_spec("every", "everything.py", **{MARK: "mark-cancel"})], cwd=tmp_path)
    async with anyio.create_task_group() as tg:
        await tg.start(hub.run)
        tg.cancel_scope.cancel()
    assert processes_with_env(MARK, "mark-cancel") == []


async def test_a_stdio_server_gets_the_core_environment_its_own_and_none_of_our_keys(
    tmp_path: Path,
) -> None:
    environ = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "OPENAI_API_KEY": "sk-ours",
        "GITHUB_TOKEN": "gh-ours",
        "SOME_SETTING": "x",
    }
    spec = stdio_spec("every", "everything.py", SERVER_TOKEN="given")
    async with McpHub([spec], cwd=tmp_path, environ=environ) as hub:

        async def env(name: str) -> str:
            return (await hub.call_tool("every", "env", {"name": name})).text

        assert await env("SERVER_TOKEN") == "given"
        assert await env("HOME") == str(tmp_path)
        assert await env("OPENAI_API_KEY") == "<unset>"
        assert await env("GITHUB_TOKEN") == "<unset>"
        assert await env("SOME_SETTING") == "<unset>"
        assert (await hub.call_tool("every", "cwd", {})).text == str(tmp_path)


async def test_server_stderr_goes_to_the_log_and_never_to_our_stdout(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.INFO, logger="acp_agent.mcp_bridge")
    async with McpHub([stdio_spec("every", "everything.py")], cwd=tmp_path):
        pass
    assert "[every] everything server starting" in caplog.messages
    out, err = capfd.readouterr()
    assert out == "" and "everything server starting" not in err


async def test_an_invalid_spec_is_reported_not_started(tmp_path: Path) -> None:
    specs = [McpServerSpec("web", transport="http"), McpServerSpec("local", command=None)]
    async with McpHub(specs, cwd=tmp_path) as hub:
        web, local = hub.statuses()
    assert web.error == "web: an http server needs a url"
    assert local.error == "local: a stdio server needs a command"


async def test_a_call_that_changes_the_tool_list_returns_once_the_list_is_read_again(
    tmp_path: Path,
) -> None:
    async with McpHub([stdio_spec("every", "everything.py")], cwd=tmp_path) as hub:
        assert (await hub.call_tool("every", "grow", {})).text == "grew"
        # No waiting here: the model's next request is built right after the call.
        assert hub.find_tool("mcp__every__grown") is not None
        assert (await hub.call_tool("every", "grow_prompt", {})).text == "grew a prompt"
        assert hub.find_prompt("every:later") is not None


async def test_servers_cancelled_with_their_task_group_end_without_waiting_out_stderr(
    tmp_path: Path,
) -> None:
    specs = [stdio_spec(f"every{i}", "everything.py", **{MARK: "mark-quick"}) for i in range(3)]
    hub = McpHub(specs, cwd=tmp_path)
    async with anyio.create_task_group() as tg:
        await tg.start(hub.run)
        began = time.monotonic()
        tg.cancel_scope.cancel()
    took = time.monotonic() - began
    assert processes_with_env(MARK, "mark-quick") == []
    assert took < 1.0, f"closing took {took:.2f}s"  # it waited out STDERR_GRACE before
