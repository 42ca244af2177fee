"""MCP tools as engine tools (`sessions/mcp_tools.py`): specs, display, permissions, and a
turn of the real engine calling a real MCP server."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from everything import PNG
from mcp_bridge_support import stdio_spec

from acp_agent.engine import ModelSettings, ModelSetup, Turn
from acp_agent.mcp_bridge import McpHub, McpServerSpec, McpToolInfo, McpToolResult
from acp_agent.messages import (
    ImagePart,
    Message,
    Stop,
    StreamEvent,
    TextDelta,
    TextPart,
    ToolCallEnd,
    ToolCallPart,
    ToolCallStarted,
    ToolCallUpdated,
    ToolResultPart,
    TurnEvent,
)
from acp_agent.providers import ModelRequest
from acp_agent.sessions.mcp_tools import McpArguments, McpTool, mcp_tools, outcome_of, tool_kind
from acp_agent.tools import (
    Decision,
    PermissionMemory,
    PermissionQuestion,
    Tool,
    ToolContext,
    ToolFailed,
    builtin_tools,
    decide,
    tools_for_mode,
)

pytestmark = pytest.mark.anyio


class NoEditor:
    can_read_files = False
    can_write_files = False
    can_run_terminals = False


def context(tmp_path: Path) -> ToolContext:
    return ToolContext(
        session_id="sess_mcp",
        cwd=tmp_path,
        roots=(tmp_path,),
        editor=NoEditor(),  # type: ignore[arg-type]
        tool_call_id="call_1",
    )


def info(name: str, **hints: bool) -> McpToolInfo:
    return McpToolInfo(
        server="srv",
        name=name,
        qualified_name=f"mcp__srv__{name}",
        title=None,
        description=f"The {name} tool.",
        input_schema={"type": "object", "properties": {"x": {"type": "string"}}},
        **hints,
    )


def hubless(tool_info: McpToolInfo, tmp_path: Path) -> McpTool:
    return McpTool.of(McpHub([], cwd=tmp_path), tool_info)


def test_an_mcp_tool_offers_the_servers_schema_under_its_qualified_name(tmp_path: Path) -> None:
    tool = hubless(info("search"), tmp_path)
    spec = tool.spec()
    assert (spec.name, spec.description) == ("mcp__srv__search", "The search tool.")
    assert spec.parameters == {"type": "object", "properties": {"x": {"type": "string"}}}
    params = McpArguments.model_validate({"x": "1", "nested": {"y": [1]}})
    assert tool.title(params, context(tmp_path)) == "srv: search"
    assert params.model_extra == {"x": "1", "nested": {"y": [1]}}


def test_a_trusted_servers_annotations_decide_kind_and_permission_attributes(
    tmp_path: Path,
) -> None:
    reader = hubless(info("read", read_only=True, trusted=True), tmp_path)
    fetcher = hubless(info("fetch", read_only=True, open_world=True, trusted=True), tmp_path)
    wiper = hubless(info("wipe", destructive=True, trusted=True), tmp_path)
    plain = hubless(info("plain", trusted=True), tmp_path)
    assert (reader.kind, reader.read_only, reader.always_asks) == ("read", True, False)
    assert (fetcher.kind, fetcher.read_only) == ("fetch", True)
    assert (wiper.kind, wiper.read_only, wiper.always_asks) == ("other", False, True)
    assert (plain.kind, plain.read_only, plain.always_asks) == ("other", False, False)
    both = hubless(info("both", read_only=True, destructive=True, trusted=True), tmp_path)
    assert (both.kind, both.read_only, both.always_asks) == ("read", True, False)


def test_an_untrusted_servers_read_only_claim_counts_for_nothing(tmp_path: Path) -> None:
    reader = hubless(info("read", read_only=True), tmp_path)
    fetcher = hubless(info("fetch", read_only=True, open_world=True), tmp_path)
    both = hubless(info("both", read_only=True, destructive=True), tmp_path)
    assert (reader.kind, reader.read_only, reader.always_asks) == ("other", False, False)
    assert (fetcher.kind, fetcher.read_only) == ("other", False)
    # A destructive claim only adds caution: it holds whoever makes it.
    assert (both.kind, both.read_only, both.always_asks) == ("other", False, True)
    assert tool_kind(info("both", read_only=True, destructive=True)) == "other"


def test_an_untrusted_read_only_tool_is_asked_about_like_a_command(tmp_path: Path) -> None:
    ctx = context(tmp_path)
    params = McpArguments()
    reader = hubless(info("read", read_only=True), tmp_path)
    memory = PermissionMemory()

    for mode in ("ask", "accept-edits"):
        assert decide(reader, params, ctx, mode, memory) == "ask"
    assert decide(reader, params, ctx, "read-only", memory) == "reject"
    assert tools_for_mode({reader.name: reader}, "read-only") == {}
    assert memory.describe(reader, params, ctx) == "mcp__srv__read"
    memory.remember("allow_always", reader, params, ctx)
    assert decide(reader, params, ctx, "ask", memory) == "allow"


def test_the_permission_policy_follows_a_trusted_servers_annotations(tmp_path: Path) -> None:
    ctx = context(tmp_path)
    params = McpArguments()
    reader = hubless(info("read", read_only=True, trusted=True), tmp_path)
    wiper = hubless(info("wipe", destructive=True), tmp_path)
    plain = hubless(info("plain"), tmp_path)
    memory = PermissionMemory()

    assert decide(reader, params, ctx, "ask", memory) == "allow"
    assert decide(plain, params, ctx, "ask", memory) == "ask"
    for mode in ("ask", "accept-edits"):
        assert decide(wiper, params, ctx, mode, memory) == "ask"
    assert decide(wiper, params, ctx, "bypass", memory) == "allow"
    assert decide(wiper, params, ctx, "read-only", memory) == "reject"
    tools: dict[str, Tool[Any]] = {t.name: t for t in (reader, wiper, plain)}
    assert list(tools_for_mode(tools, "read-only")) == ["mcp__srv__read"]

    # A destructive tool offers no "always", and an "always" answer does not stick.
    assert memory.describe(wiper, params, ctx) is None
    memory.remember("allow_always", wiper, params, ctx)
    assert decide(wiper, params, ctx, "ask", memory) == "ask"
    # An unannotated one does.
    assert memory.describe(plain, params, ctx) == "mcp__srv__plain"
    memory.remember("allow_always", plain, params, ctx)
    assert decide(plain, params, ctx, "ask", memory) == "allow"


def test_builtin_tools_keep_their_attributes() -> None:
    tools = builtin_tools()
    assert tools["read_file"].read_only and not tools["read_file"].always_asks
    assert not tools["shell"].read_only and tools["shell"].kind == "execute"
    assert all(not tool.always_asks for tool in tools.values())


def test_an_is_error_result_fails_the_call_with_its_message() -> None:
    with pytest.raises(ToolFailed, match="disk full"):
        outcome_of(McpToolResult((TextPart("disk full"),), is_error=True))
    with pytest.raises(ToolFailed, match="without a message"):
        outcome_of(McpToolResult((), is_error=True))


def test_a_result_gives_the_model_its_images_and_the_user_text() -> None:
    outcome = outcome_of(McpToolResult((TextPart("look"), ImagePart(PNG, "image/png"))))
    assert outcome.model_parts == (TextPart("look"), ImagePart(PNG, "image/png"))
    assert outcome.model_text == "look\n[image (image/png)]"
    assert outcome.display == (TextPart("look\n[image (image/png)]"),)


async def test_running_an_mcp_tool_calls_the_server_and_reports_progress(tmp_path: Path) -> None:
    events: list[TurnEvent] = []
    async with McpHub([stdio_spec("every", "everything.py")], cwd=tmp_path) as hub:
        tools = mcp_tools(hub)
        echo = tools["mcp__every__echo"]
        outcome = await echo.run(McpArguments.model_validate({"text": "hi"}), context(tmp_path))
        assert outcome.model_text == "hi" and outcome.model_parts == (TextPart("hi"),)

        with pytest.raises(ToolFailed, match="failed on purpose: no"):
            await tools["mcp__every__fail"].run(
                McpArguments.model_validate({"reason": "no"}), context(tmp_path)
            )

        reported = anyio.Event()

        async def emit(event: TurnEvent) -> None:
            events.append(event)
            reported.set()

        async with anyio.create_task_group() as tg:

            async def slow() -> None:
                ctx = replace(context(tmp_path), emit=emit)
                await tools["mcp__every__slow"].run(McpArguments(), ctx)

            tg.start_soon(slow)
            with anyio.fail_after(10):
                await reported.wait()
            tg.cancel_scope.cancel()
        assert events == [ToolCallUpdated("call_1", content=(TextPart("warming up (1/10)"),))]
    with pytest.raises(ToolFailed, match="MCP server 'every'"):
        await echo.run(McpArguments.model_validate({"text": "hi"}), context(tmp_path))


async def test_an_unavailable_server_fails_the_call_with_the_reason(tmp_path: Path) -> None:
    async with McpHub([McpServerSpec("ghost", command="no-such-mcp-server")], cwd=tmp_path) as hub:
        tool = McpTool.of(hub, replace(info("anything"), server="ghost"))
        with pytest.raises(ToolFailed, match="command not found"):
            await tool.run(McpArguments(), context(tmp_path))


# --- a turn of the real engine ---------------------------------------------------------------


class ScriptedProvider:
    name = "scripted"

    def __init__(self, *replies: Sequence[StreamEvent]) -> None:
        self._replies = list(replies)
        self.requests: list[ModelRequest] = []

    @asynccontextmanager
    async def stream(self, request: ModelRequest) -> AsyncIterator[AsyncIterator[StreamEvent]]:
        self.requests.append(copy.deepcopy(request))
        yield self._events(self._replies.pop(0))

    async def _events(self, reply: Sequence[StreamEvent]) -> AsyncIterator[StreamEvent]:
        for event in reply:
            await anyio.lowlevel.checkpoint()
            yield event


class Host:
    def __init__(self) -> None:
        self.events: list[TurnEvent] = []
        self.questions: list[PermissionQuestion] = []
        self.progress = anyio.Event()

    async def emit(self, event: TurnEvent) -> None:
        self.events.append(event)
        if isinstance(event, ToolCallUpdated) and event.content and event.status is None:
            self.progress.set()

    async def ask_permission(self, question: PermissionQuestion) -> Decision:
        self.questions.append(question)
        return "allow_once"

    def keep(self, message: Message, message_id: str | None) -> None:
        pass


class Choices:
    mode = "ask"

    def __init__(self, provider: ScriptedProvider) -> None:
        self.provider = provider

    async def model_setup(self) -> ModelSetup:
        settings = ModelSettings(model="m", system_prompt="test", context_window=10_000)
        return ModelSetup(self.provider, settings)  # type: ignore[arg-type]


def tool_call(call_id: str, name: str, **arguments: Any) -> ToolCallEnd:
    return ToolCallEnd(ToolCallPart(call_id, name, arguments))


def turn(provider: ScriptedProvider, host: Host, hub: McpHub, tmp_path: Path) -> Turn:
    return Turn(
        choices=Choices(provider),  # type: ignore[arg-type]
        history=[],
        tools={**builtin_tools(), **mcp_tools(hub)},
        context=context(tmp_path),
        host=host,
    )


async def test_a_turn_offers_calls_and_shows_an_mcp_tool(tmp_path: Path) -> None:
    provider = ScriptedProvider(
        [
            tool_call("c1", "mcp__every__mixed"),
            tool_call("c2", "mcp__every__wipe", path="/"),
            Stop("tool_use"),
        ],
        [TextDelta("done"), Stop("end_turn")],
    )
    host = Host()
    async with McpHub([stdio_spec("every", "everything.py")], cwd=tmp_path) as hub:
        the_turn = turn(provider, host, hub, tmp_path)
        assert await the_turn.run(Message("user", [TextPart("go")])) == "end_turn"

    offered = {spec.name: spec for spec in provider.requests[0].tools}
    assert offered["mcp__every__echo"].description == "Echo the text back."
    assert "read_file" in offered
    started = [e for e in host.events if isinstance(e, ToolCallStarted)]
    assert [(e.title, e.kind, e.raw_input) for e in started] == [
        ("every: mixed", "other", {}),
        ("every: wipe", "other", {"path": "/"}),
    ]
    # Unannotated asks with an "always" option; destructive asks without one.
    assert [(q.title, q.always_scope) for q in host.questions] == [
        ("every: mixed", "mcp__every__mixed"),
        ("every: wipe", None),
    ]
    results = [p for p in the_turn.history[2].parts if isinstance(p, ToolResultPart)]
    assert ImagePart(PNG, "image/png") in results[0].content
    assert results[1].content == (TextPart("wiped /"),)
    completed = [
        e for e in host.events if isinstance(e, ToolCallUpdated) and e.status == "completed"
    ]
    assert len(completed) == 2


async def test_cancelling_a_turn_during_an_mcp_call_cancels_it_promptly(tmp_path: Path) -> None:
    provider = ScriptedProvider([tool_call("c1", "mcp__every__slow"), Stop("tool_use")])
    host = Host()
    async with McpHub([stdio_spec("every", "everything.py")], cwd=tmp_path) as hub:
        the_turn = turn(provider, host, hub, tmp_path)
        scope = anyio.CancelScope()  # the session's scope for the running turn
        async with anyio.create_task_group() as tg:

            async def run() -> None:
                with scope:
                    await the_turn.run(Message("user", [TextPart("go")]))

            tg.start_soon(run)
            with anyio.fail_after(10):
                await host.progress.wait()
            started = anyio.current_time()
            scope.cancel()
        assert anyio.current_time() - started < 1.0
        assert scope.cancelled_caught  # the session answers the prompt `cancelled`
        failed = [e for e in host.events if isinstance(e, ToolCallUpdated) and e.status == "failed"]
        assert failed and failed[0].id == "c1"
        results = [p for p in the_turn.history[-1].parts if isinstance(p, ToolResultPart)]
        assert results and results[0].is_error
        assert (await hub.call_tool("every", "was_cancelled", {})).text == "cancelled"


@pytest.mark.parametrize("trusted", [False, True], ids=["untrusted", "trusted"])
async def test_a_read_only_claim_is_believed_only_of_a_trusted_server(
    tmp_path: Path, trusted: bool
) -> None:
    # huge.py's `note` claims readOnlyHint and writes a file.
    spec = replace(stdio_spec("huge", "huge.py"), trusted=trusted)
    target = tmp_path / "claimed.txt"
    provider = ScriptedProvider(
        [tool_call("c1", "mcp__huge__note", path=str(target), text="asked"), Stop("tool_use")],
        [TextDelta("done"), Stop("end_turn")],
        [tool_call("c2", "mcp__huge__note", path=str(target), text="read-only"), Stop("tool_use")],
        [TextDelta("done"), Stop("end_turn")],
    )
    host = Host()
    async with McpHub([spec], cwd=tmp_path, connect_timeout=30) as hub:
        in_ask = turn(provider, host, hub, tmp_path)
        assert await in_ask.run(Message("user", [TextPart("go")])) == "end_turn"
        asked = [(q.title, q.kind, q.always_scope) for q in host.questions]
        in_read_only = turn(provider, host, hub, tmp_path)
        in_read_only.choices.mode = "read-only"  # type: ignore[misc]
        assert await in_read_only.run(Message("user", [TextPart("go")])) == "end_turn"

    offered = {tool.name for tool in provider.requests[2].tools}
    [refused] = tool_results_of(in_read_only.history[-2])
    started = [e for e in host.events if isinstance(e, ToolCallStarted)]
    if trusted:
        assert asked == []
        assert "mcp__huge__note" in offered
        assert target.read_text(encoding="utf-8") == "read-only"
        assert started[0].kind == "read"
    else:
        # Asked like a command, with "always" for this tool; in read-only not offered, and
        # refused if called anyway.
        assert asked == [("huge: note", "other", "mcp__huge__note")]
        assert "mcp__huge__note" not in offered and "read_file" in offered
        assert refused.is_error and "read-only mode" in refused.content[0].text  # type: ignore[union-attr]
        assert target.read_text(encoding="utf-8") == "asked"
        assert started[0].kind == "other"


def tool_results_of(message: Message) -> list[ToolResultPart]:
    return [p for p in message.parts if isinstance(p, ToolResultPart)]
