"""When a tool call must ask the user first, and what the user can answer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from ..messages import ToolKind
from .base import Tool, ToolContext, ToolParams

Decision: TypeAlias = Literal[
    "allow_once", "allow_always", "reject_once", "reject_always", "cancelled"
]


@dataclass(frozen=True, slots=True)
class PermissionQuestion:
    tool_call_id: str
    title: str
    kind: ToolKind
    raw_input: dict[str, Any]


def needs_permission(tool: Tool[Any], params: ToolParams, ctx: ToolContext) -> bool:
    """Side effects always ask; reads ask only outside the session roots."""
    if not tool.read_only:
        return True
    return not all(ctx.inside_roots(path) for path in tool.paths(params, ctx))
