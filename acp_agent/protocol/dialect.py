"""One `Dialect` per ACP protocol version, chosen once per connection by `initialize`.

A dialect owns everything on the wire that differs by version: how `initialize` is read
and answered, which methods are routed (and under which names), the shape of the answers
and of `session/update`s, and whether the connection takes JSON-RPC batches. The agent,
the sessions and the engine keep building the neutral (v1) answers and events; the server
and the client proxy pass them through the connection's dialect, so nothing below
`protocol/` learns which version is spoken.

Negotiation (ACP initialization: "if the Agent supports the requested version, respond
with the same version, otherwise with the latest it supports"; the conformance kit's
ACP-INIT-003 probes 65535 and wants a success carrying our own version, at least what a v1
request gets): 2 and above speak v2 and answer 2; 1 and below stay v1 and answer 1, as
before v2 existed.

Light on purpose: the first `initialize` is answered from here before the event loop (and
pydantic, the schema models, the MCP bridge) is loaded, so those load on first use.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..rpc.errors import RpcError
from ..rpc.framing import FdSource, decode_frame, encode_frame, read_first_line, write_all
from . import handshake, v2_wire
from .handshake import ClientCapabilities, Handshake

if TYPE_CHECKING:
    from ..messages import TurnEvent
    from .methods import Method

LIFECYCLE_ANSWERS = frozenset(
    {"session/new", "session/load", "session/resume", "session/fork", "session/set_config_option"}
)
"""The answers that carry a session's config options (and, in v1, its modes)."""


class Dialect:
    """ACP v1: the answers and updates exactly as the agent builds them."""

    version = 1
    login_method = "authenticate"
    """Answered by the server from the handshake, before the agent exists."""
    batches = False
    """v1 transports never promised JSON-RPC batches: an array is refused (-32600)."""
    display_terminals = False
    """Every client shows agent-owned display terminals (v2); in v1 only Zed's `_meta`."""
    reports_background = False
    """`state_update` lists the session's background work (v2 only)."""

    def read_initialize(self, params: Any) -> Handshake:
        return replace(handshake.parse_initialize(params), protocol_version=self.version)

    def initialize_response(self, greeting: Handshake) -> dict[str, Any]:
        return handshake.initialize_response(greeting)

    def request_method(self, name: str) -> Method | None:
        # Not at import time: the readers load the config's and the MCP bridge's types.
        from .methods import REQUESTS

        return REQUESTS.get(name)

    def answer(self, method: str, result: Any) -> Any:
        """`result` of `method` (the agent's neutral answer) as this dialect has it."""
        if method == "session/status" and isinstance(result, dict):
            # v1 has no foreground state (`state_update` is v2's): the status alone.
            return {key: value for key, value in result.items() if key != "state"}
        return result

    def session_updates(self, event: TurnEvent, client: ClientCapabilities) -> list[dict[str, Any]]:
        """The `session/update` payloads for one turn event, in sending order (none: there
        is nothing this client would show)."""
        from .updates import session_update

        update = session_update(
            event,
            client.terminal_output_meta,
            compaction=client.session_compaction,
            notices=client.session_notices,
            subagents=client.subagents,
            plans=client.plan,
        )
        return [] if update is None else [update]

    def plain_update(self, update: dict[str, Any]) -> dict[str, Any] | None:
        """An update the agent built as JSON (mode and option changes); None: not sent."""
        return update


class DialectV2(Dialect):
    """ACP v2 (Preview): `info`/`capabilities`, `auth/*`, no modes or `session/load`,
    config options by `configId`, and JSON-RPC batches on the way in."""

    version = v2_wire.V2
    login_method = "auth/login"
    batches = True
    display_terminals = True
    reports_background = True

    def read_initialize(self, params: Any) -> Handshake:
        handshake.parse_initialize(params)  # the same checks of params and protocolVersion
        return v2_wire.read_initialize(params)

    def initialize_response(self, greeting: Handshake) -> dict[str, Any]:
        return v2_wire.initialize_response(greeting)

    def request_method(self, name: str) -> Method | None:
        from .methods import REQUESTS_V2

        return REQUESTS_V2.get(name)

    def answer(self, method: str, result: Any) -> Any:
        if method in LIFECYCLE_ANSWERS and isinstance(result, dict):
            return v2_wire.session_answer(result)
        return result  # `session/status` keeps its `state`, as v2's `state_update` has it

    def session_updates(self, event: TurnEvent, client: ClientCapabilities) -> list[dict[str, Any]]:
        # Not at import time: the first `initialize` is answered before it could load.
        from .v2_updates import session_updates_v2

        return session_updates_v2(event, client)

    def plain_update(self, update: dict[str, Any]) -> dict[str, Any] | None:
        return v2_wire.plain_update(update)


V1 = Dialect()
V2 = DialectV2()


def dialect_for(greeting: Handshake) -> Dialect:
    """The dialect of a negotiated handshake (see `negotiate`)."""
    return V2 if greeting.protocol_version >= V2.version else V1


def negotiate(params: Any) -> Handshake:
    """The client's `initialize`, read in the dialect its `protocolVersion` chooses; the
    handshake's `protocol_version` is the negotiated one (1 or 2). Raises -32602 for params
    that are not an object or a version that is not an integer."""
    requested = handshake.parse_initialize(params).protocol_version
    dialect = V2 if requested >= V2.version else V1
    return dialect.read_initialize(params)


def initialize_response(greeting: Handshake) -> dict[str, Any]:
    return dialect_for(greeting).initialize_response(greeting)


def answer_first_initialize(frames_in: int, frames_out: int) -> tuple[Handshake | None, FdSource]:
    """Read the first frame; if it is a well-formed `initialize` request, answer it. Returns
    the handshake (None: not answered) and the source the server reads on from: with
    every byte read so far when the first frame was anything else (answered as usual)."""
    line, rest, ended = read_first_line(frames_in)
    greeting, request_id = _initialize_request(line)
    if greeting is None:
        unread = rest if line is None else line + b"\n" + rest
        return None, FdSource(frames_in, unread=unread, ended=ended)
    answer = {"jsonrpc": "2.0", "id": request_id, "result": initialize_response(greeting)}
    write_all(frames_out, encode_frame(answer))
    return greeting, FdSource(frames_in, unread=rest, ended=ended)


def _initialize_request(line: bytes | None) -> tuple[Handshake | None, int | str | None]:
    """The handshake and id of a well-formed `initialize` request; (None, None) else."""
    if line is None:
        return None, None
    try:
        message = decode_frame(line.strip())
    except RpcError:
        return None, None
    if not isinstance(message, dict):
        return None, None
    request_id = message.get("id")
    if (
        message.get("jsonrpc") != "2.0"
        or message.get("method") != "initialize"
        or isinstance(request_id, bool)
        or not isinstance(request_id, int | str)
    ):
        return None, None
    try:
        return negotiate(message.get("params")), request_id
    except RpcError:
        return None, None
