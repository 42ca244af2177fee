"""The ACP methods: translate each request into the sessions room's terms and shape the
answer. No session state lives here.

Requests arrive read (plain for a session's life, schema models for the rest: see
`protocol.requests`); answers go back as JSON, built by hand where an editor waits on
them first (`session/new`, prompts). Failures of the rooms below become JSON-RPC errors
with a readable message here.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio.to_thread

from .config import AgentConfig
from .credentials import CredentialsError
from .protocol import options, session_meta
from .protocol import schema as s
from .protocol.client import ClientProxy
from .protocol.providers import DisableProvider, ListProviders, SetProvider
from .protocol.requests import OneSession, Prompt, SessionSetup
from .protocol.schema import dump
from .protocol.session_meta import AuthStatus, ListSessions, SetTitle
from .protocol.v2_cancel import Piece
from .provider_routes import ProviderRoutes, RouteError
from .providers import AuthError, ProviderError
from .rpc.endpoint import FollowedBy
from .rpc.errors import AUTH_REQUIRED, INTERNAL_ERROR, INVALID_PARAMS, RESOURCE_NOT_FOUND, RpcError
from .sessions import Session
from .sessions.choices import moved_model_notice
from .sessions.errors import SessionLocked, StoreError
from .sessions.manager import (
    MODE,
    MODEL,
    ChoiceError,
    SessionManager,
    UnknownSession,
    Where,
)
from .sessions.session import QueuePlace
from .tools.permissions import MODES

if TYPE_CHECKING:
    from .protocol.legacy import SetSessionModelRequest
    from .protocol.methods import PromptPlace
    from .sessions.turns import Inserted

log = logging.getLogger(__name__)


OpenStored = Callable[..., Awaitable[Session]]
"""`SessionManager.load`, `resume` or `fork`."""
Logout = Callable[[], Awaitable[Sequence[str]]]
"""Forgets the stored keys (and the providers made with them); returns the providers whose
keys were forgotten."""


class Agent:
    """Implements `protocol.methods.AcpAgent`."""

    def __init__(
        self,
        config: AgentConfig,
        sessions: SessionManager,
        client: ClientProxy,
        *,
        logout: Logout | None = None,
    ) -> None:
        self._config = config
        self._sessions = sessions
        self._client = client
        self._logout = logout
        self._routes = ProviderRoutes(config, sessions.providers)
        self._auth_told: dict[str, Any] | None = None
        """The auth status last sent (`auth/status_update`) on this connection."""

    # --- connection ----------------------------------------------------------------------

    # `authenticate` is the server's: answered from the handshake (`protocol.handshake`).

    async def logout(self, request: s.LogoutRequest) -> Any:
        try:
            forgotten = await self._logout() if self._logout is not None else ()
        except CredentialsError as exc:
            raise RpcError(INTERNAL_ERROR, f"logout: {exc}", {"details": str(exc)}) from None
        if forgotten:
            log.info("logout: forgot the stored keys of %s", ", ".join(forgotten))
        else:
            log.info("logout: no stored keys (keys from the environment or config stay)")
        return FollowedBy(dump(s.LogoutResponse()), self.auth_changed)

    async def auth_status(self, request: AuthStatus) -> Any:
        return self._auth_status()

    async def auth_changed(self) -> None:
        status = self._auth_status()
        if status != self._auth_told:
            self._auth_told = status
            await self._client.send_auth_status(status)

    def _auth_status(self) -> dict[str, Any]:
        """The default model's provider decides; every provider with a key is listed."""
        pool = self._sessions.providers
        default = self._config.default_choice.split("/", 1)[0]
        keys = {name: pool.key_state(name) for name in self._config.providers}
        keyed = [(name, name == default) for name, state in keys.items() if state == "key"]
        return session_meta.auth_answer(keys.get(default, "unknown"), keyed)

    def cancel_all(self) -> None:
        self._sessions.cancel_all()

    async def settled(self) -> None:
        await self._sessions.settled()

    # --- providers (unstable: the editor routes our LLM traffic, this process only) ------

    async def list_providers(self, request: ListProviders) -> Any:
        return {"providers": self._routes.listing()}

    async def set_provider(self, request: SetProvider) -> Any:
        try:
            await self._routes.set(request)
        except RouteError as exc:
            raise RpcError(INVALID_PARAMS, f"providers/set: {exc}") from None
        # Never the headers: they may carry the editor's secrets.
        log.info(
            "providers/set: %s now sends to %s (%s), with the editor's headers",
            request.provider_id,
            request.base_url,
            request.api_type,
        )
        why = f"the editor set provider {request.provider_id} up anew"
        for session in self._sessions.live_sessions():
            if not self._routes.offers(session.model_choice):  # a re-added provider's list
                await self._move_to_default(session, why)
            await self._announce_options(session)  # back in the picker, or now "routed"
        return {}

    async def disable_provider(self, request: DisableProvider) -> Any:
        try:
            changed = self._routes.disable(request.provider_id)
        except RouteError as exc:
            raise RpcError(INVALID_PARAMS, f"providers/disable: {exc}") from None
        if not changed:
            return {}
        log.info("providers/disable: %s is off for this connection", request.provider_id)
        why = f"the editor disabled provider {request.provider_id}"
        for session in self._sessions.live_sessions():
            if not self._routes.usable(session.model_choice):
                await self._move_to_default(session, why)
            await self._announce_options(session)
        return {}

    async def _move_to_default(self, session: Session, why: str) -> None:
        """The session's model is gone: it takes the default model, and the user is told
        in a notice (not in the conversation)."""
        moved_from, fallback = session.model_choice, self._config.default_choice
        with _session_errors():
            await self._sessions.choose(session.id, MODEL, fallback)
        await self._client.send_update(session.id, moved_model_notice(moved_from, fallback, why))

    async def aclose(self) -> None:
        await self._sessions.aclose()

    # --- session lifecycle ---------------------------------------------------------------

    async def new_session(self, request: SessionSetup) -> Any:
        session = await self._sessions.new(
            _where(request),
            editor_prompt=request.system_prompt,
            origin=request.origin,
        )
        answer = self._session_answer(session, with_id=True)
        return FollowedBy(answer, partial(self._sessions.announce_commands, session.id))

    async def load_session(self, request: SessionSetup) -> Any:
        session = await self._open_stored(self._sessions.load, request)
        # Before the answer, unlike the other lifecycle methods: the client knows the id it
        # loads, and nothing may follow a load's answer for the session (ACP TCK LOAD-002).
        await self._sessions.announce_commands(session.id)
        return self._session_answer(session, with_id=False)

    async def resume_session(self, request: SessionSetup) -> Any:
        session = await self._open_stored(self._sessions.resume, request)
        answer = self._session_answer(session, with_id=False)
        return FollowedBy(answer, partial(self._sessions.announce_commands, session.id))

    async def fork_session(self, request: SessionSetup) -> Any:
        for option, value in request.config_choices:
            if option == MODEL:
                self._refuse_disabled(value)
        fork = partial(self._sessions.fork, choices=request.config_choices)
        session = await self._open_stored(fork, request)
        answer = self._session_answer(session, with_id=True)
        return FollowedBy(answer, partial(self._sessions.announce_commands, session.id))

    async def _open_stored(self, open_stored: OpenStored, request: SessionSetup) -> Session:
        """`session/load`, `resume` or `fork`: the stored session the request names, opened
        in its roots, with its servers and editor prompt."""
        assert request.session_id is not None  # their reader requires it
        where = _where(request)
        with _session_errors():
            return await open_stored(request.session_id, where, editor_prompt=request.system_prompt)

    async def list_sessions(self, request: ListSessions) -> Any:
        cwd = _directory("cwd", request.cwd, must_exist=False) if request.cwd else None
        try:
            page, next_cursor = await anyio.to_thread.run_sync(
                self._sessions.summaries, cwd, request.cursor, request.archived
            )
        except ValueError as exc:
            raise RpcError(INVALID_PARAMS, f"session/list: {exc}") from None
        answer = dump(
            s.ListSessionsResponse(
                sessions=[
                    s.SessionInfo(
                        session_id=summary.session_id,
                        cwd=summary.cwd,
                        additional_directories=list(summary.additional_roots) or None,
                        title=summary.title,
                        updated_at=summary.updated_at,
                    )
                    for summary in page
                ],
                next_cursor=next_cursor,
            )
        )
        # Unstable, not in acp.schema's model: on every session, as we advertise `archive`.
        for info, summary in zip(answer["sessions"], page, strict=True):
            info["archived"] = summary.archived
        return answer

    async def set_title(self, request: SetTitle) -> Any:
        with _session_errors():
            title = await self._sessions.set_title(request.session_id, request.title)
        return {"title": title}

    async def archive_session(self, request: OneSession) -> Any:
        with _session_errors():
            await self._sessions.archive(request.session_id)
        return {}

    async def unarchive_session(self, request: OneSession) -> Any:
        with _session_errors():
            await self._sessions.unarchive(request.session_id)
        return {}

    async def session_status(self, request: OneSession) -> Any:
        try:
            state = self._sessions.status(request.session_id)
        except UnknownSession as exc:  # the schema wants the id in the data
            raise RpcError(
                RESOURCE_NOT_FOUND, str(exc), {"sessionId": request.session_id}
            ) from None
        return session_meta.status_answer(state.open, state.busy)

    async def close_session(self, request: s.CloseSessionRequest) -> Any:
        with _session_errors():
            await self._sessions.close(request.session_id)
        return dump(s.CloseSessionResponse())

    async def delete_session(self, request: s.DeleteSessionRequest) -> Any:
        with _session_errors():
            await self._sessions.delete(request.session_id)
        return dump(s.DeleteSessionResponse())

    # --- prompts -------------------------------------------------------------------------

    def queue_prompt(self, session_id: Any) -> QueuePlace | None:
        return self._sessions.queue_prompt(session_id) if isinstance(session_id, str) else None

    async def prompt(
        self, request: Prompt, place: PromptPlace | None, inserted: Inserted | None = None
    ) -> Any:
        ours = place if isinstance(place, QueuePlace) else None  # every place is one we gave
        with _session_errors():
            outcome = await self._sessions.prompt(
                request.session_id, request.message, ours, inserted
            )
        if outcome.mode_changed or outcome.choices_changed:
            session = self._sessions.get(request.session_id)  # live: the prompt just ended
            if outcome.mode_changed:
                await self._announce_mode(session)
            if outcome.choices_changed:
                await self._announce_options(session)
        return {"stopReason": outcome.stop_reason}

    async def cancel(self, notification: OneSession) -> None:
        self._sessions.cancel(notification.session_id)

    async def cancel_piece(self, session_id: str, piece: Piece, piece_id: str) -> bool:
        with _session_errors():
            work = self._sessions.get(session_id).tool_state.work
        if piece == "tool_call":
            return work.cancel_tool_call(piece_id)
        return await work.stop_terminal(piece_id)

    # --- choices -------------------------------------------------------------------------

    async def set_config_option(self, request: s.SetSessionConfigOptionSelectRequest) -> Any:
        if request.config_id == MODEL:
            self._refuse_disabled(request.value)
        with _session_errors():
            session = await self._sessions.choose(
                request.session_id, request.config_id, request.value
            )
        if request.config_id == MODE:
            # Clients that know only modes learn it here; the answer carries the options.
            await self._announce_mode(session)
        return {"configOptions": self._config_options(session)}

    async def set_mode(self, request: s.SetSessionModeRequest) -> Any:
        with _session_errors():
            session = await self._sessions.choose(request.session_id, MODE, request.mode_id)
        # Both: a client may show the mode as a mode, as a config option, or both.
        await self._announce_mode(session)
        await self._announce_options(session)
        return dump(s.SetSessionModeResponse())

    async def set_model(self, request: SetSessionModelRequest) -> Any:
        self._refuse_disabled(request.model_id)
        with _session_errors():
            session = await self._sessions.choose(request.session_id, MODEL, request.model_id)
        await self._announce_options(session)
        return {}  # `SetSessionModelResponse`: nothing but an optional `_meta`

    # --- what the editor is told ---------------------------------------------------------

    def _choices(self, session: Session) -> options.Choices:
        return options.Choices(
            model=session.model_choice,
            mode=session.mode,
            thought_level=self._sessions.thought_level(session),
            speed=self._sessions.speed(session),
        )

    def _session_answer(self, session: Session, *, with_id: bool) -> dict[str, Any]:
        """The answer to a lifecycle method (`sessionId` for a new one): the session's
        options and modes, and the older `models` state, which is not in the current
        schema, alongside (Zed reads it)."""
        choices = self._choices(session)
        answer: dict[str, Any] = {"sessionId": session.id} if with_id else {}
        answer["configOptions"] = self._config_options(session)
        answer["modes"] = options.mode_state(choices, MODES)
        answer["models"] = options.legacy_models_state(self._routes.offered(), choices)
        return answer

    def _config_options(self, session: Session) -> list[dict[str, Any]]:
        routed = [name for name in self._config.providers if self._routes.routed(name)]
        return options.config_options(self._routes.offered(), self._choices(session), MODES, routed)

    def _refuse_disabled(self, choice: str) -> None:
        if not self._routes.usable(choice):
            raise RpcError(
                INVALID_PARAMS,
                f"{choice}: its provider was disabled by the editor (providers/disable)",
            )

    async def _announce_options(self, session: Session) -> None:
        await self._client.send_plain_update(
            session.id,
            {
                "sessionUpdate": "config_option_update",
                "configOptions": self._config_options(session),
            },
        )

    async def _announce_mode(self, session: Session) -> None:
        await self._client.send_plain_update(
            session.id, {"sessionUpdate": "current_mode_update", "currentModeId": session.mode}
        )


@contextmanager
def _session_errors() -> Iterator[None]:
    """The rooms' failures as the JSON-RPC errors a client understands."""
    try:
        yield
    except UnknownSession as exc:
        raise RpcError(RESOURCE_NOT_FOUND, str(exc)) from None
    except SessionLocked as exc:
        # One writer per session: the user can act on this (close it in the other agent).
        raise RpcError(INTERNAL_ERROR, str(exc), {"details": str(exc)}) from None
    except StoreError as exc:
        raise RpcError(INTERNAL_ERROR, f"the session store failed: {exc}") from None
    except ChoiceError as exc:
        raise RpcError(INVALID_PARAMS, str(exc)) from None
    except AuthError as exc:
        # `details`: what clients that show only the data (Toad) put in front of the user.
        raise RpcError(AUTH_REQUIRED, str(exc), {"details": str(exc)}) from None
    except ProviderError as exc:
        raise RpcError(INTERNAL_ERROR, str(exc)) from None


def _where(request: SessionSetup) -> Where:
    return Where(
        _directory("cwd", request.cwd),
        tuple(_directory("additionalDirectories", d) for d in request.additional_directories),
        tuple(request.mcp_servers),
    )


def _directory(field: str, value: str, *, must_exist: bool = True) -> Path:
    path = Path(value)
    if not path.is_absolute():
        raise RpcError(INVALID_PARAMS, f"{field} must be an absolute path, got {value!r}")
    if must_exist and not path.is_dir():
        raise RpcError(INVALID_PARAMS, f"{field} is not an existing directory: {value}")
    return Path(os.path.normpath(path))
