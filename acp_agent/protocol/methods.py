"""The agent-side methods: the interface the agent implements, and the method table.

The server is handed an `AcpAgent` by the composition root (`cli.py`); it never imports
the agent. The table maps each wire name to the reader of its params (plain for a
session's life, the schema model by name for the rest: see `requests`) and to the call
that serves it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from . import providers, requests, session_meta, v2_cancel
from .requests import ModelReader, OneSession, Prompt, Reader, SessionSetup
from .v2_cancel import Piece

if TYPE_CHECKING:
    from . import schema as s
    from .legacy import SetSessionModelRequest
    from .providers import DisableProvider, ListProviders, SetProvider
    from .session_meta import AuthStatus, ListSessions, SetTitle

Answer = Any
"""What a request answers: a JSON value, or `rpc.FollowedBy` one."""


class PromptPlace(Protocol):
    """A prompt's place in its session's queue (opaque here). Whoever holds it releases
    it once the prompt has ended or failed, however it ends: every later prompt of its
    session waits for that."""

    def release(self) -> None: ...


class AcpAgent(Protocol):
    def queue_prompt(self, session_id: Any) -> PromptPlace | None:
        """Called as a prompt's frame is read, before later frames: its place in the queue."""
        ...

    async def logout(self, request: s.LogoutRequest) -> Answer: ...
    async def new_session(self, request: SessionSetup) -> Answer: ...
    async def load_session(self, request: SessionSetup) -> Answer: ...
    async def list_sessions(self, request: ListSessions) -> Answer: ...
    async def resume_session(self, request: SessionSetup) -> Answer: ...
    async def fork_session(self, request: SessionSetup) -> Answer: ...
    async def close_session(self, request: s.CloseSessionRequest) -> Answer: ...
    async def delete_session(self, request: s.DeleteSessionRequest) -> Answer: ...
    async def set_mode(self, request: s.SetSessionModeRequest) -> Answer: ...
    async def set_config_option(self, request: s.SetSessionConfigOptionSelectRequest) -> Answer: ...
    async def set_model(self, request: SetSessionModelRequest) -> Answer: ...
    async def prompt(
        self,
        request: Prompt,
        place: PromptPlace | None,
        inserted: Callable[[str], Awaitable[None]] | None = None,
    ) -> Answer:
        """`inserted`: awaited with the user message's id as it joins the history."""
        ...

    async def cancel(self, notification: OneSession) -> None: ...
    async def cancel_piece(self, session_id: str, piece: Piece, piece_id: str) -> bool:
        """Cancel one running tool call or terminal of the session, not its turn; False:
        nothing of the session runs under that id."""
        ...

    async def list_providers(self, request: ListProviders) -> Answer: ...
    async def set_provider(self, request: SetProvider) -> Answer: ...
    async def disable_provider(self, request: DisableProvider) -> Answer: ...
    async def set_title(self, request: SetTitle) -> Answer: ...
    async def archive_session(self, request: OneSession) -> Answer: ...
    async def unarchive_session(self, request: OneSession) -> Answer: ...
    async def session_status(self, request: OneSession) -> Answer: ...
    async def auth_status(self, request: AuthStatus) -> Answer: ...
    async def settled(self) -> None:
        """Returns once nothing a prompt would wait for runs in the background (MCP servers
        connecting): the server's own background work (the schema models) waits for it."""
        ...

    async def auth_changed(self) -> None:
        """After a login: tell the client its auth status, if it differs from the last told."""
        ...

    def cancel_all(self) -> None:
        """The client is gone: end every turn (each prompt still answers `cancelled`)."""
        ...

    async def aclose(self) -> None:
        """Release what is held open (sessions, providers' HTTP clients)."""
        ...


@dataclass(frozen=True, slots=True)
class Method:
    name: str
    read: Reader
    call: Callable[[AcpAgent, Any], Awaitable[Any]]


HANDSHAKE = frozenset({"initialize", "authenticate"})
"""Answered by the server from the handshake (`handshake.py`), before the agent exists."""

REQUESTS = {
    m.name: m
    for m in (
        Method("logout", ModelReader("LogoutRequest"), lambda a, r: a.logout(r)),
        Method("session/new", requests.new_session, lambda a, r: a.new_session(r)),
        Method("session/load", requests.load_session, lambda a, r: a.load_session(r)),
        Method("session/list", session_meta.list_sessions, lambda a, r: a.list_sessions(r)),
        Method("session/resume", requests.existing_session, lambda a, r: a.resume_session(r)),
        Method("session/fork", session_meta.fork_session, lambda a, r: a.fork_session(r)),
        Method(
            "session/close", ModelReader("CloseSessionRequest"), lambda a, r: a.close_session(r)
        ),
        Method(
            "session/delete", ModelReader("DeleteSessionRequest"), lambda a, r: a.delete_session(r)
        ),
        Method("session/prompt", requests.prompt, lambda a, r: a.prompt(r, None)),
        Method(
            "session/set_config_option",
            ModelReader("SetSessionConfigOptionSelectRequest"),
            lambda a, r: a.set_config_option(r),
        ),
        Method(
            "session/set_mode", ModelReader("SetSessionModeRequest"), lambda a, r: a.set_mode(r)
        ),
        # Unstable: the editor routes our LLM traffic (this process only).
        Method("providers/list", providers.list_providers, lambda a, r: a.list_providers(r)),
        Method("providers/set", providers.set_provider, lambda a, r: a.set_provider(r)),
        Method("providers/disable", providers.disable_provider, lambda a, r: a.disable_provider(r)),
        # Unstable (`session_meta`): titles, archives and status of sessions, auth status.
        Method("session/set_title", session_meta.set_title, lambda a, r: a.set_title(r)),
        Method("session/archive", requests.one_session, lambda a, r: a.archive_session(r)),
        Method("session/unarchive", requests.one_session, lambda a, r: a.unarchive_session(r)),
        Method("session/status", requests.one_session, lambda a, r: a.session_status(r)),
        Method("auth/status", session_meta.auth_status, lambda a, r: a.auth_status(r)),
        # Legacy (older v1 clients); its model is not in acp.schema.
        Method(
            "session/set_model", ModelReader("SetSessionModelRequest"), lambda a, r: a.set_model(r)
        ),
    )
}

V1_ONLY = frozenset({"logout", "session/load", "session/set_mode", "session/set_model"})
"""Gone in v2: `logout` is `auth/logout`, `session/load` is `session/resume` with a replay,
modes are the `mode` config option, models the `model` one."""

REQUESTS_V2 = {
    **{name: method for name, method in REQUESTS.items() if name not in V1_ONLY},
    "auth/logout": Method("auth/logout", ModelReader("LogoutRequest"), lambda a, r: a.logout(r)),
    "session/new": Method(
        "session/new", requests.new_session_servers_optional, lambda a, r: a.new_session(r)
    ),
    # One piece of a session's work, not its turn (advertised on each piece).
    "tool_call/cancel": Method(
        "tool_call/cancel", v2_cancel.cancel_tool_call, v2_cancel.cancel_piece
    ),
    "terminal/cancel": Method("terminal/cancel", v2_cancel.cancel_terminal, v2_cancel.cancel_piece),
}
"""v2's table; `auth/login` is the server's, as `authenticate` (see `HANDSHAKE`)."""

NOTIFICATIONS = {
    m.name: m for m in (Method("session/cancel", requests.one_session, lambda a, n: a.cancel(n)),)
}
