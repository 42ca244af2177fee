"""Built-in tools: what the model may do, and how each call is shown and permitted."""

from typing import Any

from .base import (
    DEFAULT_SHELL_TIMEOUT,
    Delegation,
    Editor,
    SessionToolState,
    TerminalExit,
    TerminalOutput,
    Tool,
    ToolContext,
    ToolFailed,
    ToolOutcome,
    ToolParams,
    TurnCancelled,
)
from .permissions import (
    DEFAULT_MODE,
    MODES,
    Decision,
    ModeInfo,
    PermissionMemory,
    PermissionMode,
    PermissionQuestion,
    Verdict,
    decide,
    is_mode,
    tools_for_mode,
)


def builtin_tools(*, ask_user: bool = False) -> dict[str, Tool[Any]]:
    """Every built-in tool by name, in the order the model sees them. `ask_user`: the editor
    can put a form to the user (form elicitation), so the model may ask it questions."""
    # Imported here, not with the package: a session answers before its tools are built.
    from .agent import AgentTool
    from .ask_user import AskUser
    from .edit_file import EditFile
    from .jobs import JobKill, JobOutput
    from .plan import Plan
    from .read_file import ReadFile
    from .search import Search
    from .shell import Shell
    from .web_fetch import WebFetch
    from .write_file import WriteFile

    tools: list[Tool[Any]] = [
        ReadFile(),
        Search(),
        EditFile(),
        WriteFile(),
        Shell(),
        JobOutput(),
        JobKill(),
        Plan(),
        AgentTool(),
        WebFetch(),
    ]
    if ask_user:
        tools.append(AskUser())
    return {tool.name: tool for tool in tools}


__all__ = [
    "DEFAULT_MODE",
    "DEFAULT_SHELL_TIMEOUT",
    "MODES",
    "Decision",
    "Delegation",
    "Editor",
    "ModeInfo",
    "PermissionMemory",
    "PermissionMode",
    "PermissionQuestion",
    "SessionToolState",
    "TerminalExit",
    "TerminalOutput",
    "Tool",
    "ToolContext",
    "ToolFailed",
    "ToolOutcome",
    "ToolParams",
    "TurnCancelled",
    "Verdict",
    "builtin_tools",
    "decide",
    "is_mode",
    "tools_for_mode",
]
