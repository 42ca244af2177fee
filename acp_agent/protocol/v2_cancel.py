"""ACP v2's `tool_call/cancel` and `terminal/cancel`: stop one piece of a session's work,
not its turn (spec notes §5).

The answer (`{}`) says the cancel was accepted, not that the work has stopped: the
confirmation is the call's `tool_call_update` to `cancelled`, or the terminal's
`terminal_update` with its `exitStatus`. An id that names nothing running in that session
(unknown, another session's, already ended) is refused with -32602 naming the field.
Which pieces may be cancelled is advertised on each of them (`capabilities.cancel` on the
running call or terminal), not in `initialize`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from ..rpc.errors import INVALID_PARAMS, RpcError
from .fields import text

if TYPE_CHECKING:
    from .methods import AcpAgent

Piece: TypeAlias = Literal["tool_call", "terminal"]

_FIELDS: dict[Piece, str] = {"tool_call": "toolCallId", "terminal": "terminalId"}
_NAMES: dict[Piece, str] = {"tool_call": "tool call", "terminal": "terminal"}


@dataclass(frozen=True, slots=True)
class CancelPiece:
    session_id: str
    piece: Piece
    piece_id: str


def cancel_tool_call(params: dict[str, Any]) -> CancelPiece:
    return CancelPiece(text(params, "sessionId"), "tool_call", text(params, "toolCallId"))


def cancel_terminal(params: dict[str, Any]) -> CancelPiece:
    return CancelPiece(text(params, "sessionId"), "terminal", text(params, "terminalId"))


async def cancel_piece(agent: AcpAgent, request: CancelPiece) -> dict[str, Any]:
    if not await agent.cancel_piece(request.session_id, request.piece, request.piece_id):
        field = _FIELDS[request.piece]
        raise RpcError(
            INVALID_PARAMS,
            f"invalid params: {field}: no running {_NAMES[request.piece]} "
            f"{request.piece_id!r} in this session (unknown, or it has ended)",
            {"field": field},
        )
    return {}


__all__ = ["CancelPiece", "Piece", "cancel_piece", "cancel_terminal", "cancel_tool_call"]
