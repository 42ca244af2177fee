"""When a tool call must ask the user first, and what the user's answers are remembered for.

Modes (the session's choice, listed to the client as session modes):

- `ask` (default): edits and commands ask; reads run;
- `accept-edits`: edits inside the session roots run; commands ask;
- `bypass`: nothing asks;
- `read-only`: tools with side effects are not offered at all; reads (and plan) run.

In every mode but `bypass`, a call that touches a path outside the session roots asks,
reads included. Paths are compared after `..` is folded and symlinks are resolved, so
neither escapes the roots unnoticed.

Answers of "always" are remembered per scope (`PermissionMemory`): for an edit inside the
roots the tool, for a call outside the roots the tool and the directory, for a shell
command each of its parts (see `_shell_scope`): a read-only program or subcommand (`cat`,
`git status`) with any arguments that stay inside the roots, any other program with exactly
the same words. A shell command that reaches outside the roots, writes through its
arguments, runs other commands, names a protected path (unless it only reads) or holds
anything bash's grammar says is more than simple commands has no scope: it asks every time
and offers no "always". A read-only git scope holds only while the repository's git config
names no program for git to run.
"Always reject" is remembered too and wins over every mode: the user's explicit no stands.

A tool that `always_asks` (an MCP tool that declares itself destructive), and a write to a
protected path (`protected`: `.git/`, `.agents/`, `.claude/`, `AGENTS.md`, `CLAUDE.md`, the
agent's own config and credentials), ask before every call in every mode but `bypass`, and
no "always" answer is offered or applies to them.

A call that sends a request to a host (`Tool.destination`: web_fetch) asks in every mode but
`bypass`, read-only included: it sends data out. "Always" covers the host. A host that is
this machine, a private network or a metadata service asks every time, with no "always",
and is refused in `read-only`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeAlias, TypeGuard, get_args

from ..messages import Location, ToolContent, ToolKind
from ._shell_scope import command_scopes, describe_scopes
from .base import Destination, Tool, ToolContext, ToolParams
from .protected import protected_reason

Decision: TypeAlias = Literal[
    "allow_once", "allow_always", "reject_once", "reject_always", "cancelled"
]
PermissionMode: TypeAlias = Literal["ask", "accept-edits", "bypass", "read-only"]
Verdict: TypeAlias = Literal["allow", "ask", "reject"]

DEFAULT_MODE: PermissionMode = "ask"
EDIT_KINDS: frozenset[ToolKind] = frozenset({"edit", "delete", "move"})


@dataclass(frozen=True, slots=True)
class ModeInfo:
    id: PermissionMode
    name: str
    description: str


MODES: tuple[ModeInfo, ...] = (
    ModeInfo("ask", "Ask", "Ask before every edit and command."),
    ModeInfo(
        "accept-edits",
        "Accept edits",
        "Edit files in the workspace without asking; ask before commands.",
    ),
    ModeInfo(
        "bypass",
        "Bypass permissions",
        "Run every edit and command without asking, outside the workspace too.",
    ),
    ModeInfo("read-only", "Read only", "Read and search only: no edits, no commands."),
)


def is_mode(value: str) -> TypeGuard[PermissionMode]:
    return value in get_args(PermissionMode)


@dataclass(frozen=True, slots=True)
class PermissionQuestion:
    tool_call_id: str
    title: str
    kind: ToolKind
    raw_input: dict[str, Any]
    always_scope: str | None = None
    """What an "always" answer covers, in words (`PermissionMemory.describe`); None when
    it cannot be remembered, so "always" options would mislead."""
    name: str | None = None
    """The tool's name as the model called it."""
    content: tuple[ToolContent, ...] = ()
    """What the call will do (`Tool.preview`: a diff, the command line), for the user to
    see before deciding."""
    locations: tuple[Location, ...] = ()


# --- the policy ----------------------------------------------------------------------------


def tools_for_mode(tools: Mapping[str, Tool[Any]], mode: PermissionMode) -> dict[str, Tool[Any]]:
    """The tools offered to the model in `mode`: `read-only` drops those with side effects."""
    if mode == "read-only":
        return {name: tool for name, tool in tools.items() if tool.read_only}
    return dict(tools)


def policy_asks(
    tool: Tool[Any], params: ToolParams, ctx: ToolContext, mode: PermissionMode
) -> bool:
    """Whether `mode` alone (no remembered answers) asks before this call."""
    if mode == "bypass":
        return False
    if tool.always_asks or writes_protected(tool, params, ctx):
        return True
    if tool.destination(params, ctx) is not None:
        return True  # the request carries data out, whatever the tool only reads
    if _outside_roots(tool, params, ctx):
        return True
    if tool.read_only:
        return False
    return not (mode == "accept-edits" and tool.kind in EDIT_KINDS)


def decide(
    tool: Tool[Any],
    params: ToolParams,
    ctx: ToolContext,
    mode: PermissionMode,
    memory: PermissionMemory,
) -> Verdict:
    """Run the call, ask the user first, or refuse it without asking."""
    if mode_refusal(tool, params, ctx, mode) is not None:
        return "reject"  # not offered in this mode (or not to that host); a call anyway is refused
    if memory.rejects(tool, params, ctx):
        return "reject"
    if not policy_asks(tool, params, ctx, mode) or memory.allows(tool, params, ctx):
        return "allow"
    return "ask"


def mode_refusal(
    tool: Tool[Any], params: ToolParams, ctx: ToolContext, mode: PermissionMode
) -> str | None:
    """Why `mode` refuses this call without asking, for the model; None when it does not."""
    if mode != "read-only":
        return None
    if not tool.read_only:
        return f"Not run: {tool.name} changes things, and the session is in read-only mode."
    local = _local_destination(tool, params, ctx)
    if local is not None:
        return (
            f"Not run: {local.host} is {local.local}, and the session is in read-only mode, "
            "where nothing is fetched from this machine or a private network."
        )
    return None


def _local_destination(tool: Tool[Any], params: ToolParams, ctx: ToolContext) -> Destination | None:
    destination = tool.destination(params, ctx)
    return destination if destination is not None and destination.local is not None else None


def writes_protected(tool: Tool[Any], params: ToolParams, ctx: ToolContext) -> bool:
    """Whether the call changes a protected path (`protected`): it asks every time."""
    if tool.read_only:
        return False
    return any(protected_reason(path, ctx) for path in tool.paths(params, ctx))


def _outside_roots(tool: Tool[Any], params: ToolParams, ctx: ToolContext) -> bool:
    return any(
        not ctx.inside_roots(path) and not (tool.read_only and ctx.readable_unasked(path))
        for path in tool.paths(params, ctx)
    )


# --- remembered answers --------------------------------------------------------------------


@dataclass
class PermissionMemory:
    """The scopes the user answered "always allow" or "always reject" for, in one session.

    Plain sets of strings, so a session store can keep them as they are.
    """

    allowed: set[str] = field(default_factory=set)
    rejected: set[str] = field(default_factory=set)

    def scopes_for(self, tool: Tool[Any], params: ToolParams, ctx: ToolContext) -> tuple[str, ...]:
        """What an "always" answer to this call covers; () when it cannot be remembered
        (a tool that `always_asks`, a write to a protected path, a request to this machine
        or a private network: no "always" is offered, and none applies)."""
        if writes_protected(tool, params, ctx) or _local_destination(tool, params, ctx):
            return ()
        return self._scopes(tool, params, ctx)

    def _scopes(self, tool: Tool[Any], params: ToolParams, ctx: ToolContext) -> tuple[str, ...]:
        if tool.always_asks:
            return ()
        destination = tool.destination(params, ctx)
        if destination is not None:
            return (f"tool:{tool.name}:{destination.host}",)
        command = tool.command(params)
        if command is not None:
            return command_scopes(command, ctx, _command_cwd(params))
        outside = [p for p in tool.paths(params, ctx) if not ctx.inside_roots(p)]
        if not outside:
            return (f"tool:{tool.name}",)
        try:
            return tuple(sorted({f"tool:{tool.name}:{_directory(p)}" for p in outside}))
        except (OSError, RuntimeError):  # a symlink loop: no directory to name
            return ()

    def allows(self, tool: Tool[Any], params: ToolParams, ctx: ToolContext) -> bool:
        scopes = self.scopes_for(tool, params, ctx)
        return bool(scopes) and all(scope in self.allowed for scope in scopes)

    def rejects(self, tool: Tool[Any], params: ToolParams, ctx: ToolContext) -> bool:
        scopes = self._scopes(tool, params, ctx)  # the user's "never" holds for protected paths too
        if not scopes:
            return False
        return _joined(scopes) in self.rejected or any(s in self.rejected for s in scopes)

    def remember(
        self, decision: Decision, tool: Tool[Any], params: ToolParams, ctx: ToolContext
    ) -> None:
        """Keep an "always" answer; other answers leave the memory as it is.

        Rejecting a compound command always rejects that combination, not each of its
        parts: `git status && rm x` rejected must not reject `git status` alone.
        """
        scopes = self.scopes_for(tool, params, ctx)
        if not scopes:
            return
        if decision == "allow_always":
            self.allowed.update(scopes)
            self.rejected.difference_update(scopes)
            self.rejected.discard(_joined(scopes))
        elif decision == "reject_always":
            self.rejected.add(_joined(scopes))

    def describe(self, tool: Tool[Any], params: ToolParams, ctx: ToolContext) -> str | None:
        """Words for an "Always allow …" option, or None when the answer cannot be kept."""
        scopes = self.scopes_for(tool, params, ctx)
        if not scopes:
            return None
        if tool.command(params) is not None:
            return describe_scopes(scopes)
        if (destination := tool.destination(params, ctx)) is not None:
            return f"{tool.name} from {destination.host}"
        return ", ".join(_describe_tool_scope(scope) for scope in scopes)

    def to_json(self) -> dict[str, list[str]]:
        return {"allowed": sorted(self.allowed), "rejected": sorted(self.rejected)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PermissionMemory:
        return cls(
            allowed={str(s) for s in data.get("allowed", ())},
            rejected={str(s) for s in data.get("rejected", ())},
        )


def _directory(path: Path) -> str:
    real = path.resolve()
    return str(real if real.is_dir() else real.parent)


def _joined(scopes: tuple[str, ...]) -> str:
    return " && ".join(scopes)


def _command_cwd(params: ToolParams) -> str | None:
    """Where a command's relative paths start: the shell tool's `cwd`; None: the session's."""
    cwd = getattr(params, "cwd", None)
    return cwd if isinstance(cwd, str) else None


def _describe_tool_scope(scope: str) -> str:
    name, _, directory = scope.removeprefix("tool:").partition(":")
    return f"{name} in {directory}" if directory else name


__all__ = [
    "DEFAULT_MODE",
    "MODES",
    "Decision",
    "ModeInfo",
    "PermissionMemory",
    "PermissionMode",
    "PermissionQuestion",
    "Verdict",
    "decide",
    "is_mode",
    "mode_refusal",
    "policy_asks",
    "tools_for_mode",
    "writes_protected",
]
