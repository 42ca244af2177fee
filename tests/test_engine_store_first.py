"""The turn keeps a message in memory only once the session stored it: a message the store
refuses (it cannot be encoded, the disk is full) must not reach the next model request while
a reload would not show it."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_engine import Host, ScriptedProvider, make_turn, user

from acp_agent.messages import Message, Stop, TextDelta

pytestmark = pytest.mark.anyio


class RefusingHost(Host):
    """A session whose store refuses the n-th message it is handed."""

    def __init__(self, refuse_at: int) -> None:
        super().__init__()
        self._refuse_at = refuse_at

    def keep(self, message: Message, message_id: str | None) -> None:
        if len(self.kept) == self._refuse_at:
            raise OSError("No space left on device")
        super().keep(message, message_id)


async def test_a_prompt_the_store_refuses_does_not_join_the_history(tmp_path: Path) -> None:
    provider = ScriptedProvider([TextDelta("never"), Stop("end_turn")])
    host = RefusingHost(refuse_at=0)
    turn = make_turn(provider, host, tmp_path)

    with pytest.raises(OSError, match="No space"):
        await turn.run(user("hi"))

    assert turn.history == [] and provider.requests == []


async def test_a_reply_the_store_refuses_leaves_memory_as_the_store_has_it(
    tmp_path: Path,
) -> None:
    provider = ScriptedProvider([TextDelta("hello"), Stop("end_turn")])
    host = RefusingHost(refuse_at=1)
    turn = make_turn(provider, host, tmp_path)

    with pytest.raises(OSError, match="No space"):
        await turn.run(user("hi"))

    assert turn.history == [message for message, _ in host.kept] == [user("hi")]
