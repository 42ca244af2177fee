"""What servers ask of us, answered through the session's `HubHandlers`, in the SDK's
callback shapes: `roots/list` (always: the session has roots), elicitation and sampling
(only when the session can answer them, so the capabilities a server sees are true; the
SDK declines the others with a message), notifications, progress."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp.client.session import ClientRequestContext

from ._link import Link
from ._results import sampling_messages
from .model import ElicitationRequest, HubHandlers, McpProgress, SamplingRequest

log = logging.getLogger(__name__)


def sdk_callbacks(
    link: Link, handlers: HubHandlers, cwd: Path, allow_sampling: bool
) -> dict[str, Any]:
    """The SDK callbacks: roots always; elicitation and sampling only when we can answer
    them, so the capabilities the server sees are true (the SDK declines the others)."""
    server = link.name

    async def list_roots(context: ClientRequestContext) -> types.ListRootsResult | types.ErrorData:
        paths = handlers.roots() if handlers.roots is not None else (cwd,)
        return types.ListRootsResult(
            roots=[types.Root.model_validate({"uri": p.as_uri(), "name": p.name}) for p in paths]
        )

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            link.poke(tools=True)
        elif isinstance(message, types.PromptListChangedNotification):
            link.poke(prompts=True)
        elif isinstance(message, Exception):
            log.warning("MCP server %r: %s", server, message)

    callbacks: dict[str, Any] = {"list_roots_callback": list_roots, "message_handler": on_message}
    elicit = handlers.elicit
    if elicit is not None:

        async def elicitation(
            context: ClientRequestContext, params: types.ElicitRequestParams
        ) -> types.ElicitResult | types.ErrorData:
            if isinstance(params, types.ElicitRequestURLParams):
                request = ElicitationRequest(
                    server,
                    params.message,
                    "url",
                    url=params.url,
                    elicitation_id=params.elicitation_id,
                )
            else:
                request = ElicitationRequest(
                    server, params.message, "form", schema=params.requested_schema
                )
            try:
                reply = await elicit(request)
            except Exception as exc:
                log.exception("MCP server %r: elicitation failed", server)
                return types.ErrorData(code=types.INTERNAL_ERROR, message=f"Not answered: {exc}")
            if reply is None:
                return types.ElicitResult(action="decline")
            content = reply.content if reply.action == "accept" else None
            return types.ElicitResult(action=reply.action, content=content)

        callbacks["elicitation_callback"] = elicitation
    sample = handlers.sample
    if allow_sampling and sample is not None:

        async def sampling(
            context: ClientRequestContext, params: types.CreateMessageRequestParams
        ) -> types.CreateMessageResult | types.ErrorData:
            request = SamplingRequest(
                server=server,
                messages=sampling_messages(params.messages),
                system_prompt=params.system_prompt,
                max_tokens=params.max_tokens,
                temperature=params.temperature,
                stop_sequences=tuple(params.stop_sequences or ()),
            )
            try:
                reply = await sample(request)
            except Exception as exc:
                log.exception("MCP server %r: sampling failed", server)
                return types.ErrorData(code=types.INTERNAL_ERROR, message=f"Sampling failed: {exc}")
            return types.CreateMessageResult(
                role="assistant",
                content=types.TextContent(type="text", text=reply.text),
                model=reply.model,
                stop_reason=reply.stop_reason,
            )

        callbacks["sampling_callback"] = sampling
    return callbacks


def progress_callback(server: str, on_progress: Callable[[McpProgress], Awaitable[None]]) -> Any:
    async def report(progress: float, total: float | None, message: str | None) -> None:
        try:
            await on_progress(McpProgress(progress, total, message))
        except Exception:
            log.exception("MCP server %r: progress report failed", server)

    return report
