"""A real MCP server (the SDK's `MCPServer`) with one tool per behaviour the bridge handles.

Run as a stdio server (`python everything.py [name]`), or serve `build()` over streamable
HTTP or SSE (`tests/mcp_bridge/conftest.py` does, on 127.0.0.1).
"""

from __future__ import annotations

import base64
import os
import sys
from typing import Annotated, Any

import anyio
import mcp_types as types
from mcp.server.mcpserver import Context, Elicit, ListRoots, MCPServer, Resolve, Sample
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\nfake-image-bytes").decode()
LONG_TOOL = "summarise_the_whole_repository_history_in_great_detail_please_now"
DOTTED_TOOL = "ns.lookup"


class Answer(BaseModel):
    name: str
    age: int


# Resolvers: what a tool needs asked of the client. On 2026-07-28 the server answers
# `input_required` until the client retries with the answers; a 2025-11-25 client is asked
# mid-call, as `ask`, `sample` and `roots` ask.
def who() -> Elicit[Answer]:
    return Elicit("Who are you?", Answer)


def said_hi() -> Sample:
    hi = types.SamplingMessage(role="user", content=types.TextContent(type="text", text="Hi"))
    return Sample([hi], max_tokens=20)


def their_roots() -> ListRoots:
    return ListRoots()


def build(name: str = "everything") -> MCPServer:
    server = MCPServer(name)
    cancelled = anyio.Event()

    @server.tool(annotations=types.ToolAnnotations(read_only_hint=True))
    def echo(text: str) -> str:
        """Echo the text back."""
        return text

    @server.tool(annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=True))
    def fetch_page(url: str) -> str:
        """Pretend to fetch a page."""
        return f"<html>{url}</html>"

    @server.tool(annotations=types.ToolAnnotations(destructive_hint=True))
    def wipe(path: str) -> str:
        """Delete everything under a path (pretend)."""
        return f"wiped {path}"

    @server.tool()
    def add(a: int, b: int) -> dict[str, int]:
        """Add two numbers; structured result."""
        return {"sum": a + b}

    @server.tool()
    def structured_only() -> types.CallToolResult:
        """Structured content without text."""
        return types.CallToolResult(content=[], structured_content={"answer": 42})

    @server.tool()
    def mixed() -> types.CallToolResult:
        """Every kind of content."""
        return types.CallToolResult(
            content=[
                types.TextContent(type="text", text="some text"),
                types.ImageContent(type="image", data=PNG, mime_type="image/png"),
                types.EmbeddedResource(
                    type="resource",
                    resource=types.TextResourceContents(
                        uri="file:///notes.txt", mime_type="text/plain", text="note body"
                    ),
                ),
                types.EmbeddedResource(
                    type="resource",
                    resource=types.BlobResourceContents(
                        uri="file:///data.bin",
                        mime_type="application/octet-stream",
                        blob=base64.b64encode(b"12345").decode(),
                    ),
                ),
                types.ResourceLink(
                    type="resource_link",
                    uri="file:///big.log",
                    name="big.log",
                    description="the full log",
                    mime_type="text/plain",
                ),
            ]
        )

    @server.tool()
    def fail(reason: str) -> str:
        """Fail with isError."""
        raise ToolError(f"failed on purpose: {reason}")

    @server.tool()
    async def slow(ctx: Context) -> str:
        """Report progress, then wait until cancelled."""
        await ctx.report_progress(1, 10, "warming up")
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.set()
        return "never"

    @server.tool()
    async def was_cancelled() -> str:
        """Say whether a `slow` call was cancelled (waits for it)."""
        with anyio.fail_after(20):
            await cancelled.wait()
        return "cancelled"

    @server.tool()
    def crash() -> str:
        """Die in the middle of the call."""
        print("about to crash: goodbye", file=sys.stderr, flush=True)
        os._exit(3)

    @server.tool()
    async def grow(ctx: Context) -> str:
        """Add a tool and say so (notifications/tools/list_changed)."""
        server.add_tool(lambda: "grown", name="grown", description="A tool added later.")
        await ctx.session.send_tool_list_changed()  # 2025-11-25: to the session
        await ctx.notify_tools_changed()  # 2026-07-28: on the `subscriptions/listen` streams
        return "grew"

    @server.tool()
    async def grow_prompt(ctx: Context) -> str:
        """Add a prompt and say so (notifications/prompts/list_changed)."""
        from mcp.server.mcpserver.prompts.base import Prompt

        def later(topic: str) -> str:
            """A prompt added later."""
            return f"Tell me about {topic}."

        server.add_prompt(Prompt.from_function(later, name="later"))
        await ctx.session.send_prompt_list_changed()
        await ctx.notify_prompts_changed()
        return "grew a prompt"

    @server.tool()
    async def ask(ctx: Context) -> str:
        """Ask the user for a name and an age (elicitation)."""
        try:
            result = await ctx.elicit("Who are you?", Answer)
        except Exception as exc:
            return f"error: {exc}"
        data = getattr(result, "data", None)
        return f"{result.action}: {data.name} {data.age}" if data else result.action

    # The same questions asked the 2026-07-28 way (`who` and the others below).
    @server.tool()
    def ask_resolved(answer: Annotated[Answer, Resolve(who)]) -> str:
        """Ask the user for a name and an age (elicitation, as a resolver)."""
        return f"accept: {answer.name} {answer.age}"

    @server.tool()
    def sample_resolved(result: Annotated[types.CreateMessageResult, Resolve(said_hi)]) -> str:
        """Ask the client's model for a completion (sampling, as a resolver)."""
        return f"sampled: {getattr(result.content, 'text', result.content)}"

    @server.tool()
    def roots_resolved(found: Annotated[types.ListRootsResult, Resolve(their_roots)]) -> str:
        """List the client's roots (as a resolver)."""
        return " ".join(str(root.uri) for root in found.roots)

    @server.tool()
    async def roots(ctx: Context) -> str:
        """List the client's roots."""
        found = await ctx.session.list_roots()
        return " ".join(str(root.uri) for root in found.roots)

    @server.tool()
    async def sample(ctx: Context) -> str:
        """Ask the client's model for a completion (sampling)."""
        message = types.SamplingMessage(
            role="user", content=types.TextContent(type="text", text="Say hi")
        )
        try:
            result = await ctx.session.create_message([message], max_tokens=20)
        except Exception as exc:
            return f"declined: {exc}"
        content = result.content
        return f"sampled: {getattr(content, 'text', content)}"

    @server.tool()
    def env(name: str) -> str:
        """One environment variable of the server, or <unset>."""
        return os.environ.get(name, "<unset>")

    @server.tool(annotations=types.ToolAnnotations(read_only_hint=True))
    def environ() -> dict[str, str]:
        """The server's whole environment."""
        return dict(os.environ)

    @server.tool()
    def header(name: str, ctx: Context) -> str:
        """One HTTP header of this request, or <none> (HTTP transports)."""
        return (ctx.headers or {}).get(name.lower(), "<none>")

    @server.tool()
    def cwd() -> str:
        """The server's working directory."""
        return os.getcwd()

    @server.tool(name=LONG_TOOL)
    def long_named() -> str:
        """A tool whose qualified name is too long for vendors."""
        return "long"

    @server.tool(name=DOTTED_TOOL)
    def dotted(key: Annotated[str, Field(description="what to look up")]) -> str:
        """A tool whose name has a dot."""
        return f"looked up {key}"

    @server.prompt()
    def greet(name: str) -> str:
        """Greet someone."""
        return f"Please greet {name} warmly."

    @server.prompt()
    def review(code: str) -> list[Any]:
        """Review some code: two messages."""
        from mcp.server.mcpserver.prompts.base import AssistantMessage, UserMessage

        return [UserMessage(f"Review this:\n{code}"), AssistantMessage("I will look at it.")]

    return server


if __name__ == "__main__":
    print("everything server starting", file=sys.stderr, flush=True)
    build(sys.argv[1] if len(sys.argv) > 1 else "everything").run()
