"""SDK data to neutral data: tool results, content, tools, prompts. Imports the SDK's types,
so only `_connection.py` imports this module."""

from __future__ import annotations

import logging

import mcp_types as types

from ..messages import ImagePart, Message, TextPart
from ._names import prompt_command, qualified_name
from ._schema import ORIGINAL_SCHEMA, repair_schema
from .model import (
    AudioContent,
    McpContent,
    McpPromptInfo,
    McpToolInfo,
    McpToolResult,
    PromptArgument,
    PromptResult,
    ResourceContent,
    ResourceLinkContent,
    content_for_model,
)

log = logging.getLogger(__name__)


def map_result(result: types.CallToolResult) -> McpToolResult:
    """The one mapping of a tool result: content, structured content, isError."""
    return McpToolResult(
        content=tuple(map_content(item) for item in result.content),
        structured=result.structured_content,
        is_error=bool(result.is_error),
    )


def map_content(item: object) -> McpContent:
    match item:
        case types.TextContent(text=text):
            return TextPart(text)
        case types.ImageContent(data=data, mime_type=mime):
            return ImagePart(data, mime)
        case types.AudioContent(data=data, mime_type=mime):
            return AudioContent(data, mime)
        case types.EmbeddedResource(resource=types.TextResourceContents() as resource):
            return ResourceContent(str(resource.uri), resource.mime_type, text=resource.text)
        case types.EmbeddedResource(resource=types.BlobResourceContents() as resource):
            return ResourceContent(str(resource.uri), resource.mime_type, blob=resource.blob)
        case types.ResourceLink():
            return ResourceLinkContent(
                uri=str(item.uri),
                name=item.name,
                title=item.title,
                description=item.description,
                mime_type=item.mime_type,
                size=item.size,
            )
        case _:
            kind = getattr(item, "type", type(item).__name__)
            return TextPart(f"[{kind} content, not shown]")


def tool_infos(
    server: str, tools: list[types.Tool], *, trusted: bool = False
) -> tuple[tuple[McpToolInfo, ...], tuple[str, ...]]:
    """The tools to offer, with their annotations as claims (believed of a `trusted`
    server), and warnings for the ones skipped or repaired."""
    infos: list[McpToolInfo] = []
    warnings: list[str] = []
    seen: set[str] = set()
    for tool in tools:
        if tool.name in seen:
            warnings.append(f"tool {tool.name!r} skipped: listed twice")
            continue
        seen.add(tool.name)
        meta = tool.meta or {}
        schema, notes = repair_schema(meta.get(ORIGINAL_SCHEMA, tool.input_schema))
        if schema is None:
            warnings.append(f"tool {tool.name!r} skipped: {'; '.join(notes)}")
            continue
        if notes:
            warnings.append(f"tool {tool.name!r}: input schema repaired ({'; '.join(notes)})")
        hints = tool.annotations
        infos.append(
            McpToolInfo(
                server=server,
                name=tool.name,
                qualified_name=qualified_name(server, tool.name),
                title=tool.title or (hints.title if hints else None),
                description=tool.description or tool.title or tool.name,
                input_schema=schema,
                read_only=bool(hints and hints.read_only_hint),
                destructive=bool(hints and hints.destructive_hint),
                open_world=bool(hints and hints.open_world_hint),
                trusted=trusted,
            )
        )
    for warning in warnings:
        log.warning("MCP server %r: %s", server, warning)
    return tuple(infos), tuple(warnings)


def prompt_infos(server: str, prompts: list[types.Prompt]) -> tuple[McpPromptInfo, ...]:
    return tuple(
        McpPromptInfo(
            server=server,
            name=prompt.name,
            command=prompt_command(server, prompt.name),
            title=prompt.title,
            description=prompt.description,
            arguments=tuple(
                PromptArgument(arg.name, arg.description, bool(arg.required))
                for arg in prompt.arguments or ()
            ),
        )
        for prompt in prompts
    )


def prompt_result(result: types.GetPromptResult) -> PromptResult:
    return PromptResult(
        description=result.description,
        messages=tuple(
            Message(message.role, list(content_for_model([map_content(message.content)])))
            for message in result.messages
        ),
    )


def sampling_messages(messages: list[types.SamplingMessage]) -> tuple[Message, ...]:
    """A sampling request's messages; tool use and results in them are shown as text."""
    found: list[Message] = []
    for message in messages:
        items = message.content if isinstance(message.content, list) else [message.content]
        found.append(
            Message(message.role, list(content_for_model([map_content(i) for i in items])))
        )
    return tuple(found)
