"""What a connected server offers the hub, as a protocol: `_link.py` and `hub.py` hold and
use a connection through it, and `_connection.py` (the only module that imports the SDK)
implements it, so the dependencies point one way: the SDK side imports the link, never the
other way round."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from .model import McpProgress, McpPromptInfo, McpToolInfo, McpToolResult, PromptResult


class LiveServer(Protocol):
    """A ready server's calls, in neutral terms; used from any task."""

    @property
    def server(self) -> str: ...

    async def list_tools(self) -> tuple[tuple[McpToolInfo, ...], tuple[str, ...]]: ...

    async def list_prompts(self) -> tuple[McpPromptInfo, ...]: ...

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any],
        on_progress: Callable[[McpProgress], Awaitable[None]] | None,
    ) -> McpToolResult: ...

    async def get_prompt(self, name: str, arguments: Mapping[str, str]) -> PromptResult: ...

    async def roots_changed(self) -> None: ...
