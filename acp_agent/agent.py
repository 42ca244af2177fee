"""The ACP methods: sessions in, prompt turns out.

Requests arrive validated as schema models (see `protocol.server`); answers go back as
schema models. Provider failures become JSON-RPC errors with a readable message here.
"""

from __future__ import annotations

import datetime
import importlib
import logging
import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
from anyio.abc import TaskGroup

from .config import AgentConfig, ProviderConfig
from .engine import Turn, TurnHost, TurnSettings
from .messages import Message, MessageChunk, TurnEvent, TurnStopReason
from .protocol import options
from .protocol import schema as s
from .protocol.client import ClientProxy
from .protocol.coalesce import ChunkCoalescer
from .protocol.content import prompt_message
from .protocol.legacy import SetSessionModelRequest, SetSessionModelResponse
from .providers import (
    AuthError,
    Provider,
    ProviderError,
    create_provider,
    provider_module_for,
)
from .providers.usage import Encoder, TokenCounter, UsageMeter
from .rpc.errors import AUTH_REQUIRED, INTERNAL_ERROR, INVALID_PARAMS, RESOURCE_NOT_FOUND, RpcError
from .sessions import Session
from .tools import Decision, PermissionQuestion, ToolContext, builtin_tools
from .tools.permissions import MODES, is_mode

log = logging.getLogger(__name__)

DEFAULT_SYSTEM_PROMPT = """\
You are a coding agent working inside the user's editor. The working directory is {cwd}.
Use the tools to look at files before you answer questions about them; refer to files by \
absolute path. Be concise. Today is {today}."""

MODEL_COMMAND = "model"


class Agent:
    def __init__(
        self,
        config: AgentConfig,
        client: ClientProxy,
        env: Mapping[str, str],
        encoder: Encoder | None = None,
        background: TaskGroup | None = None,
    ) -> None:
        self._config = config
        self._background = background
        self._encoder = encoder
        self._client = client
        self._env = env
        self._sessions: dict[str, Session] = {}
        self._providers: dict[str, Provider] = {}
        self._tools = builtin_tools()

    # --- ACP methods ---------------------------------------------------------------------

    async def authenticate(self, request: s.AuthenticateRequest) -> s.AuthenticateResponse:
        # Credentials come from the environment or the config; nothing to exchange here.
        return s.AuthenticateResponse()

    async def new_session(self, request: s.NewSessionRequest) -> _LegacyNewSessionResponse:
        cwd = _directory("cwd", request.cwd)
        extra = [
            _directory("additionalDirectories", d) for d in request.additional_directories or []
        ]
        session = Session(
            id=f"sess_{uuid.uuid4().hex}",
            cwd=cwd,
            roots=(cwd, *extra),
            model_choice=self._config.default_choice,
            usage=UsageMeter(counter=TokenCounter(self._encoder, encoding=None)),
        )
        self._sessions[session.id] = session
        log.info("session %s in %s using %s", session.id, cwd, session.model_choice)
        response = s.NewSessionResponse(
            session_id=session.id,
            config_options=options.config_options(self._config, session, MODES),
            modes=options.mode_state(session, MODES),
        )
        # The older `models` state is not in the current schema: it rides alongside.
        return _LegacyNewSessionResponse(
            response, options.legacy_models_state(self._config, session)
        )

    async def after_new_session(self, session_id: str) -> None:
        """Sent once the client knows the session id."""
        await self._client.send_schema_update(
            session_id,
            s.AvailableCommandsUpdate(
                session_update="available_commands_update",
                available_commands=[
                    s.AvailableCommand(
                        name=MODEL_COMMAND,
                        description="Switch the model (no argument: list the models)",
                        input=s.AvailableCommandInput(
                            root=s.UnstructuredCommandInput(hint="provider/model")
                        ),
                    )
                ],
            ),
        )

    async def prompt(self, request: s.PromptRequest) -> s.PromptResponse:
        session = self._session(request.session_id)
        message = prompt_message(request.prompt)
        if (model := _model_command(message)) is not None:
            return s.PromptResponse(stop_reason=await self._model_command(session, model))
        try:
            # The turn is built when its queue slot comes: a prompt that waited uses the
            # model and mode chosen meanwhile.
            stop = await session.run_turn(lambda: self._run_streamed(session, message))
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

    def cancel_all(self) -> None:
        for session in self._sessions.values():
            session.cancel()

    async def close_session(self, request: s.CloseSessionRequest) -> s.CloseSessionResponse:
        session = self._session(request.session_id)
        session.cancel()
        del self._sessions[session.id]
        return s.CloseSessionResponse()

    async def set_config_option(
        self, request: s.SetSessionConfigOptionSelectRequest
    ) -> s.SetSessionConfigOptionResponse:
        session = self._session(request.session_id)
        self._apply_option(session, request.config_id, request.value)
        if request.config_id == options.MODE:
            await self._client.send_schema_update(
                session.id,
                s.CurrentModeUpdate(
                    session_update="current_mode_update", current_mode_id=session.mode
                ),
            )
        return s.SetSessionConfigOptionResponse(
            config_options=options.config_options(self._config, session, MODES)
        )

    async def set_mode(self, request: s.SetSessionModeRequest) -> s.SetSessionModeResponse:
        session = self._session(request.session_id)
        self._apply_option(session, options.MODE, request.mode_id)
        await self._announce_options(session)
        return s.SetSessionModeResponse()

    async def set_model(self, request: SetSessionModelRequest) -> SetSessionModelResponse:
        session = self._session(request.session_id)
        self._apply_option(session, options.MODEL, request.model_id)
        await self._announce_options(session)
        return SetSessionModelResponse()

    # --- session choices -----------------------------------------------------------------

    def _apply_option(self, session: Session, option: str, value: str) -> None:
        """Takes effect from the next model call on."""
        if option == options.MODEL:
            try:
                self._config.find_model(value)
            except ValueError as exc:
                raise RpcError(INVALID_PARAMS, str(exc)) from None
            session.model_choice = value
        elif option == options.THOUGHT_LEVEL:
            if options.thought_level(self._config, session) is None:
                raise RpcError(INVALID_PARAMS, f"{session.model_choice} has no thinking levels")
            levels = [level for level, _ in options.THOUGHT_LEVELS]
            if value not in levels:
                raise RpcError(INVALID_PARAMS, f"thought_level must be one of {', '.join(levels)}")
            session.thought_level = value
        elif option == options.MODE:
            if not is_mode(value):
                known = ", ".join(mode.id for mode in MODES)
                raise RpcError(INVALID_PARAMS, f"unknown mode {value!r}; modes: {known}")
            session.mode = value
        else:
            raise RpcError(INVALID_PARAMS, f"unknown config option {option!r}")
        log.info("session %s: %s = %s", session.id, option, value)

    async def _announce_options(self, session: Session) -> None:
        await self._client.send_schema_update(
            session.id,
            s.ConfigOptionUpdate(
                session_update="config_option_update",
                config_options=options.config_options(self._config, session, MODES),
            ),
        )

    async def _model_command(self, session: Session, argument: str) -> TurnStopReason:
        """`/model` lists the models, `/model provider/model` switches; no model call."""
        if argument:
            self._apply_option(session, options.MODEL, argument)
            await self._announce_options(session)
            reply = f"Model set to {argument}."
        else:
            listed = "\n".join(
                f"- {choice}{'  (current)' if choice == session.model_choice else ''}"
                for choice, _, _ in self._config.model_choices()
            )
            reply = f"Models:\n{listed}\n\nSwitch with /model provider/model."
        await self._client.send_update(session.id, MessageChunk(reply))
        return "end_turn"

    # --- turns ---------------------------------------------------------------------------

    def _session(self, session_id: str) -> Session:
        session = self._sessions.get(session_id)
        if session is None:
            raise RpcError(RESOURCE_NOT_FOUND, f"unknown session {session_id!r}")
        return session

    async def _run_streamed(self, session: Session, message: Message) -> TurnStopReason:
        """Runs the turn beside the task that flushes coalesced text chunks."""
        direct = _SessionHost(self._client, session.id)
        coalescer = ChunkCoalescer(direct.emit)
        turn = await self._turn(session, _CoalescedHost(direct, coalescer))
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(coalescer.run)
                try:
                    stop = await turn.run(message)
                finally:
                    with anyio.CancelScope(shield=True), anyio.move_on_after(1):
                        await coalescer.flush()
                    tg.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            # The flusher never fails, so a group holds the turn's one error: unwrap it
            # so provider errors keep their type (and their readable message).
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from None
            raise
        return stop

    async def _provider(self, name: str, config: ProviderConfig) -> Provider:
        provider = self._providers.get(name)
        if provider is None:
            # A vendor SDK takes a second or two to import: not on the loop, where it would
            # stall every other session's stream and cancel.
            await anyio.to_thread.run_sync(importlib.import_module, provider_module_for(config))
            provider = self._providers.setdefault(name, create_provider(name, config, self._env))
        return provider

    async def _turn(self, session: Session, host: TurnHost) -> Turn:
        choice, provider_config, model = self._config.find_model(session.model_choice)
        provider = await self._provider(choice.split("/", 1)[0], provider_config)
        session.usage.prices = model.prices  # a switch keeps the cost so far
        system = self._config.system_prompt or DEFAULT_SYSTEM_PROMPT
        settings = TurnSettings(
            model=model.id,
            system_prompt=system.format(cwd=session.cwd, today=datetime.date.today()),
            context_window=model.context_window,
            max_turn_requests=self._config.max_turn_requests,
            max_output_tokens=model.max_output_tokens,
            thought_level=options.thought_level(self._config, session),
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
                state=session.tool_state,
                shell_timeout=self._config.shell_timeout,
                client_shows_terminal_stream=self._client.capabilities.terminal_output_meta,
                background=self._background,
            ),
            host=host,
            meter=session.usage,
            mode=session.mode,
            memory=session.permissions,
        )


@dataclass(frozen=True, slots=True)
class _SessionHost:
    client: ClientProxy
    session_id: str

    async def emit(self, event: TurnEvent) -> None:
        await self.client.send_update(self.session_id, event)

    async def ask_permission(self, question: PermissionQuestion) -> Decision:
        return await self.client.request_permission(self.session_id, question)


@dataclass(frozen=True, slots=True)
class _CoalescedHost:
    inner: TurnHost
    coalescer: ChunkCoalescer

    async def emit(self, event: TurnEvent) -> None:
        await self.coalescer.emit(event)

    async def ask_permission(self, question: PermissionQuestion) -> Decision:
        await self.coalescer.flush()  # the user sees the text before the question
        return await self.inner.ask_permission(question)


def _model_command(message: Message) -> str | None:
    """The argument of a `/model` prompt ("" for none); None for any other prompt, which
    goes to the model as written (other slash text included)."""
    text = message.text.strip()
    if len(message.parts) != 1 or not text.startswith("/"):
        return None
    name, _, argument = text[1:].partition(" ")
    return argument.strip() if name == MODEL_COMMAND else None


@dataclass(frozen=True, slots=True)
class _LegacyNewSessionResponse:
    """A `session/new` answer plus the legacy `models` field, dumped like a schema model."""

    response: s.NewSessionResponse
    models: dict[str, Any]

    def model_dump(self, **kwargs: Any) -> dict[str, Any]:
        return {**self.response.model_dump(**kwargs), "models": self.models}


def _directory(field: str, value: str) -> Path:
    path = Path(value)
    if not path.is_absolute():
        raise RpcError(INVALID_PARAMS, f"{field} must be an absolute path, got {value!r}")
    if not path.is_dir():
        raise RpcError(INVALID_PARAMS, f"{field} is not an existing directory: {value}")
    return Path(os.path.normpath(path))
