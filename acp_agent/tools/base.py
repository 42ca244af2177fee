"""What a tool is, what it may use, and what it returns.

A tool reads the session's cwd, roots and editor from its `ToolContext`, never from globals.
Failures the model can act on (a missing file, bad arguments) raise `ToolFailed` and become
an error result; cancellation and refusals propagate.
"""

from __future__ import annotations

import functools
import os.path
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from anyio.abc import TaskGroup
from pydantic import BaseModel, ConfigDict, model_validator

from ..messages import (
    Elicitation,
    ElicitationAnswer,
    ImagePart,
    Location,
    PlanEntry,
    TextPart,
    ToolContent,
    ToolKind,
    ToolSpec,
    TurnEvent,
)
from ._job_table import JobTable
from ._text import display_path
from ._work import SessionWork


class ToolFailed(Exception):
    """The tool could not do what was asked; the message goes to the model and the user."""


class TurnCancelled(Exception):
    """The user stopped the turn from within the tool (dismissed its question): the turn
    ends `cancelled`, as after a cancelled permission request; the message is shown."""


@dataclass(frozen=True, slots=True)
class TerminalExit:
    exit_code: int | None
    signal: str | None


@dataclass(frozen=True, slots=True)
class TerminalOutput:
    output: str
    truncated: bool
    exit: TerminalExit | None
    """Set once the command has ended."""


class Editor(Protocol):
    """The editor's side of files and terminals, as far as the client advertised it.

    Calling a method whose capability is false raises; client errors raise `ToolFailed`.
    """

    @property
    def can_read_files(self) -> bool: ...

    @property
    def can_write_files(self) -> bool: ...

    @property
    def can_run_terminals(self) -> bool: ...

    async def read_text_file(self, path: str, line: int | None, limit: int | None) -> str: ...

    async def write_text_file(self, path: str, content: str) -> None: ...

    async def create_terminal(
        self,
        command: str,
        args: Sequence[str],
        cwd: str,
        env: Mapping[str, str],
        output_byte_limit: int,
    ) -> str:
        """Start a command in an editor terminal; returns the terminal id."""
        ...

    async def terminal_output(self, terminal_id: str) -> TerminalOutput: ...

    async def wait_for_terminal_exit(self, terminal_id: str) -> TerminalExit: ...

    async def kill_terminal(self, terminal_id: str) -> None: ...

    async def release_terminal(self, terminal_id: str) -> None: ...


@dataclass
class SessionToolState:
    """What tools remember across the turns of one session."""

    plan: list[PlanEntry] = field(default_factory=list)
    plan_markdown: str | None = None
    """The plan when the model wrote it as one Markdown document (then `plan` is empty)."""
    jobs: JobTable = field(default_factory=JobTable)
    """Background commands (`shell` with `background`); killed when the session ends."""
    work: SessionWork = field(default_factory=SessionWork)
    """What runs now that the user may stop on its own: tool calls, commands' terminals."""
    local_hosts: dict[str, str] = field(default_factory=dict)
    """Host names web_fetch found resolving to this machine or a private network, with why:
    the permission policy asks before each fetch from them from then on."""


async def _discard(event: TurnEvent) -> None:
    pass


DEFAULT_SHELL_TIMEOUT = 120.0
"""Seconds a shell command may run when neither the model nor the config says otherwise."""


@dataclass(frozen=True, slots=True)
class ToolContext:
    session_id: str
    cwd: Path
    roots: tuple[Path, ...]
    editor: Editor
    state: SessionToolState = field(default_factory=SessionToolState)
    tool_call_id: str = ""
    """Set per call by the engine."""
    emit: Callable[[TurnEvent], Awaitable[None]] = _discard
    """Reports progress (tool call updates, plan changes) while the tool runs."""
    shell_timeout: float = DEFAULT_SHELL_TIMEOUT
    """Default limit for a shell command, in seconds (the config may set it)."""
    client_shows_terminal_stream: bool = False
    """The client renders `TerminalStream` updates as a terminal (Zed's `_meta.terminal_output`
    extension): local command output is then shown there rather than as text."""
    background: TaskGroup | None = None
    """The connection's task group: cleanup that must outlive a cancelled turn runs here."""
    report: Callable[[TurnEvent], Awaitable[None]] = _discard
    """Reports what happens after the turn (a background job's end) to the editor; not
    recorded in the session's log, unlike `emit`."""
    child_env: Mapping[str, str] | None = None
    """What local commands start from: `child_environment` of the agent's environment and
    config (the agent sets it per turn); None: of ours when the command starts, under the
    default policy."""
    ask_user: Callable[[Elicitation], Awaitable[ElicitationAnswer]] | None = None
    """Puts a form to the user through the editor (`elicitation/create`); None when the
    client advertised no form elicitation."""
    protected_files: tuple[Path, ...] = ()
    """The agent's own config file and its config directory (credentials): writing there
    always asks (`protected`)."""
    delegate: Callable[[Delegation, ToolContext], Awaitable[ToolOutcome]] | None = None
    """Runs a task in a subagent: a child session of this one (the sessions room provides
    it); None where delegating is not allowed (a subagent itself, by default)."""
    readable_elsewhere: tuple[Path, ...] = ()
    """Folders outside the roots that read-only tools read without asking: the session's
    Agent Skills, whose `SKILL.md` (and what it points to) the model reads before using one."""

    def resolve(self, path: str) -> Path:
        """An absolute, normalised path; relative paths are taken from the session cwd."""
        candidate = Path(path).expanduser()
        if not candidate.is_absolute():
            candidate = self.cwd / candidate
        return Path(os.path.normpath(candidate))

    def inside_roots(self, path: Path) -> bool:
        """True when `path` (symlinks resolved) lies under one of the session roots; a path
        that cannot be resolved (a symlink loop) counts as outside."""
        return _under(path, self.roots)

    def readable_unasked(self, path: Path) -> bool:
        """True when `path` (symlinks resolved) lies in one of `readable_elsewhere`."""
        return _under(path, self.readable_elsewhere)


def _under(path: Path, folders: Sequence[Path]) -> bool:
    if not folders:
        return False
    try:
        real = path.resolve()
    except (OSError, RuntimeError):
        return False
    return any(real.is_relative_to(folder.resolve()) for folder in folders)


@dataclass(frozen=True, slots=True)
class Destination:
    """The host a call sends a request to, as the permission policy judges it."""

    host: str
    local: str | None = None
    """Why the host is this machine, a private network or a metadata service, in words
    ("a loopback address (this machine)"); None: a public host."""


@dataclass(frozen=True, slots=True)
class Delegation:
    """A task for a subagent, as the `agent` tool was asked."""

    prompt: str
    description: str
    model: str | None = None
    """'provider/model'; None: the configured subagent model, else the parent's."""
    tools: tuple[str, ...] | None = None
    """A subset of the parent's tools by name; None: all of them."""


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    model_text: str
    """What the model reads as the tool result."""
    display: tuple[ToolContent, ...] = ()
    """What the user sees in the tool call (diffs, terminals, text)."""
    locations: tuple[Location, ...] = ()
    title: str | None = None
    model_parts: tuple[TextPart | ImagePart, ...] = ()
    """What the model reads instead of `model_text` when text is not enough (images);
    empty: `model_text`."""
    raw_output: dict[str, Any] | None = None
    """A small structured summary for the client (path and lines read, exit code ...), not
    the whole output."""
    failed: bool = False
    """The call ran but did not succeed (a command that exited non-zero): the user sees it
    failed, while the model reads `model_text` as a normal result."""


class ToolParams(BaseModel):
    # Validators and schemas are built at first use, not at import: a session answers
    # before any tool runs, and ask_user's is built only where the editor offers forms.
    model_config = ConfigDict(extra="forbid", defer_build=True)

    refuses_nul: ClassVar[bool] = True
    """Paths and commands cannot hold a NUL byte (the OS raises deep inside a tool) and the
    built-in tools handle text: an argument with one is refused, by name, before any use."""

    @model_validator(mode="before")
    @classmethod
    def _no_nul_byte(cls, data: Any) -> Any:
        if cls.refuses_nul and (where := _nul_at(data, "")) is not None:
            raise ValueError(f"{where or 'an argument'} contains a NUL byte (\\x00)")
        return data


def _nul_at(value: Any, where: str) -> str | None:
    """The dotted path of the first string in `value` holding a NUL, or None."""
    if isinstance(value, str):
        return where if "\0" in value else None
    if isinstance(value, Mapping):
        items: Any = value.items()
    elif isinstance(value, (list, tuple)):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        found = _nul_at(item, f"{where}.{key}" if where else str(key))
        if found is not None:
            return found
    return None


P = TypeVar("P", bound=ToolParams)


class _ToolAttributes:
    """What every tool has. Declared outside the `Tool` dataclass so they are not its fields:
    a built-in tool sets them as class attributes, a tool made at run time (an MCP server's)
    as fields of its own dataclass."""

    name: str
    kind: ToolKind
    description: str
    params_model: type[ToolParams]
    read_only: bool = True
    always_asks: bool = False
    """Ask before every call in every mode but `bypass`, and never offer "always" (an MCP
    tool that declares itself destructive)."""
    concurrent: bool = False
    """Calls of it in one reply run at the same time (subagents), up to the turn's limit."""


@dataclass(frozen=True)
class Tool(_ToolAttributes, Generic[P]):
    """Subclasses set the attributes (class or instance) and implement `run`; a subclass
    that sets no `description` is described to the model by its docstring."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # The docstring is what the model reads, so a built-in tool says it once; a tool
        # that declares `description` (a value, or a field of its own dataclass) keeps it.
        own = vars(cls)
        declared = "description" in own or "description" in own.get("__annotations__", {})
        if not declared and cls.__doc__:
            cls.description = " ".join(cls.__doc__.split())

    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name,
            description=self.description,
            parameters=_parameters_schema(self.params_model),
        )

    def title(self, params: P, ctx: ToolContext) -> str:
        return self.name

    def locations(self, params: P, ctx: ToolContext) -> tuple[Location, ...]:
        return ()

    def paths(self, params: P, ctx: ToolContext) -> tuple[Path, ...]:
        """Paths the call touches, for the permission policy."""
        return ()

    def command(self, params: P) -> str | None:
        """The shell command the call runs, for the permission policy's memory."""
        return None

    def destination(self, params: P, ctx: ToolContext) -> Destination | None:
        """The host the call sends a request to (web_fetch), for the permission policy."""
        return None

    async def preview(self, params: P, ctx: ToolContext) -> tuple[ToolContent, ...]:
        """What the call will do, shown before it runs (and in the permission request): the
        diff an edit would apply, the command line. Changes nothing, and is asked only for
        calls whose `paths` lie inside the session roots. The engine shows nothing when
        this fails; `run` then reports the failure."""
        return ()

    async def run(self, params: P, ctx: ToolContext) -> ToolOutcome:
        raise NotImplementedError


class _NamesAPath(Protocol):
    path: str


class OneFile:
    """Mixed into a tool whose call works on the one file its `path` argument names: the
    editor is pointed at that file, and the permission policy judges it."""

    def locations(self, params: _NamesAPath, ctx: ToolContext) -> tuple[Location, ...]:
        return (Location(str(ctx.resolve(params.path))),)

    def paths(self, params: _NamesAPath, ctx: ToolContext) -> tuple[Path, ...]:
        return (ctx.resolve(params.path),)


class ChangesOneFile(OneFile):
    """Mixed into a tool that changes the one file its `path` names: an edit (asked about
    in the modes that ask before edits), titled with what it does to the file."""

    kind: ToolKind = "edit"
    read_only: bool = False
    verb: ClassVar[str]
    """The title's first word: "Edit", "Write"."""

    def title(self, params: _NamesAPath, ctx: ToolContext) -> str:
        return f"{self.verb} {display_path(ctx.resolve(params.path), ctx.cwd)}"


@functools.cache
def _parameters_schema(params_model: type[ToolParams]) -> dict[str, Any]:
    """The JSON schema of a tool's arguments, built once per model (every model request
    carries it)."""
    schema = params_model.model_json_schema()
    schema.pop("title", None)
    # Some OpenAI-compatible servers reject `$ref`; nested models are small, so inline.
    definitions = schema.pop("$defs", {})
    inlined: dict[str, Any] = _inline_refs(schema, definitions)
    return inlined


def _inline_refs(node: Any, definitions: Mapping[str, Any]) -> Any:
    """`node` with every local `$ref` replaced by the definition it names."""
    if isinstance(node, list):
        return [_inline_refs(item, definitions) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        target = dict(definitions[ref.removeprefix("#/$defs/")])
        target.pop("title", None)
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        return _inline_refs({**target, **siblings}, definitions)
    return {key: _inline_refs(value, definitions) for key, value in node.items()}
