"""Compaction (`sessions.compaction`): when the next request passes the threshold, where the
conversation is cut, the summary request, and what a compaction leaves in the session, its
log and the turn that runs."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio.lowlevel
import pytest

from acp_agent.config import Prices
from acp_agent.engine import ModelSettings, ModelSetup, Turn
from acp_agent.messages import (
    CompactionFinished,
    CompactionStarted,
    CompactionSummaryChunk,
    ImagePart,
    Message,
    MessageChunk,
    Stop,
    StreamEvent,
    TextDelta,
    TextPart,
    ThinkingPart,
    ToolCallEnd,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
    TurnEvent,
    Usage,
    UsageUpdated,
)
from acp_agent.providers import ContextWindowError, ModelRequest, ProviderUnavailable
from acp_agent.providers.usage import TokenCounter, UsageMeter
from acp_agent.sessions import Session
from acp_agent.sessions.compaction import (
    CLIPPED_RESULT_CHARS,
    SUMMARY_INSTRUCTION,
    SUMMARY_OPENING,
    CompactionPolicy,
    Compactor,
    TurnCompaction,
    find_cut,
    over_threshold,
    request_tokens,
    summary_request,
    summary_text,
)
from acp_agent.sessions.records import (
    CompactionRecord,
    EventRecord,
    MessageRecord,
    SessionHeader,
    UsageRecord,
)
from acp_agent.sessions.restore import replay, restore
from acp_agent.sessions.store import SessionLog, SessionStore
from acp_agent.tools import Decision, PermissionQuestion, Tool, ToolContext, ToolOutcome, ToolParams

pytestmark = pytest.mark.anyio

SYSTEM = "You are a test."
TOOLS = (ToolSpec("read", "Read a file.", {"type": "object"}),)
WINDOW = 10_000


def user(text: str) -> Message:
    return Message("user", [TextPart(text)])


def assistant(text: str, *calls: ToolCallPart) -> Message:
    return Message("assistant", [TextPart(text), *calls])


def results(*call_ids: str) -> Message:
    return Message("tool", [ToolResultPart(i, (TextPart(f"result of {i}"),)) for i in call_ids])


def request(messages: Sequence[Message]) -> ModelRequest:
    return ModelRequest("m", SYSTEM, list(messages), TOOLS)


def meter() -> UsageMeter:
    return UsageMeter(counter=TokenCounter(encoding=None))


def three_turns() -> list[Message]:
    """Three turns, the second with a tool round: openers at 0, 2 and 6."""
    return [
        user("first"),
        assistant("one"),
        user("second"),
        assistant("reading", ToolCallPart("c1", "read", {"path": "/a"})),
        results("c1"),
        assistant("two"),
        user("third"),
        assistant("three"),
    ]


# --- when ----------------------------------------------------------------------------------


def test_a_request_at_the_threshold_is_left_alone_and_one_token_more_is_compacted() -> None:
    tokens = request_tokens(meter(), request([user("hello"), assistant("hi"), user("go on")]))

    assert not over_threshold(tokens, 2 * tokens, 0.5)
    assert over_threshold(tokens, 2 * tokens - 2, 0.5)


def test_the_pending_prompt_counts_a_history_under_the_threshold_goes_over_with_it() -> None:
    history = [user("hello"), assistant("hi")]
    window = 2 * request_tokens(meter(), request(history))
    prompt = user("x" * 4 * window)

    assert not over_threshold(request_tokens(meter(), request(history)), window, 0.5)
    assert over_threshold(request_tokens(meter(), request([*history, prompt])), window, 0.5)


def test_the_prompt_alone_can_pass_the_threshold_of_an_empty_conversation() -> None:
    window = 1_000
    prompt = user("word " * 800)  # 4,000 characters: about 1,000 tokens

    assert over_threshold(request_tokens(meter(), request([prompt])), window, 0.8)


def test_the_reported_size_of_the_last_call_plus_what_was_added_since_is_used() -> None:
    gauge = meter()
    history = [user("hello"), assistant("hi")]
    gauge.after_call(history, Usage(input_tokens=900, output_tokens=100))
    prompt = user("and now?")

    tokens = request_tokens(gauge, request([*history, prompt]))

    assert tokens == 1_000 + gauge.counter.count_message(prompt)
    assert tokens > gauge.counter.count_request(SYSTEM, [*history, prompt], TOOLS)


def test_without_a_report_the_whole_request_is_estimated_system_and_tools_included() -> None:
    gauge = meter()
    history = [user("hello"), assistant("hi")]
    gauge.after_call(history, None, system=SYSTEM)  # the server reported nothing
    messages = [*history, user("and now?")]

    tokens = request_tokens(gauge, request(messages))

    assert tokens == gauge.counter.count_request(SYSTEM, messages, TOOLS)
    assert tokens > gauge.counter.count_request(SYSTEM, messages)


def test_a_report_on_a_longer_history_than_the_one_sent_is_not_trusted() -> None:
    gauge = meter()
    long = [user("a"), assistant("b"), user("c"), assistant("d")]
    gauge.after_call(long, Usage(input_tokens=50_000))
    shorter = [user("summary"), user("c"), assistant("d")]

    tokens = request_tokens(gauge, request(shorter))

    assert tokens == gauge.counter.count_request(SYSTEM, shorter, TOOLS)


# --- where to cut --------------------------------------------------------------------------


def test_the_cut_keeps_the_last_two_turns_whole_with_their_tool_calls_and_results() -> None:
    history = three_turns()

    cut = find_cut(history, start=0, keep_turns=2, least=1)

    assert cut == 2
    roles = ["user", "assistant", "tool", "assistant", "user", "assistant"]
    assert [m.role for m in history[cut:]] == roles


def test_the_cut_falls_on_a_user_message_never_between_a_tool_call_and_its_result() -> None:
    history = three_turns()
    for keep in (1, 2, 3):
        cut = find_cut(history, 0, keep, least=1)
        assert cut is not None and history[cut].role == "user"
        assert history[cut - 1].role != "assistant" or not history[cut - 1].tool_calls


def test_when_the_kept_turns_are_all_there_is_fewer_are_kept_down_to_the_running_one() -> None:
    history = [
        user("first"),
        assistant("one"),
        user("running"),
        assistant("calling", ToolCallPart("c1", "read", {})),
        results("c1"),
    ]

    assert find_cut(history, 0, keep_turns=3, least=1) == 2


def test_the_running_turn_alone_cannot_be_cut_and_says_so_with_none() -> None:
    history = [
        user("running"),
        assistant("calling", ToolCallPart("c1", "read", {})),
        results("c1"),
        assistant("calling", ToolCallPart("c2", "read", {})),
        results("c2"),
    ]

    assert find_cut(history, 0, keep_turns=2, least=1) is None


def test_an_earlier_summary_is_no_turn_and_is_summarised_again_with_what_follows() -> None:
    history = [user(f"{SUMMARY_OPENING}\n\nolder"), user("second"), assistant("two")]
    history += [user("running")]

    assert find_cut(history, start=1, keep_turns=2, least=1) == 3
    assert find_cut(history[:1] + history[3:], start=1, keep_turns=2, least=1) is None


def test_between_turns_everything_can_be_summarised_when_nothing_older_is_left() -> None:
    history = [user("only"), assistant("turn")]

    assert find_cut(history, 0, keep_turns=2, least=0) == 2
    assert find_cut([user("summary")], start=1, keep_turns=2, least=0) is None


# --- the summary request -------------------------------------------------------------------


def test_the_summary_request_offers_no_tools_and_writes_tool_calls_and_results_as_text() -> None:
    older = [
        Message("user", [TextPart("look"), ImagePart("AAAA", "image/png")]),
        Message(
            "assistant",
            [
                ThinkingPart("secret", {"signature": "sig"}),
                TextPart("reading"),
                ToolCallPart("c1", "read_file", {"path": "/a.py"}),
            ],
        ),
        Message(
            "tool", [ToolResultPart("c1", (TextPart("y" * (CLIPPED_RESULT_CHARS + 10)),), True)]
        ),
        user("cancelled before a reply"),
    ]
    settings = ModelSettings("m", SYSTEM, WINDOW, max_output_tokens=500, thought_level="high")

    summary = summary_request(settings, older, focus="the parser")

    assert summary.tools == ()
    assert summary.system != SYSTEM
    assert (summary.model, summary.max_output_tokens, summary.thought_level) == ("m", 500, "low")
    assert [m.role for m in summary.messages] == ["user", "assistant", "user"]
    assert all(isinstance(p, TextPart) for m in summary.messages for p in m.parts)
    assert summary.messages[0].text == "look\n\n[image: image/png]"
    reply = summary.messages[1].text
    assert "secret" not in reply
    assert '[called read_file {"path": "/a.py"}]' in reply
    assert (
        "[read_file failed:\n" + "y" * CLIPPED_RESULT_CHARS + "\n[... 10 more characters]]" in reply
    )
    last = summary.messages[2].text
    assert last.startswith("cancelled before a reply\n\n" + SUMMARY_INSTRUCTION)
    assert last.endswith("focus on: the parser")


# --- compacting a session ------------------------------------------------------------------

HANG = "hang"
"""In a scripted reply: block here until cancelled."""

Reply = Sequence[StreamEvent | Exception | str]


class ScriptedProvider:
    """Answers each call with the next prepared reply; keeps a copy of every request."""

    name = "scripted"

    def __init__(self, *replies: Reply) -> None:
        self._replies = list(replies)
        self.requests: list[ModelRequest] = []

    @asynccontextmanager
    async def stream(self, request: ModelRequest) -> AsyncIterator[AsyncIterator[StreamEvent]]:
        self.requests.append(copy.deepcopy(request))
        assert self._replies, "the model was called more often than scripted"
        reply = self._replies.pop(0)
        if reply and isinstance(reply[0], ContextWindowError):
            raise reply[0]
        yield self._events(reply)

    async def _events(self, reply: Reply) -> AsyncIterator[StreamEvent]:
        for item in reply:
            await anyio.lowlevel.checkpoint()
            if item == HANG:
                await anyio.sleep_forever()
            elif isinstance(item, Exception):
                raise item
            else:
                assert not isinstance(item, str)
                yield item


def summary_reply(*pieces: str) -> Reply:
    return [
        *(TextDelta(p) for p in pieces),
        Usage(input_tokens=40, output_tokens=8),
        Stop("end_turn"),
    ]


class Shown:
    def __init__(self) -> None:
        self.events: list[TurnEvent] = []
        self.cancel_on_chunk: anyio.CancelScope | None = None

    async def __call__(self, event: TurnEvent) -> None:
        self.events.append(event)
        if isinstance(event, CompactionSummaryChunk) and self.cancel_on_chunk is not None:
            self.cancel_on_chunk.cancel()

    def of_type(self, kind: type) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]


class Fixture:
    """A stored session with `history` written to its log as a turn would write it."""

    def __init__(self, tmp_path: Path, history: list[Message], *replies: Reply) -> None:
        self.store = SessionStore(tmp_path / "state")
        self.log: SessionLog = self.store.create(SessionHeader("s1", str(tmp_path)))
        self.session = Session("s1", tmp_path, (tmp_path,), "scripted/m")
        self.session.usage = meter()
        for message in history:
            self.session.history.append(message)
            self.log.append(MessageRecord(message))
        self.provider = ScriptedProvider(*replies)
        self.setup = ModelSetup(self.provider, ModelSettings("m", SYSTEM, WINDOW))
        self.shown = Shown()
        self.compactor = Compactor(
            self.session, self.log, CompactionPolicy(threshold=0.5, keep_turns=2), self.shown
        )

    def keep(self, message: Message) -> None:
        """What a turn does with a new message: into the working context and the log."""
        self.session.history.append(message)
        self.log.append(MessageRecord(message))

    async def compact(self, least: int = 1) -> str:
        return await self.compactor.compact(
            self.session.history, self.setup, system=SYSTEM, tools=TOOLS, least=least
        )

    def records(self) -> list[Any]:
        return self.store.read("s1")


async def test_a_compaction_replaces_the_older_turns_by_one_summary_and_logs_how_many(
    tmp_path: Path,
) -> None:
    history = three_turns()
    fx = Fixture(tmp_path, list(history), summary_reply("Goals: ", "fix it."))
    working = fx.session.history

    assert await fx.compact() == "compacted"

    assert fx.session.history is working  # changed in place: the turn's list
    assert working == [
        Message("user", [TextPart(f"{SUMMARY_OPENING}\n\nGoals: fix it.")]),
        *history[2:],
    ]
    assert fx.session.summarised == 2
    [compaction] = [r for r in fx.records() if isinstance(r, CompactionRecord)]
    assert (compaction.replaced, compaction.summary) == (2, working[0])
    assert [r.message for r in fx.records() if isinstance(r, MessageRecord)] == history
    assert restore(fx.records()).history == working


async def test_the_user_sees_it_start_stream_and_finish_and_the_context_shrink(
    tmp_path: Path,
) -> None:
    fx = Fixture(tmp_path, three_turns(), summary_reply("Goals: ", "fix it."))

    await fx.compact()

    [started] = fx.shown.of_type(CompactionStarted)
    chunks = fx.shown.of_type(CompactionSummaryChunk)
    [finished] = fx.shown.of_type(CompactionFinished)
    assert [c.text for c in chunks] == ["Goals: ", "fix it."]
    assert {c.compaction_id for c in chunks} == {started.compaction_id}
    assert finished == CompactionFinished(
        started.compaction_id, "completed", summary="Goals: fix it.", summarised=2
    )
    [usage] = fx.shown.of_type(UsageUpdated)
    expected = fx.session.usage.counter.count_request(SYSTEM, fx.session.history, TOOLS)
    assert (usage.used, usage.size) == (expected, WINDOW)
    assert fx.shown.events.index(finished) < fx.shown.events.index(usage)
    # What a loaded session shows again: the finished compaction, and the context after it.
    assert finished in replay(fx.records())
    assert [r for r in fx.records() if isinstance(r, UsageRecord)][-1].used == expected


async def test_the_summary_call_offers_no_tools_and_its_cost_is_charged(tmp_path: Path) -> None:
    fx = Fixture(tmp_path, three_turns(), summary_reply("S."))
    fx.session.usage.prices = Prices(input=1.0, output=10.0)

    await fx.compact()

    assert fx.session.usage.cost_usd == pytest.approx((40 + 8 * 10) / 1_000_000)

    [summary_call] = fx.provider.requests
    assert summary_call.tools == ()
    assert summary_call.messages[-1].text.endswith(SUMMARY_INSTRUCTION)
    assert "first" in summary_call.messages[0].text
    assert "second" not in "".join(m.text for m in summary_call.messages)


async def test_a_second_compaction_counts_the_messages_of_the_full_history_it_replaces(
    tmp_path: Path,
) -> None:
    fx = Fixture(tmp_path, three_turns(), summary_reply("S1."), summary_reply("S2."))
    await fx.compact()
    fx.keep(user("fourth"))
    fx.keep(assistant("four"))
    fx.keep(user("fifth"))

    assert await fx.compact() == "compacted"

    # The full history: 8 + 3 messages; the summary now stands for all but the last 3.
    assert fx.session.summarised == 8
    assert fx.session.history[1:] == [user("fourth"), assistant("four"), user("fifth")]
    second_call = fx.provider.requests[1]
    assert second_call.messages[0].text.startswith(f"{SUMMARY_OPENING}\n\nS1.")
    assert restore(fx.records()).history == fx.session.history
    assert restore(fx.records()).summarised == 8


async def test_a_failed_summary_leaves_the_conversation_as_it_was_and_says_why(
    tmp_path: Path,
) -> None:
    history = three_turns()
    fx = Fixture(tmp_path, list(history), [ProviderUnavailable("scripted", "overloaded")])

    assert await fx.compact() == "failed"

    assert fx.session.history == history
    assert fx.session.summarised == 0
    [finished] = fx.shown.of_type(CompactionFinished)
    assert (finished.status, finished.error) == ("failed", "scripted: overloaded")
    assert not [r for r in fx.records() if isinstance(r, CompactionRecord)]
    assert EventRecord(finished) in fx.records()


async def test_a_compaction_cancelled_with_its_turn_is_reported_and_changes_nothing(
    tmp_path: Path,
) -> None:
    history = three_turns()
    fx = Fixture(tmp_path, list(history), [TextDelta("half a summ"), HANG])

    with anyio.CancelScope() as scope:
        fx.shown.cancel_on_chunk = scope
        await fx.compact()

    assert scope.cancelled_caught
    assert fx.session.history == history
    [finished] = fx.shown.of_type(CompactionFinished)
    assert finished.status == "cancelled"
    assert EventRecord(finished) in fx.records()
    assert not [r for r in fx.records() if isinstance(r, CompactionRecord)]


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        ([Stop("refusal")], "the model declined to summarise the conversation"),
        ([TextDelta("  "), Stop("end_turn")], "the model's summary was empty"),
    ],
)
async def test_a_refusal_or_an_empty_summary_fails_the_compaction(
    tmp_path: Path, reply: Reply, error: str
) -> None:
    fx = Fixture(tmp_path, three_turns(), reply)

    assert await fx.compact() == "failed"

    assert fx.shown.of_type(CompactionFinished)[0].error == error


async def test_with_only_the_running_turn_nothing_is_compacted_or_shown(tmp_path: Path) -> None:
    fx = Fixture(tmp_path, [user("running"), assistant("a", ToolCallPart("c", "read", {}))])
    fx.keep(results("c"))

    assert await fx.compact() == "nothing"

    assert fx.provider.requests == []
    assert fx.shown.events == []


async def test_summary_text_is_the_summary_without_its_opening() -> None:
    assert summary_text(Message("user", [TextPart(f"{SUMMARY_OPENING}\n\nGoals.")])) == "Goals."


# --- in a turn -----------------------------------------------------------------------------


def guard(fx: Fixture) -> TurnCompaction:
    return TurnCompaction(fx.compactor, fx.shown)


async def test_the_guard_leaves_a_request_under_the_threshold_alone(tmp_path: Path) -> None:
    fx = Fixture(tmp_path, three_turns())

    changed = await guard(fx).fit(fx.session.history, request(fx.session.history), fx.setup)

    assert not changed
    assert fx.provider.requests == []


async def test_the_guard_compacts_a_request_over_the_threshold(tmp_path: Path) -> None:
    fx = Fixture(tmp_path, three_turns(), summary_reply("S."))
    big = [*fx.session.history, user("x" * 4 * WINDOW)]
    fx.keep(big[-1])

    assert await guard(fx).fit(fx.session.history, request(big), fx.setup)

    [finished] = fx.shown.of_type(CompactionFinished)
    assert finished.share is not None and finished.share > 1
    assert fx.session.history[-1] == big[-1]


async def test_the_guard_says_once_per_turn_that_only_the_running_turn_is_left(
    tmp_path: Path,
) -> None:
    fx = Fixture(tmp_path, [user("x" * 4 * WINDOW)])
    turn_guard = guard(fx)

    for _ in range(2):
        assert not await turn_guard.fit(fx.session.history, request(fx.session.history), fx.setup)

    [note] = fx.shown.of_type(MessageChunk)
    assert "only the running turn is left" in note.text
    assert fx.provider.requests == []


async def test_after_a_failed_compaction_the_turn_goes_on_without_trying_again(
    tmp_path: Path,
) -> None:
    fx = Fixture(tmp_path, three_turns(), [ProviderUnavailable("scripted", "down")])
    fx.keep(user("x" * 4 * WINDOW))
    turn_guard = guard(fx)

    assert not await turn_guard.fit(fx.session.history, request(fx.session.history), fx.setup)
    assert not await turn_guard.fit(fx.session.history, request(fx.session.history), fx.setup)

    assert len(fx.provider.requests) == 1


async def test_an_overflow_compacts_even_under_the_threshold(tmp_path: Path) -> None:
    fx = Fixture(tmp_path, three_turns(), summary_reply("S."))
    overflow = ContextWindowError("scripted", "prompt is too long")

    assert await guard(fx).fit(fx.session.history, request(fx.session.history), fx.setup, overflow)

    assert fx.shown.of_type(CompactionFinished)[0].share is None


class BigParams(ToolParams):
    pass


class BigRead(Tool[BigParams]):
    name = "read"
    kind = "read"
    description = "Read a big file."
    params_model = BigParams

    async def run(self, params: BigParams, ctx: ToolContext) -> ToolOutcome:
        return ToolOutcome(model_text="z" * 4 * WINDOW)


class Host:
    def __init__(self, fx: Fixture) -> None:
        self.fx = fx

    async def emit(self, event: TurnEvent) -> None:
        await self.fx.shown(event)

    async def ask_permission(self, question: PermissionQuestion) -> Decision:
        return "allow_once"

    def keep(self, message: Message, message_id: str | None) -> None:
        self.fx.log.append(MessageRecord(message, message_id))


class Choices:
    def __init__(self, fx: Fixture) -> None:
        self.mode = "bypass"
        self.fx = fx

    async def model_setup(self) -> ModelSetup:
        return self.fx.setup


class NoEditor:
    can_read_files = False
    can_write_files = False
    can_run_terminals = False


async def test_mid_turn_a_big_tool_result_compacts_the_older_turns_before_the_next_request(
    tmp_path: Path,
) -> None:
    fx = Fixture(
        tmp_path,
        three_turns(),
        [ToolCallEnd(ToolCallPart("r1", "read", {})), Stop("tool_use")],
        summary_reply("S."),
        [TextDelta("done"), Stop("end_turn")],
    )
    turn = Turn(
        choices=Choices(fx),  # type: ignore[arg-type]
        history=fx.session.history,
        tools={"read": BigRead()},
        context=ToolContext(
            session_id="s1",
            cwd=tmp_path,
            roots=(tmp_path,),
            editor=NoEditor(),  # type: ignore[arg-type]
        ),
        host=Host(fx),
        meter=fx.session.usage,
        context_guard=guard(fx),
    )
    prompt = user("read the big file")

    assert await turn.run(prompt) == "end_turn"

    first, summary_call, after = fx.provider.requests
    assert first.messages[-1] == prompt
    assert summary_call.tools == ()
    running = [prompt, *after.messages[-2:]]
    assert after.messages[0].text.startswith(SUMMARY_OPENING)
    # The previous turn (kept: two turns) and the running one, its tool call answered.
    assert after.messages[1:] == [*three_turns()[6:], *running]
    assert after.messages[-2].tool_calls and after.messages[-1].role == "tool"
    full = [r.message for r in fx.records() if isinstance(r, MessageRecord)]
    assert full == [*three_turns(), *running, fx.session.history[-1]]
    assert restore(fx.records()).history == fx.session.history
