"""What a tool is, what it may use, and what it returns.

A tool reads the session's cwd, roots and editor from its `ToolContext`, never from globals.
Failures the model can act on (a missing file, bad arguments) raise `ToolFailed` and become
an error result; cancellation and refusals propagate.
"""

from __future__ import annotations

import os.path
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict

from ..messages import Location, TextPart, ToolContent, ToolKind, ToolSpec


class ToolFailed(Exception):
    """The tool could not do what was asked; the message goes to the model and the user."""


class Editor(Protocol):
    """The editor's side of files and terminals, as far as the client advertised it."""

    @property
    def can_read_files(self) -> bool: ...

    @property
    def can_write_files(self) -> bool: ...

    async def read_text_file(self, path: str, line: int | None, limit: int | None) -> str: ...

    async def write_text_file(self, path: str, content: str) -> None: ...


@dataclass(frozen=True, slots=True)
class ToolContext:
    session_id: str
    cwd: Path
    roots: tuple[Path, ...]
    editor: Editor

    def resolve(self, path: str) -> Path:
        """An absolute, normalised path; relative paths are taken from the session cwd."""
        candidate = Path(path).expanduser()
        if not candidate.is_absolute():
            candidate = self.cwd / candidate
        return Path(os.path.normpath(candidate))

    def inside_roots(self, path: Path) -> bool:
        """True when `path` (symlinks resolved) lies under one of the session roots."""
        real = path.resolve()
        return any(real.is_relative_to(root.resolve()) for root in self.roots)


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    model_text: str
    """What the model reads as the tool result."""
    display: tuple[ToolContent, ...] = ()
    """What the user sees in the tool call (diffs, terminals, text)."""
    locations: tuple[Location, ...] = ()
    title: str | None = None


class ToolParams(BaseModel):
    model_config = ConfigDict(extra="forbid")


P = TypeVar("P", bound=ToolParams)


@dataclass(frozen=True)
class Tool(Generic[P]):
    """Subclasses set the class attributes and implement `run`."""

    name: ClassVar[str]
    kind: ClassVar[ToolKind]
    description: ClassVar[str]
    params_model: ClassVar[type[ToolParams]]
    read_only: ClassVar[bool] = True

    def spec(self) -> ToolSpec:
        schema = self.params_model.model_json_schema()
        schema.pop("title", None)
        return ToolSpec(name=self.name, description=self.description, parameters=schema)

    def title(self, params: P, ctx: ToolContext) -> str:
        return self.name

    def locations(self, params: P, ctx: ToolContext) -> tuple[Location, ...]:
        return ()

    def paths(self, params: P, ctx: ToolContext) -> tuple[Path, ...]:
        """Paths the call touches, for the permission policy."""
        return ()

    async def run(self, params: P, ctx: ToolContext) -> ToolOutcome:
        raise NotImplementedError


def text_outcome(text: str, **kwargs: Any) -> ToolOutcome:
    return ToolOutcome(model_text=text, display=(TextPart(text),), **kwargs)


__all__ = ["Editor", "Tool", "ToolContext", "ToolFailed", "ToolOutcome", "ToolParams", "text_outcome"]
