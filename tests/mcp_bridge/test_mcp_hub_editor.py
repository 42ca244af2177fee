"""The hub against a server that lives in the editor (`acp` specs, MCP over ACP): the
bridge's requests go through `EditorMcp` to a stand-in editor that relays them to a real
MCP server subprocess (`RelayEditor`), and its notifications come back the same way. The
server speaks the binding's 2026-07-28 revision: list changes on a `subscriptions/listen`
stream, questions (elicitation, sampling, roots) in `input_required` results."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp_bridge_support import Changes, RelayEditor

from acp_agent.config import AgentConfig, EchoProviderConfig
from acp_agent.mcp_bridge import (
    CallFailed,
    ElicitationReply,
    ElicitationRequest,
    HubHandlers,
    McpHub,
    McpProgress,
    McpServerSpec,
    SamplingReply,
    SamplingRequest,
)

pytestmark = pytest.mark.anyio


def editor_spec(name: str, server_id: str) -> McpServerSpec:
    return McpServerSpec(name, "acp", server_id=server_id)


async def test_an_editor_server_offers_its_tools_and_answers_calls(tmp_path: Path) -> None:
    async with (
        RelayEditor("tools:1") as editor,
        McpHub(
            [editor_spec("tools", "tools:1")], cwd=tmp_path, handlers=HubHandlers(editor=editor.mcp)
        ) as hub,
    ):
        [status] = hub.statuses()
        assert (status.state, status.where) == ("ready", "in the editor, id tools:1")
        assert "mcp__tools__echo" in status.tools and "tools:greet" in status.prompts
        result = await hub.call_tool("tools", "echo", {"text": "hi"})
        prompt = await hub.get_prompt("tools", "greet", {"name": "Ada"})
    assert result.text == "hi" and not result.is_error
    assert [m.role for m in prompt.messages] == ["user"]
    # Listening before listing: no change made meanwhile goes unseen.
    assert editor.asked[:3] == ["server/discover", "subscriptions/listen", "tools/list"]
    assert "initialize" not in editor.asked


async def test_progress_reaches_the_call_and_a_cancel_reaches_the_server(tmp_path: Path) -> None:
    progress: list[McpProgress] = []
    reported = anyio.Event()

    async def on_progress(report: McpProgress) -> None:
        progress.append(report)
        reported.set()

    async with RelayEditor("t") as editor:
        handlers = HubHandlers(editor=editor.mcp)
        async with McpHub([editor_spec("t", "t")], cwd=tmp_path, handlers=handlers) as hub:
            async with anyio.create_task_group() as tg:

                async def call() -> None:
                    await hub.call_tool("t", "slow", {}, on_progress=on_progress)

                tg.start_soon(call)
                with anyio.fail_after(10):
                    await reported.wait()
                tg.cancel_scope.cancel()
            # The editor's request was given up, and the server's handler cancelled.
            assert (await hub.call_tool("t", "was_cancelled", {})).text == "cancelled"
            assert hub.statuses()[0].state == "ready"
    assert progress == [McpProgress(1.0, 10.0, "warming up")]


async def test_the_editors_errors_fail_the_call_or_the_server_with_the_reason(
    tmp_path: Path,
) -> None:
    changes = Changes()
    specs = [editor_spec("tools", "tools:1"), editor_spec("ghost", "ghost:1")]
    async with RelayEditor("tools:1") as editor:
        editor.refuse.add("echo")
        handlers = HubHandlers(editor=editor.mcp, on_change=changes)
        async with McpHub(specs, cwd=tmp_path, handlers=handlers) as hub:
            with pytest.raises(CallFailed, match="MCP server 'tools': refused by the editor"):
                await hub.call_tool("tools", "echo", {"text": "x"})
            assert (await hub.call_tool("tools", "add", {"a": 1, "b": 2})).structured == {"sum": 3}
            tools, ghost = hub.statuses()
    assert tools.state == "ready"
    assert ghost.state == "failed"
    assert ghost.describe_failure() == (
        "MCP server 'ghost' (in the editor, id ghost:1): the editor could not answer: "
        "MCP server registration unavailable (-33001)"
    )
    assert await changes.wait_for("ghost", "failed")


async def test_without_an_editor_connection_an_editor_server_fails_saying_so(
    tmp_path: Path,
) -> None:
    async with McpHub([editor_spec("tools", "tools:1")], cwd=tmp_path) as hub:
        [status] = hub.statuses()
    assert status.state == "failed"
    assert status.error == "there is no editor connection to reach it through"


async def test_a_tool_the_editors_server_adds_is_offered_right_after_the_call_that_added_it(
    tmp_path: Path,
) -> None:
    """2026-07-28 servers announce list changes on a `subscriptions/listen` stream only: the
    bridge opens one, and a change comes in as a notification of that active request."""
    changes = Changes()
    async with RelayEditor("t") as editor:
        handlers = HubHandlers(editor=editor.mcp, on_change=changes)
        async with McpHub([editor_spec("t", "t")], cwd=tmp_path, handlers=handlers) as hub:
            assert hub.find_tool("mcp__t__grown") is None
            assert (await hub.call_tool("t", "grow", {})).text == "grew"
            # No waiting here: the model's next request is built right after the call.
            grown = hub.find_tool("mcp__t__grown")
            assert grown is not None and grown.description == "A tool added later."
            assert (await hub.call_tool("t", "grown", {})).text == "grown"
            assert (await hub.call_tool("t", "grow_prompt", {})).text == "grew a prompt"
            assert hub.find_prompt("t:later") is not None
            await changes.wait_for("t", "ready", tool="mcp__t__grown")
    assert editor.asked.count("subscriptions/listen") == 1
    assert editor.asked.count("tools/list") == 2


async def test_the_editors_server_asks_its_questions_in_input_rounds_answered_as_for_any_server(
    tmp_path: Path,
) -> None:
    """2026-07-28 has no server requests: a call is answered `input_required`, its questions
    go to the same handlers as a classic server's requests, and the call is sent again."""
    asked: list[ElicitationRequest] = []

    async def elicit(request: ElicitationRequest) -> ElicitationReply:
        asked.append(request)
        return ElicitationReply("accept", {"name": "Ada", "age": 36})

    async def sample(request: SamplingRequest) -> SamplingReply:
        return SamplingReply(f"{request.messages[0].text} there", "echo")

    other = tmp_path / "other root"
    config = AgentConfig(
        providers={"echo": EchoProviderConfig(type="echo")}, mcp_allow_sampling=True
    )
    async with RelayEditor("t") as editor:
        handlers = HubHandlers(
            editor=editor.mcp, elicit=elicit, sample=sample, roots=lambda: (tmp_path, other)
        )
        spec = editor_spec("t", "t")
        async with McpHub([spec], cwd=tmp_path, handlers=handlers, config=config) as hub:
            assert (await hub.call_tool("t", "ask_resolved", {})).text == "accept: Ada 36"
            assert (await hub.call_tool("t", "sample_resolved", {})).text == "sampled: Hi there"
            roots = await hub.call_tool("t", "roots_resolved", {})
        async with McpHub([spec], cwd=tmp_path, handlers=HubHandlers(editor=editor.mcp)) as hub:
            # Not allowed to sample, no one to ask: refused with the reason, as MCP errors.
            with pytest.raises(CallFailed, match=r"^MCP server 't': .*sampling"):
                await hub.call_tool("t", "sample_resolved", {})
            with pytest.raises(CallFailed, match=r"^MCP server 't': .*elicitation"):
                await hub.call_tool("t", "ask_resolved", {})
    assert roots.text == f"{tmp_path.as_uri()} {other.as_uri()}"
    [question] = asked
    assert (question.server, question.message, question.mode) == ("t", "Who are you?", "form")
    assert editor.asked.count("tools/call ask_resolved") >= 2  # asked, then sent the answer
