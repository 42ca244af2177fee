"""Built-in tools: what the model may do, and how each call is shown and permitted."""

from .base import Editor, Tool, ToolContext, ToolFailed, ToolOutcome, ToolParams
from .permissions import Decision, PermissionQuestion, needs_permission
from .read_file import ReadFile


def builtin_tools() -> dict[str, Tool]:  # type: ignore[type-arg]
    tools: list[Tool] = [ReadFile()]  # type: ignore[type-arg]
    return {tool.name: tool for tool in tools}


__all__ = [
    "Decision",
    "Editor",
    "PermissionQuestion",
    "Tool",
    "ToolContext",
    "ToolFailed",
    "ToolOutcome",
    "ToolParams",
    "builtin_tools",
    "needs_permission",
]
