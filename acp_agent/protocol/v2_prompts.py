"""ACP v2's prompt lifecycle (spec notes §4-§6) and `session/resume` replay (§7).

`session/prompt` answers `{messageId}` as soon as the user message joins the history, and
the turn goes on, reported by
`state_update`s: `running` at insertion, `idle` with its `stopReason` (and `error`, when it
failed after insertion) at its end. A repeat with a known `idempotencyKey` answers the
first prompt's id and inserts nothing.

One `V2Prompts` per v2 connection. The agent knows none of this: it is handed the neutral
`inserted` callback (see `sessions.turns.Inserted`), and its prompts keep the places the
queue gave them as their frames were read.
"""

from __future__ import annotations

import logging
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from ..messages import DocumentPart, ImagePart, ResourceLinkPart, TextPart
from ..rpc.endpoint import FollowedBy, short_failure
from ..rpc.errors import INTERNAL_ERROR, INVALID_PARAMS, RpcError
from .v2_updates import (
    UserPart,
    locations,
    replay_complete,
    tool_contents,
    user_message,
)

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from ..tools import PermissionQuestion
    from .client import ClientProxy
    from .methods import AcpAgent, PromptPlace
    from .requests import Prompt, SessionSetup

log = logging.getLogger(__name__)

IDLE_SECONDS = 2.0
"""How long a turn's last `idle` may take to go out once the connection is closing."""
KEYS_PER_SESSION = 256
"""Idempotency keys remembered per session (the oldest are forgotten first)."""


@dataclass(slots=True)
class _Insertion:
    """One prompt's answer: its message id once inserted, or why it failed before."""

    settled: anyio.Event = field(default_factory=anyio.Event)
    message_id: str | None = None
    failure: BaseException | None = None

    def settle(self, message_id: str | None = None, failure: BaseException | None = None) -> None:
        if not self.settled.is_set():
            self.message_id, self.failure = message_id, failure
            self.settled.set()

    async def answer(self) -> dict[str, Any]:
        await self.settled.wait()
        if self.failure is not None:
            raise self.failure
        return {"messageId": self.message_id}


class V2Prompts:
    """The v2 `session/prompt`s of one connection."""

    def __init__(self, client: ClientProxy, background: TaskGroup) -> None:
        self._client = client
        self._background = background
        self._keys: dict[str, OrderedDict[str, _Insertion]] = {}

    async def prompt(
        self, agent: AcpAgent, request: Prompt, place: PromptPlace | None, key: str | None
    ) -> Any:
        """Start the turn; answer at its insertion, then (as the request's follow-up, so
        the connection's drain waits for it) wait for its end."""
        if key is not None and (first := self._known(request.session_id, key)) is not None:
            if place is not None:
                place.release()  # inserts nothing
            return await first.answer()
        insertion = _Insertion()
        if key is not None:
            self._remember(request.session_id, key, insertion)
        ended = anyio.Event()
        self._background.start_soon(self._run, agent, request, place, insertion, ended)
        return FollowedBy(await insertion.answer(), ended.wait)

    def _known(self, session_id: str, key: str) -> _Insertion | None:
        return self._keys.get(session_id, OrderedDict()).get(key)

    def _remember(self, session_id: str, key: str, insertion: _Insertion) -> None:
        keys = self._keys.setdefault(session_id, OrderedDict())
        keys[key] = insertion
        while len(keys) > KEYS_PER_SESSION:
            keys.popitem(last=False)

    async def _run(
        self,
        agent: AcpAgent,
        request: Prompt,
        place: PromptPlace | None,
        insertion: _Insertion,
        ended: anyio.Event,
    ) -> None:
        session_id = request.session_id

        async def inserted(message_id: str) -> None:
            parts = _user_parts(request)
            await self._client.send_plain_update(session_id, user_message(message_id, parts))
            await self._client.send_state(session_id, "running")
            insertion.settle(message_id)

        try:
            answer = await agent.prompt(request, place, inserted)
        except Exception as exc:
            if not insertion.settled.is_set():
                insertion.settle(failure=exc)  # answered as the prompt's error
                return
            error = exc if isinstance(exc, RpcError) else _internal(exc)
            if not isinstance(exc, RpcError):
                log.error("session/prompt failed after insertion: %s", error.message)
            await self._idle(session_id, "error", error)
        else:
            # A slash command inserts no message: answered, with an id of its own, now.
            insertion.settle(uuid.uuid4().hex)
            await self._idle(session_id, answer["stopReason"])
        finally:
            insertion.settle(failure=RpcError(INTERNAL_ERROR, "the prompt was interrupted"))
            if place is not None:  # after `idle`: the next prompt's `running` follows it
                place.release()
            ended.set()

    async def _idle(self, session_id: str, stop: Any, error: RpcError | None = None) -> None:
        with anyio.CancelScope(shield=True), anyio.move_on_after(IDLE_SECONDS):
            await self._client.send_state(session_id, "idle", stop, error)


def _user_parts(request: Prompt) -> list[UserPart]:
    return [
        part
        for part in request.message.parts
        if isinstance(part, TextPart | ImagePart | ResourceLinkPart | DocumentPart)
    ]


def _internal(exc: Exception) -> RpcError:
    failure = short_failure("session/prompt", exc)
    return RpcError(INTERNAL_ERROR, failure, {"details": failure})


# --- session/resume -----------------------------------------------------------------------


async def resume(agent: AcpAgent, client: ClientProxy, request: SessionSetup, params: Any) -> Any:
    """v2's `session/resume` (spec notes §7): with `replayFrom: {"type": "start"}` the
    history first (what v1's `session/load` shows) and one `replay_complete`; then, with or
    without a replay, the session's current state; then the answer."""
    replay_from = params.get("replayFrom") if isinstance(params, dict) else None
    if replay_from is not None and not _from_start(replay_from):
        raise RpcError(INVALID_PARAMS, "unsupported replayFrom: only {'type': 'start'}")
    assert request.session_id is not None  # the reader requires it
    if replay_from is None:
        answer = await agent.resume_session(request)
    else:
        with client.replaying(request.session_id):
            answer = await agent.load_session(request)
        await client.send_plain_update(request.session_id, replay_complete())
    # A resumed session is idle here: its turns ran on the connection that is gone.
    await client.send_state(request.session_id, "idle")
    return answer


def _from_start(replay_from: Any) -> bool:
    return isinstance(replay_from, dict) and replay_from.get("type") == "start"


# --- session/request_permission -----------------------------------------------------------


def permission_request(
    session_id: str, question: PermissionQuestion, options: list[tuple[str, str]]
) -> dict[str, Any]:
    """v2's `session/request_permission`: a `title`, and the tool call as its `subject`
    (applied by the client like a `tool_call_update` before it asks)."""
    tool_call = {
        key: value
        for key, value in {
            "toolCallId": question.tool_call_id,
            "title": question.title,
            "kind": question.kind,
            "rawInput": question.raw_input,
            "name": question.name,
            "content": tool_contents(question.content) or None,
            "locations": locations(question.locations) or None,
        }.items()
        if value is not None
    }
    return {
        "sessionId": session_id,
        "title": question.title,
        "subject": {"type": "tool_call", "toolCall": tool_call},
        "options": [{"optionId": kind, "name": name, "kind": kind} for kind, name in options],
    }
