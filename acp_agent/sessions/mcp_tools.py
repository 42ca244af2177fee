"""A session's MCP tools as engine tools: the adapter between `mcp_bridge` and `tools`, which
may not import each other.

Each tool a ready server lists becomes an `McpTool`: the model sees it under its qualified
name (`mcp__<server>__<tool>`) with the server's description and (repaired) input schema;
the user sees `server: tool` with the raw input, progress as updates, and the result as text.
A result is cut as a shell command's output is: the model reads the first and last
characters of its text with a note of what was left out, images within the size a read file
may have; the log and the editor get the same, never the whole.
Its annotations are claims. Of a server the config trusts, `readOnlyHint` makes it a read
(runs without asking in `ask` mode, offered in `read-only`, ACP kind `read` or `fetch`);
any other server's tools are treated like commands (kind `other`: not offered in
`read-only`, asking in `ask` and `accept-edits`, "always" remembered per tool), since a
server could mark a writing tool read-only. `destructiveHint` holds for every server: it
makes the tool ask before every call in every mode but `bypass`, without an "always" option.

    tools = {**builtin_tools(), **mcp_tools(hub)}   # per turn: the lists may have changed
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from pydantic import ConfigDict

from ..mcp_bridge import McpError, McpHub, McpProgress, McpToolInfo, McpToolResult
from ..messages import TextPart, ToolCallUpdated, ToolKind, ToolSpec
from ..tools.base import Tool, ToolContext, ToolFailed, ToolOutcome, ToolParams

ERROR_WITHOUT_MESSAGE = "The tool reported an error without a message."


class McpArguments(ToolParams):
    """Whatever the model sent: the server validates its own arguments."""

    model_config = ConfigDict(extra="allow")
    refuses_nul = False  # a NUL is valid JSON text, and no path of ours


@dataclass
class RunningCalls:
    """The tool calls running now on each server, to tie what a server asks meanwhile (an
    elicitation) to the call that made it ask."""

    by_server: dict[str, list[str]] = field(default_factory=dict)

    @contextmanager
    def running(self, server: str, call_id: str) -> Iterator[None]:
        calls = self.by_server.setdefault(server, [])
        calls.append(call_id)
        try:
            yield
        finally:
            calls.remove(call_id)

    def only(self, server: str) -> str | None:
        """The call running on `server`, if exactly one is (else the asking is not tied)."""
        calls = self.by_server.get(server, [])
        return calls[0] if len(calls) == 1 else None


@dataclass(frozen=True)
class McpTool(Tool[McpArguments]):
    hub: McpHub = field(repr=False, compare=False)
    info: McpToolInfo
    name: str
    kind: ToolKind
    description: str
    params_model: type[ToolParams] = McpArguments
    read_only: bool = False
    always_asks: bool = False
    calls: RunningCalls = field(default_factory=RunningCalls, repr=False, compare=False)

    @classmethod
    def of(cls, hub: McpHub, info: McpToolInfo, calls: RunningCalls | None = None) -> McpTool:
        return cls(
            hub=hub,
            info=info,
            calls=calls or RunningCalls(),
            name=info.qualified_name,
            kind=tool_kind(info),
            description=info.description,
            read_only=info.changes_nothing,
            always_asks=info.destructive and not info.changes_nothing,
        )

    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name, description=self.description, parameters=self.info.input_schema
        )

    def title(self, params: McpArguments, ctx: ToolContext) -> str:
        return f"{self.info.server}: {self.info.name}"

    async def run(self, params: McpArguments, ctx: ToolContext) -> ToolOutcome:
        async def progress(report: McpProgress) -> None:
            await ctx.emit(
                ToolCallUpdated(ctx.tool_call_id, content=(TextPart(report.describe()),))
            )

        try:
            with self.calls.running(self.info.server, ctx.tool_call_id):
                result = await self.hub.call_tool(
                    self.info.server, self.info.name, params.model_extra or {}, on_progress=progress
                )
        except McpError as exc:
            raise ToolFailed(str(exc)) from None
        return outcome_of(result)


def mcp_tools(hub: McpHub, calls: RunningCalls | None = None) -> dict[str, Tool[Any]]:
    """The ready servers' tools now, by the name the model calls them; `calls` records
    which of them run."""
    return {info.qualified_name: McpTool.of(hub, info, calls) for info in hub.tools()}


def tool_kind(info: McpToolInfo) -> ToolKind:
    # An untrusted claim must not reach the editor either: clients approve `read` calls
    # by kind on their own (acpx --approve-reads).
    if info.changes_nothing:
        return "fetch" if info.open_world else "read"
    return "other"


def outcome_of(result: McpToolResult) -> ToolOutcome:
    """What the model and the user get, bounded as a command's output is (the model, the
    session's log and the editor all get the same head and tail); an `isError` result fails
    the call with its text."""
    # Not at import time: the shell tool's module is built with the tools, after start-up.
    from ..tools.file_context import MAX_MEDIA_BYTES
    from ..tools.shell import MODEL_HEAD_CHARS, MODEL_TAIL_CHARS

    result = result.bounded(MODEL_HEAD_CHARS, MODEL_TAIL_CHARS, MAX_MEDIA_BYTES)
    text = result.text
    if result.is_error:
        raise ToolFailed(text if result.content or result.structured else ERROR_WITHOUT_MESSAGE)
    return ToolOutcome(
        model_text=text,
        display=(TextPart(text),),
        model_parts=result.model_parts(),
        raw_output=result.structured,  # the server's machine-readable result, when it gave one
    )


__all__ = ["McpArguments", "McpTool", "RunningCalls", "mcp_tools", "outcome_of", "tool_kind"]
