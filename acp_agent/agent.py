"""The ACP methods: sessions in, prompt turns out.

Requests arrive validated as schema models (see `protocol.server`); answers go back as
schema models. Provider failures become JSON-RPC errors with a readable message here.
"""

from __future__ import annotations

import datetime
import logging
import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .config import AgentConfig
from .engine import Turn, TurnSettings
from .messages import TurnEvent
from .protocol import schema as s
from .protocol.client import ClientProxy
from .protocol.content import prompt_message
from .providers import AuthError, Provider, ProviderError, create_provider
from .rpc.errors import AUTH_REQUIRED, INTERNAL_ERROR, INVALID_PARAMS, RESOURCE_NOT_FOUND, RpcError
from .sessions import Session
from .tools import Decision, PermissionQuestion, ToolContext, builtin_tools

log = logging.getLogger(__name__)

DEFAULT_SYSTEM_PROMPT = """\
You are a coding agent working inside the user's editor. The working directory is {cwd}.
Use the tools to look at files before you answer questions about them; refer to files by \
absolute path. Be concise. Today is {today}."""


class Agent:
    def __init__(self, config: AgentConfig, client: ClientProxy, env: Mapping[str, str]) -> None:
        self._config = config
        self._client = client
        self._env = env
        self._sessions: dict[str, Session] = {}
        self._providers: dict[str, Provider] = {}
        self._tools = builtin_tools()

    # --- ACP methods ---------------------------------------------------------------------

    async def authenticate(self, request: s.AuthenticateRequest) -> s.AuthenticateResponse:
        # Credentials come from the environment or the config; nothing to exchange here.
        return s.AuthenticateResponse()

    async def new_session(self, request: s.NewSessionRequest) -> s.NewSessionResponse:
        cwd = _directory("cwd", request.cwd)
        extra = [
            _directory("additionalDirectories", d) for d in request.additional_directories or []
        ]
        session = Session(
            id=f"sess_{uuid.uuid4().hex}",
            cwd=cwd,
            roots=(cwd, *extra),
            model_choice=self._config.default_choice,
        )
        self._sessions[session.id] = session
        log.info("session %s in %s using %s", session.id, cwd, session.model_choice)
        return s.NewSessionResponse(session_id=session.id)

    async def prompt(self, request: s.PromptRequest) -> s.PromptResponse:
        session = self._session(request.session_id)
        message = prompt_message(request.prompt)
        turn = self._turn(session)
        try:
            stop = await session.run_turn(lambda: turn.run(message))
        except AuthError as exc:
            raise RpcError(AUTH_REQUIRED, str(exc)) from None
        except ProviderError as exc:
            raise RpcError(INTERNAL_ERROR, str(exc)) from None
        return s.PromptResponse(stop_reason=stop)

    async def cancel(self, request: s.CancelNotification) -> None:
        session = self._sessions.get(request.session_id)
        if session is None:
            log.warning("cancel for unknown session %s ignored", request.session_id)
            return
        session.cancel()

    async def close_session(self, request: s.CloseSessionRequest) -> s.CloseSessionResponse:
        session = self._session(request.session_id)
        session.cancel()
        del self._sessions[session.id]
        return s.CloseSessionResponse()

    # --- helpers -------------------------------------------------------------------------

    def _session(self, session_id: str) -> Session:
        session = self._sessions.get(session_id)
        if session is None:
            raise RpcError(RESOURCE_NOT_FOUND, f"unknown session {session_id!r}")
        return session

    def _turn(self, session: Session) -> Turn:
        choice, provider_config, model = self._config.find_model(session.model_choice)
        provider_name = choice.split("/", 1)[0]
        provider = self._providers.get(provider_name)
        if provider is None:
            provider = create_provider(provider_name, provider_config, self._env)
            self._providers[provider_name] = provider
        system = self._config.system_prompt or DEFAULT_SYSTEM_PROMPT
        settings = TurnSettings(
            model=model.id,
            system_prompt=system.format(cwd=session.cwd, today=datetime.date.today()),
            context_window=model.context_window,
            max_turn_requests=self._config.max_turn_requests,
            max_output_tokens=model.max_output_tokens,
        )
        return Turn(
            provider=provider,
            settings=settings,
            history=session.history,
            tools=self._tools,
            context=ToolContext(
                session_id=session.id,
                cwd=session.cwd,
                roots=session.roots,
                editor=self._client.editor(session.id),
            ),
            host=_SessionHost(self._client, session.id),
            always_allowed=session.always_allowed,
        )


@dataclass(frozen=True, slots=True)
class _SessionHost:
    client: ClientProxy
    session_id: str

    async def emit(self, event: TurnEvent) -> None:
        await self.client.send_update(self.session_id, event)

    async def ask_permission(self, question: PermissionQuestion) -> Decision:
        return await self.client.request_permission(self.session_id, question)


def _directory(field: str, value: str) -> Path:
    path = Path(value)
    if not path.is_absolute():
        raise RpcError(INVALID_PARAMS, f"{field} must be an absolute path, got {value!r}")
    if not path.is_dir():
        raise RpcError(INVALID_PARAMS, f"{field} is not an existing directory: {value}")
    return Path(os.path.normpath(path))
