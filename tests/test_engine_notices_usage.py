"""What a turn tells the user besides the reply: retry waits as notices, and a context
figure that always describes what the next request would carry (after a cancel and after
a failed call too)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from test_engine import HANG, Host, ScriptedProvider, call, make_turn, user

from acp_agent.engine import Turn
from acp_agent.messages import (
    Message,
    Notice,
    RetryNotice,
    Stop,
    TextDelta,
    ThoughtChunk,
    Usage,
    UsageUpdated,
)
from acp_agent.providers import ProviderError
from acp_agent.providers.usage import TokenCounter, UsageMeter

pytestmark = pytest.mark.anyio


class WordEncoder:
    def encode_ordinary(self, text: str) -> list[int]:
        return list(range(len(text.split())))


def counted_turn(provider: ScriptedProvider, host: Host, tmp_path: Path) -> Turn:
    turn = make_turn(provider, host, tmp_path)
    turn.meter = UsageMeter(counter=TokenCounter(WordEncoder()))
    return turn


def tokens(*messages: Message) -> int:
    counter = TokenCounter(WordEncoder())
    return sum(counter.count_message(m) for m in messages)


async def test_each_retry_wait_is_a_notice_of_its_own_and_not_a_thought(tmp_path: Path) -> None:
    provider = ScriptedProvider(
        [
            RetryNotice("scripted", "HTTP 500: overloaded", 0.25, 1, 3),
            RetryNotice("scripted", "HTTP 500: overloaded", 1.5, 2, 3),
            TextDelta("Hello."),
            Stop("end_turn"),
        ]
    )
    host = Host()

    assert await make_turn(provider, host, tmp_path).run(user("hi")) == "end_turn"

    assert host.of_type(Notice) == [
        Notice("scripted: HTTP 500: overloaded", "retrying in 0.2s (attempt 2 of 3)", "warning"),
        Notice("scripted: HTTP 500: overloaded", "retrying in 1.5s (attempt 3 of 3)", "warning"),
    ]
    assert host.of_type(ThoughtChunk) == []


async def test_after_a_successful_call_the_figure_is_the_reported_one(tmp_path: Path) -> None:
    provider = ScriptedProvider(
        [TextDelta("x"), Usage(input_tokens=120, output_tokens=30), Stop("end_turn")]
    )
    host = Host()

    await counted_turn(provider, host, tmp_path).run(user("go"))

    assert [u.used for u in host.of_type(UsageUpdated)] == [150]


async def test_a_cancel_mid_reply_shows_the_last_figure_plus_what_the_turn_added(
    tmp_path: Path,
) -> None:
    provider = ScriptedProvider(
        [call("c1", "add", a=1, b=2), Usage(input_tokens=400, output_tokens=20), Stop("tool_use")],
        [TextDelta("partial "), TextDelta("answer"), HANG],
    )
    host = Host()
    turn = counted_turn(provider, host, tmp_path)
    with anyio.fail_after(5), anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(turn.run, user("go"))
            await host.chunk_seen.wait()
            await anyio.wait_all_tasks_blocked()
            scope.cancel()

    assert [m.role for m in turn.history] == ["user", "assistant", "tool", "assistant"]
    tool_results, partial = turn.history[2], turn.history[3]
    assert partial.text == "partial answer"
    figures = [u.used for u in host.of_type(UsageUpdated)]
    # The first call's report; then that plus the tool results and the partial reply: the
    # history the next request carries, with no jump to a figure of another kind.
    assert figures == [420, 420 + tokens(tool_results, partial)]


async def test_a_cancel_during_a_tool_shows_the_cancelled_results_too(tmp_path: Path) -> None:
    provider = ScriptedProvider(
        [call("c1", "wait"), Usage(input_tokens=400, output_tokens=20), Stop("tool_use")],
    )
    host = Host("allow_once")
    turn = counted_turn(provider, host, tmp_path)
    with anyio.fail_after(5), anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(turn.run, user("go"))
            await host.running("c1").wait()
            scope.cancel()

    assert [m.role for m in turn.history] == ["user", "assistant", "tool"]
    figures = [u.used for u in host.of_type(UsageUpdated)]
    assert figures == [420, 420 + tokens(turn.history[2])]


async def test_a_failed_call_shows_the_history_as_it_stands_not_its_own_figure(
    tmp_path: Path,
) -> None:
    provider = ScriptedProvider(
        [call("c1", "add", a=1, b=2), Usage(input_tokens=400, output_tokens=20), Stop("tool_use")],
        [ProviderError("scripted", "HTTP 500 (gave up after 3 attempts)")],
    )
    host = Host()
    turn = counted_turn(provider, host, tmp_path)

    with pytest.raises(ProviderError):
        await turn.run(user("go"))

    figures = [u.used for u in host.of_type(UsageUpdated)]
    assert figures == [420, 420 + tokens(turn.history[2])]
