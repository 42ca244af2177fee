"""What a session needs from the editor's side: defined here, implemented by `protocol/`.

Sessions talk to the editor only through these interfaces, so this room knows no wire
format, and `protocol/` implements them without importing this room (structural typing).
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Protocol

from ..mcp_bridge import EditorMcp
from ..messages import Elicitation, ElicitationAnswer, TurnEvent
from ..tools import Decision, Editor, PermissionQuestion


class SessionChannel(Protocol):
    """One session's updates to the editor, and its questions to the user."""

    async def emit(self, event: TurnEvent) -> None: ...

    async def ask_permission(self, question: PermissionQuestion) -> Decision: ...

    async def elicit(self, elicitation: Elicitation) -> ElicitationAnswer:
        """Put a question to the user (only in a mode of `EditorLink.elicitation_modes`)."""
        ...

    def streaming(self) -> AbstractAsyncContextManager[None]:
        """Brackets a turn: within it, streamed text may be gathered into fewer updates;
        everything emitted is sent by the time it exits."""
        ...


class EditorLink(Protocol):
    """The connection to the editor, per session."""

    def channel(self, session_id: str) -> SessionChannel: ...

    def editor(self, session_id: str) -> Editor:
        """Files and terminals, through the editor when it offers them."""
        ...

    @property
    def elicitation_modes(self) -> frozenset[str]:
        """The kinds of question ("form", "url") the editor can put to the user."""
        ...

    @property
    def shows_terminal_stream(self) -> bool:
        """The editor renders a local command's live output (Zed's terminal `_meta`)."""
        ...

    @property
    def shows_subagents(self) -> bool:
        """The editor shows child sessions of their own (ACP `subagents`)."""
        ...

    @property
    def shows_notices(self) -> bool:
        """The editor shows `Notice`s apart from the reply (ACP `session.notices`)."""
        ...

    @property
    def editor_mcp(self) -> EditorMcp:
        """The MCP servers that live in the editor (`acp` entries of `mcpServers`)."""
        ...
