"""Typed calls to the client, refusing any `fs/*` or `terminal/*` it did not advertise."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import anyio
from pydantic import ValidationError

from ..messages import BackgroundChanged, Elicitation, ElicitationAnswer, TurnEvent
from ..rpc.endpoint import Endpoint
from ..rpc.errors import RpcError
from ..tools import Decision, PermissionQuestion, ToolFailed
from ..tools.base import TerminalExit, TerminalOutput
from . import schema as s
from .channel import ClientChannel
from .dialect import V1, Dialect
from .handshake import ClientCapabilities
from .mcp_messages import editor_mcp
from .schema import dump
from .updates import announced_tool_call
from .v2_states import SessionStates
from .v2_updates import SessionState, StopReason, message_reset

DECISIONS: tuple[Decision, ...] = ("allow_once", "allow_always", "reject_once", "reject_always")


class CapabilityMissing(Exception):
    """A call the client did not advertise; raised before anything is sent."""


class ClientProxy:
    def __init__(
        self, endpoint: Endpoint, capabilities: ClientCapabilities, dialect: Dialect = V1
    ) -> None:
        self._endpoint = endpoint
        self.capabilities = capabilities
        self._dialect = dialect
        """The connection's protocol version: it shapes every update."""
        self.editor_mcp = editor_mcp(endpoint)
        """The MCP servers that live in the editor (`acp` entries), through `mcp/message`."""
        self.states = SessionStates()
        """v2: each session's foreground state and background work, as last reported."""
        self._replays: dict[str, set[str]] = {}
        """v2: per session being replayed, the messages this replay has emptied already."""

    async def send_update(self, session_id: str, event: TurnEvent) -> None:
        if isinstance(event, BackgroundChanged):
            update = self.states.background(session_id, event)
            if self._dialect.reports_background and update is not None:
                await self._notify_update(session_id, update)
            return
        # One event can be several updates (v2: a local command's terminal, then its call).
        for update in self._dialect.session_updates(event, self.capabilities):
            reset = self._replay_reset(session_id, update)
            if reset is not None:
                await self._notify_update(session_id, reset)
            await self._notify_update(session_id, update)

    @contextmanager
    def replaying(self, session_id: str) -> Iterator[None]:
        """v2: within, each replayed message's first chunk is preceded by the message with
        no content (see `message_reset`), so a client that already holds it shows it once."""
        self._replays[session_id] = set()
        try:
            yield
        finally:
            del self._replays[session_id]

    def _replay_reset(self, session_id: str, update: dict[str, Any]) -> dict[str, Any] | None:
        emptied = self._replays.get(session_id)
        if emptied is None:
            return None
        reset = message_reset(update)
        if reset is None:
            return None
        key = f"{reset['sessionUpdate']}/{reset['messageId']}"  # each kind has its own ids
        if key in emptied:
            return None
        emptied.add(key)
        return reset

    async def send_state(
        self,
        session_id: str,
        state: SessionState,
        stop_reason: StopReason | None = None,
        error: RpcError | None = None,
    ) -> None:
        """v2: the session's foreground state (with its background work)."""
        update = self.states.foreground(session_id, state, stop_reason, error)
        await self._notify_update(session_id, update)

    async def send_plain_update(self, session_id: str, update: dict[str, Any]) -> None:
        """An update the caller built as v1 JSON (the agent's mode and option changes), in
        the connection's dialect, or not at all where it has no such update."""
        reshaped = self._dialect.plain_update(update)
        if reshaped is not None:
            await self._notify_update(session_id, reshaped)

    async def send_auth_status(self, status: dict[str, Any]) -> None:
        """Unstable `auth/status_update`: the same fields as the `auth/status` answer."""
        await self._endpoint.notify("auth/status_update", status)

    async def _notify_update(self, session_id: str, update: dict[str, Any]) -> None:
        await self._endpoint.notify("session/update", {"sessionId": session_id, "update": update})

    async def request_permission(self, session_id: str, question: PermissionQuestion) -> Decision:
        if self._dialect.version >= 2:
            return await self._request_permission_v2(session_id, question)
        request = {
            "sessionId": session_id,
            # The tool call as announced, with what it will do (the diff, the command), so
            # the client shows the change before the user decides.
            "toolCall": announced_tool_call(
                question.tool_call_id,
                question.title,
                question.kind,
                question.raw_input,
                name=question.name,
                content=question.content,
                locations=question.locations,
            ),
            "options": [
                {"optionId": kind, "name": name, "kind": kind}
                for kind, name in _permission_options(question.always_scope)
            ],
        }
        raw = await self._endpoint.request("session/request_permission", request)
        return _decision(raw)

    async def _request_permission_v2(
        self, session_id: str, question: PermissionQuestion
    ) -> Decision:
        """v2: the request in its v2 shape; the turn `requires_action` while it waits."""
        from .v2_prompts import permission_request

        options = _permission_options(question.always_scope)
        request = permission_request(session_id, question, [(k, n) for k, n in options])
        async with self._blocked_on_user(session_id):
            raw = await self._endpoint.request("session/request_permission", request)
        return _decision(raw)

    @asynccontextmanager
    async def _blocked_on_user(self, session_id: str) -> AsyncIterator[None]:
        """v2: the turn `requires_action` while a question waits for the user, then runs
        on (also when the question was cancelled with the turn)."""
        if self._dialect.version < 2:
            yield
            return
        await self._notify_state(session_id, self.states.asking(session_id))
        try:
            yield
        finally:
            with anyio.CancelScope(shield=True):
                await self._notify_state(session_id, self.states.answered(session_id))

    async def _notify_state(self, session_id: str, update: dict[str, Any] | None) -> None:
        if update is not None:
            await self._notify_update(session_id, update)

    async def elicit(self, session_id: str, elicitation: Elicitation) -> ElicitationAnswer:
        """Ask the user through `elicitation/create`; an unreadable answer declines."""
        if elicitation.mode not in self.elicitation_modes:
            raise CapabilityMissing(f"the client did not advertise {elicitation.mode} elicitation")
        async with self._blocked_on_user(session_id):
            return await self._elicit(session_id, elicitation)

    async def _elicit(self, session_id: str, elicitation: Elicitation) -> ElicitationAnswer:
        params: dict[str, Any] = {
            "sessionId": session_id,
            "message": elicitation.message,
            "mode": elicitation.mode,
        }
        if elicitation.tool_call_id is not None:
            params["toolCallId"] = elicitation.tool_call_id
        if elicitation.mode == "form":
            params["requestedSchema"] = elicitation.schema or {"type": "object", "properties": {}}
        else:
            params["url"] = elicitation.url
            params["elicitationId"] = elicitation.elicitation_id
        raw = await self._endpoint.request("elicitation/create", params)
        action = raw.get("action") if isinstance(raw, dict) else None
        if action not in ("accept", "decline", "cancel"):
            return ElicitationAnswer("decline")
        content = raw.get("content")
        return ElicitationAnswer(action, content if isinstance(content, dict) else None)

    @property
    def elicitation_modes(self) -> frozenset[str]:
        """The kinds of question the client can put to the user."""
        modes = set()
        if self.capabilities.elicitation_form:
            modes.add("form")
        if self.capabilities.elicitation_url:
            modes.add("url")
        return frozenset(modes)

    async def read_text_file(
        self, session_id: str, path: str, line: int | None = None, limit: int | None = None
    ) -> str:
        if not self.capabilities.read_text_file:
            raise CapabilityMissing("the client did not advertise fs.readTextFile")
        request = s.ReadTextFileRequest(session_id=session_id, path=path, line=line, limit=limit)
        raw = await self._endpoint.request("fs/read_text_file", dump(request))
        return s.ReadTextFileResponse.model_validate(raw).content

    async def write_text_file(self, session_id: str, path: str, content: str) -> None:
        if not self.capabilities.write_text_file:
            raise CapabilityMissing("the client did not advertise fs.writeTextFile")
        request = s.WriteTextFileRequest(session_id=session_id, path=path, content=content)
        await self._endpoint.request("fs/write_text_file", dump(request))

    async def terminal_call(self, method: str, params: dict[str, Any]) -> Any:
        """Any `terminal/*` request, refused unless the client advertised `terminal`."""
        if not self.capabilities.terminal:
            raise CapabilityMissing(f"the client did not advertise terminal, needed for {method}")
        return await self._endpoint.request(method, params)

    def editor(self, session_id: str) -> SessionEditor:
        return SessionEditor(self, session_id)

    def channel(self, session_id: str) -> ClientChannel:
        return ClientChannel(self, session_id)

    @property
    def shows_terminal_stream(self) -> bool:
        return self.capabilities.terminal_output_meta or self._dialect.display_terminals

    @property
    def shows_subagents(self) -> bool:
        return self.capabilities.subagents

    @property
    def shows_notices(self) -> bool:
        return self.capabilities.session_notices


class SessionEditor:
    """The `tools.Editor` of one session.

    Client errors and malformed client replies become `ToolFailed`, so the tool call fails
    visibly and the model hears why, instead of the whole prompt failing.
    """

    def __init__(self, client: ClientProxy, session_id: str) -> None:
        self._client = client
        self._session_id = session_id

    @property
    def can_read_files(self) -> bool:
        return self._client.capabilities.read_text_file

    @property
    def can_write_files(self) -> bool:
        return self._client.capabilities.write_text_file

    @property
    def can_run_terminals(self) -> bool:
        return self._client.capabilities.terminal

    async def read_text_file(self, path: str, line: int | None, limit: int | None) -> str:
        with _client_failures(f"read {path}"):
            return await self._client.read_text_file(self._session_id, path, line, limit)

    async def write_text_file(self, path: str, content: str) -> None:
        with _client_failures(f"write {path}"):
            await self._client.write_text_file(self._session_id, path, content)

    async def create_terminal(
        self,
        command: str,
        args: Sequence[str],
        cwd: str,
        env: Mapping[str, str],
        output_byte_limit: int,
    ) -> str:
        request = s.CreateTerminalRequest(
            session_id=self._session_id,
            command=command,
            args=list(args),
            cwd=cwd,
            env=[s.EnvVariable(name=k, value=v) for k, v in env.items()],
            output_byte_limit=output_byte_limit,
        )
        with _client_failures(f"start a terminal for {command}"):
            raw = await self._client.terminal_call("terminal/create", dump(request))
            return s.CreateTerminalResponse.model_validate(raw).terminal_id

    async def terminal_output(self, terminal_id: str) -> TerminalOutput:
        with _client_failures("report terminal output"):
            raw = await self._client.terminal_call("terminal/output", self._ids(terminal_id))
            response = s.TerminalOutputResponse.model_validate(raw)
        status = response.exit_status
        return TerminalOutput(
            output=response.output,
            truncated=response.truncated,
            exit=None if status is None else TerminalExit(status.exit_code, status.signal),
        )

    async def wait_for_terminal_exit(self, terminal_id: str) -> TerminalExit:
        with _client_failures("wait for the command"):
            raw = await self._client.terminal_call("terminal/wait_for_exit", self._ids(terminal_id))
            response = s.WaitForTerminalExitResponse.model_validate(raw)
        return TerminalExit(response.exit_code, response.signal)

    async def kill_terminal(self, terminal_id: str) -> None:
        with _client_failures("kill the command"):
            await self._client.terminal_call("terminal/kill", self._ids(terminal_id))

    async def release_terminal(self, terminal_id: str) -> None:
        with _client_failures("release the terminal"):
            await self._client.terminal_call("terminal/release", self._ids(terminal_id))

    def _ids(self, terminal_id: str) -> dict[str, Any]:
        return {"sessionId": self._session_id, "terminalId": terminal_id}


@contextmanager
def _client_failures(action: str) -> Iterator[None]:
    try:
        yield
    except RpcError as exc:
        raise ToolFailed(f"the editor could not {action}: {_reason(exc)}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "reply"
        raise ToolFailed(
            f"the editor could not {action}: malformed reply ({where}: {first['msg']})"
        ) from None


def _reason(error: RpcError) -> str:
    """The client's message plus the detail clients put in `data` (acpx: `data.details`)."""
    data = error.data
    detail = data.get("details") or data.get("message") if isinstance(data, dict) else data
    if isinstance(detail, str) and detail and detail not in error.message:
        return f"{error.message}: {detail}"
    return error.message


def _permission_options(always_scope: str | None) -> list[tuple[Decision, str]]:
    """Allow/reject once, plus "always" options naming what they cover when it can be kept."""
    if always_scope is None:
        return [("allow_once", "Allow"), ("reject_once", "Reject")]
    return [
        ("allow_once", "Allow"),
        ("allow_always", f"Always allow {always_scope}"),
        ("reject_once", "Reject"),
        ("reject_always", f"Always reject {always_scope}"),
    ]


def _decision(raw: Any) -> Decision:
    """The chosen option; anything unreadable counts as a rejection, never as consent."""
    outcome = raw.get("outcome") if isinstance(raw, dict) else None
    if not isinstance(outcome, dict):
        return "reject_once"
    if outcome.get("outcome") == "cancelled":
        return "cancelled"
    chosen = outcome.get("optionId")
    for kind in DECISIONS:
        if chosen == kind:
            return kind
    return "reject_once"


__all__ = ["CapabilityMissing", "ClientProxy", "SessionEditor"]
