"""The prompt turn (`engine.Turn`) driven by a scripted provider, tools and host."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from acp_agent.engine import ModelSettings, ModelSetup, Turn
from acp_agent.messages import (
    DiffContent,
    Location,
    Message,
    MessageChunk,
    Notice,
    RetryNotice,
    Stop,
    StreamEvent,
    TextDelta,
    TextPart,
    ThinkingDelta,
    ThinkingPart,
    ThoughtChunk,
    ToolCallArgsDelta,
    ToolCallEnd,
    ToolCallPart,
    ToolCallStart,
    ToolCallStarted,
    ToolCallUpdated,
    ToolContent,
    ToolResultPart,
    TurnEvent,
    Usage,
    UsageUpdated,
)
from acp_agent.providers import ContextWindowError, ModelRequest, ProviderError
from acp_agent.tools import (
    Decision,
    PermissionQuestion,
    Tool,
    ToolContext,
    ToolFailed,
    ToolOutcome,
    ToolParams,
)
from acp_agent.tools.permissions import PermissionMemory, PermissionMode

pytestmark = pytest.mark.anyio

HANG = "hang"
"""In a scripted reply: block here until cancelled."""

Reply = Sequence[StreamEvent | Exception | str]


class ScriptedProvider:
    """Answers each model call with the next prepared list of neutral events."""

    name = "scripted"

    def __init__(self, *replies: Reply, fail_on_enter: Exception | None = None) -> None:
        self._replies = list(replies)
        self._fail_on_enter = fail_on_enter
        self.requests: list[ModelRequest] = []

    @asynccontextmanager
    async def stream(self, request: ModelRequest) -> AsyncIterator[AsyncIterator[StreamEvent]]:
        # Snapshot: the engine keeps appending to the messages it sent.
        self.requests.append(copy.deepcopy(request))
        if self._fail_on_enter is not None:
            raise self._fail_on_enter
        assert self._replies, "the model was called more often than scripted"
        yield self._events(self._replies.pop(0))

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


class Host:
    """Records turn events; answers permission questions from a list (default: allow once)."""

    def __init__(self, *decisions: Decision) -> None:
        self.events: list[TurnEvent] = []
        self.questions: list[PermissionQuestion] = []
        self._decisions = list(decisions)
        self.chunk_seen = anyio.Event()
        self.in_progress: dict[str, anyio.Event] = {}
        self.kept: list[tuple[Message, str | None]] = []
        """What the session would store, in order."""

    async def emit(self, event: TurnEvent) -> None:
        self.events.append(event)
        if isinstance(event, MessageChunk):
            self.chunk_seen.set()
        if isinstance(event, ToolCallUpdated) and event.status == "in_progress":
            self.running(event.id).set()

    def keep(self, message: Message, message_id: str | None) -> None:
        self.kept.append((message, message_id))

    def running(self, call_id: str) -> anyio.Event:
        """Set once the tool call `call_id` starts running."""
        return self.in_progress.setdefault(call_id, anyio.Event())

    async def ask_permission(self, question: PermissionQuestion) -> Decision:
        self.questions.append(question)
        return self._decisions.pop(0) if self._decisions else "allow_once"

    def of_type(self, kind: type) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]


class NoEditor:
    can_read_files = False
    can_write_files = False
    can_run_terminals = False


class AddParams(ToolParams):
    a: int
    b: int


class Add(Tool[AddParams]):
    name = "add"
    kind = "other"
    description = "Add two integers."
    params_model = AddParams

    async def run(self, params: AddParams, ctx: ToolContext) -> ToolOutcome:
        return ToolOutcome(model_text=str(params.a + params.b), display=(TextPart("sum"),))


class NoteParams(ToolParams):
    text: str


class WriteNote(Tool[NoteParams]):
    """A tool with a side effect: it always asks permission."""

    name = "write_note"
    kind = "edit"
    description = "Write a note."
    params_model = NoteParams
    read_only = False

    async def run(self, params: NoteParams, ctx: ToolContext) -> ToolOutcome:
        return ToolOutcome(model_text=f"wrote {params.text}")


class WaitParams(ToolParams):
    pass


class WaitForever(Tool[WaitParams]):
    name = "wait"
    kind = "execute"
    description = "Never finishes."
    params_model = WaitParams

    async def run(self, params: WaitParams, ctx: ToolContext) -> ToolOutcome:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")


def call(call_id: str, name: str, **arguments: Any) -> ToolCallEnd:
    return ToolCallEnd(ToolCallPart(call_id, name, arguments))


class Choices:
    """The session's choices as the engine reads them; tests change them mid-turn."""

    def __init__(self, provider: Any, mode: PermissionMode = "ask") -> None:
        self.provider = provider
        self.mode = mode
        self.settings = ModelSettings(
            model="scripted-model", system_prompt="You are a test.", context_window=1000
        )

    async def model_setup(self) -> ModelSetup:
        return ModelSetup(self.provider, self.settings)


def make_turn(
    provider: ScriptedProvider,
    host: Host,
    tmp_path: Path,
    *,
    max_turn_requests: int = 10,
    history: list[Message] | None = None,
    memory: PermissionMemory | None = None,
    choices: Choices | None = None,
    extra_tools: Sequence[Tool[Any]] = (),
) -> Turn:
    offered: list[Tool[Any]] = [Add(), WriteNote(), WaitForever(), *extra_tools]
    tools = {t.name: t for t in offered}
    return Turn(
        choices=Choices(provider) if choices is None else choices,
        max_turn_requests=max_turn_requests,
        history=[] if history is None else history,
        tools=tools,
        context=ToolContext(
            session_id="sess_test",
            cwd=tmp_path,
            roots=(tmp_path,),
            editor=NoEditor(),  # type: ignore[arg-type]
        ),
        host=host,
        memory=PermissionMemory() if memory is None else memory,
    )


def user(text: str) -> Message:
    return Message("user", [TextPart(text)])


def assert_history_valid(history: list[Message]) -> None:
    """What vendors accept: every tool call answered exactly once, right after its message."""
    for index, message in enumerate(history):
        results = [p for p in message.parts if isinstance(p, ToolResultPart)]
        if message.role != "tool":
            assert not results, f"tool results outside a tool message at {index}"
        if message.role == "tool":
            assert index > 0, "a tool message cannot open the history"
            assert history[index - 1].role == "assistant", f"orphan tool message at {index}"
        calls = message.tool_calls
        if message.role == "assistant" and calls:
            assert index + 1 < len(history), f"unanswered tool calls at {index}"
            following = history[index + 1]
            assert following.role == "tool", f"tool calls at {index} not followed by results"
            answered = [p.tool_call_id for p in following.parts if isinstance(p, ToolResultPart)]
            assert sorted(answered) == sorted(c.id for c in calls)


def tool_results(message: Message) -> list[ToolResultPart]:
    return [p for p in message.parts if isinstance(p, ToolResultPart)]


# --- the loop --------------------------------------------------------------------------


async def test_a_plain_reply_ends_the_turn_with_end_turn(tmp_path: Path) -> None:
    provider = ScriptedProvider([TextDelta("Hel"), TextDelta("lo."), Stop("end_turn")])
    host = Host()
    turn = make_turn(provider, host, tmp_path)
    assert await turn.run(user("hi")) == "end_turn"
    assert [e.text for e in host.of_type(MessageChunk)] == ["Hel", "lo."]
    assert [m.role for m in turn.history] == ["user", "assistant"]
    assert turn.history[1].parts == [TextPart("Hello.")]


async def test_the_model_request_carries_model_system_history_and_tool_specs(
    tmp_path: Path,
) -> None:
    provider = ScriptedProvider([Stop("end_turn")])
    earlier = [user("before"), Message("assistant", [TextPart("earlier answer")])]
    turn = make_turn(provider, Host(), tmp_path, history=earlier)
    await turn.run(user("now"))
    [request] = provider.requests
    assert request.model == "scripted-model"
    assert request.system == "You are a test."
    assert [m.text for m in request.messages] == ["before", "earlier answer", "now"]
    specs = {spec.name: spec for spec in request.tools}
    assert set(specs) == {"add", "write_note", "wait"}
    assert specs["add"].parameters["properties"].keys() == {"a", "b"}


async def test_the_turn_loops_model_tool_model_until_end_turn(tmp_path: Path) -> None:
    provider = ScriptedProvider(
        [TextDelta("Adding."), call("c1", "add", a=2, b=3), Stop("tool_use")],
        [call("c2", "add", a=5, b=10), Stop("tool_use")],
        [TextDelta("It is 15."), Stop("end_turn")],
    )
    host = Host()
    turn = make_turn(provider, host, tmp_path)
    assert await turn.run(user("add things")) == "end_turn"

    assert len(provider.requests) == 3
    second_request = provider.requests[1].messages
    assert [m.role for m in second_request] == ["user", "assistant", "tool"]
    assert tool_results(second_request[2])[0].text == "5"
    assert not tool_results(second_request[2])[0].is_error
    assert [m.role for m in turn.history] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    assert tool_results(turn.history[4])[0].text == "15"
    assert turn.history[-1].text == "It is 15."
    assert_history_valid(turn.history)

    started = host.of_type(ToolCallStarted)
    assert [(e.id, e.kind) for e in started] == [("c1", "other"), ("c2", "other")]
    finished = [e for e in host.of_type(ToolCallUpdated) if e.status == "completed"]
    assert [e.id for e in finished] == ["c1", "c2"]


async def test_several_tool_calls_in_one_reply_all_run_and_answer_in_order(
    tmp_path: Path,
) -> None:
    provider = ScriptedProvider(
        [
            ToolCallStart("c1", "add"),
            ToolCallArgsDelta("c1", '{"a": 1, "b": 1}'),
            call("c1", "add", a=1, b=1),
            call("c2", "add", a=2, b=2),
            call("c3", "add", a=3, b=3),
            Stop("tool_use"),
        ],
        [Stop("end_turn")],
    )
    turn = make_turn(provider, Host(), tmp_path)
    assert await turn.run(user("go")) == "end_turn"
    results = tool_results(turn.history[2])
    assert [(r.tool_call_id, r.text) for r in results] == [("c1", "2"), ("c2", "4"), ("c3", "6")]
    assert_history_valid(turn.history)


async def test_text_before_tool_calls_stays_before_them_in_the_assistant_message(
    tmp_path: Path,
) -> None:
    provider = ScriptedProvider(
        [call("c1", "add", a=1, b=2), TextDelta("after the call"), Stop("tool_use")],
        [Stop("end_turn")],
    )
    turn = make_turn(provider, Host(), tmp_path)
    await turn.run(user("go"))
    parts = turn.history[1].parts
    assert isinstance(parts[0], TextPart)
    assert isinstance(parts[-1], ToolCallPart)


async def test_tool_use_without_tool_calls_ends_the_turn(tmp_path: Path) -> None:
    provider = ScriptedProvider([TextDelta("nothing to call"), Stop("tool_use")])
    turn = make_turn(provider, Host(), tmp_path)
    assert await turn.run(user("go")) == "end_turn"
    assert len(provider.requests) == 1


async def test_a_stream_without_a_stop_event_ends_the_turn(tmp_path: Path) -> None:
    provider = ScriptedProvider([TextDelta("cut short")])
    turn = make_turn(provider, Host(), tmp_path)
    assert await turn.run(user("go")) == "end_turn"
    assert turn.history[-1].text == "cut short"


async def test_the_turn_stops_with_max_turn_requests_after_the_configured_limit(
    tmp_path: Path,
) -> None:
    looping = [[call(f"c{n}", "add", a=n, b=n), Stop("tool_use")] for n in range(10)]
    provider = ScriptedProvider(*looping)
    turn = make_turn(provider, Host(), tmp_path, max_turn_requests=3)
    assert await turn.run(user("loop forever")) == "max_turn_requests"
    assert len(provider.requests) == 3
    assert_history_valid(turn.history)


@pytest.mark.parametrize("reason", ["max_tokens", "refusal", "end_turn"])
async def test_the_models_stop_reason_maps_to_the_turns(tmp_path: Path, reason: Any) -> None:
    provider = ScriptedProvider([TextDelta("some text"), Stop(reason)])
    turn = make_turn(provider, Host(), tmp_path)
    assert await turn.run(user("go")) == reason
    assert len(provider.requests) == 1
    assert turn.history[-1].text == "some text"


async def test_max_tokens_after_a_tool_round_ends_the_turn(tmp_path: Path) -> None:
    provider = ScriptedProvider(
        [call("c1", "add", a=1, b=1), Stop("tool_use")],
        [TextDelta("truncat"), Stop("max_tokens")],
    )
    turn = make_turn(provider, Host(), tmp_path)
    assert await turn.run(user("go")) == "max_tokens"
    assert_history_valid(turn.history)


# --- stream events ---------------------------------------------------------------------


async def test_thinking_is_shown_as_thought_chunks_and_kept_with_its_provider_data(
    tmp_path: Path,
) -> None:
    provider = ScriptedProvider(
        [
            ThinkingDelta("Let me "),
            ThinkingDelta("think.", provider_data={"signature": "sig-1"}),
            TextDelta("Answer."),
            Stop("end_turn"),
        ]
    )
    host = Host()
    turn = make_turn(provider, host, tmp_path)
    await turn.run(user("go"))
    assert [e.text for e in host.of_type(ThoughtChunk)] == ["Let me ", "think."]
    assert turn.history[1].parts == [
        ThinkingPart("Let me think.", {"signature": "sig-1"}),
        TextPart("Answer."),
    ]


async def test_thinking_the_provider_marks_as_ending_a_block_is_kept_as_a_part_of_its_own(
    tmp_path: Path,
) -> None:
    # Keys no vendor uses: the engine goes by the provider's mark alone.
    provider = ScriptedProvider(
        [
            ThinkingDelta("First "),
            ThinkingDelta("block.", provider_data={"seal": "a"}, ends_block=True),
            ThinkingDelta("Second block.", provider_data={"seal": "b"}, ends_block=True),
            ThinkingDelta("Unsealed, ", provider_data={"note": "c"}),
            ThinkingDelta("still one."),
            TextDelta("Answer."),
            Stop("end_turn"),
        ]
    )
    turn = make_turn(provider, Host(), tmp_path)
    await turn.run(user("go"))
    assert turn.history[1].parts == [
        ThinkingPart("First block.", {"seal": "a"}),
        ThinkingPart("Second block.", {"seal": "b"}),
        ThinkingPart("Unsealed, still one.", {"note": "c"}),
        TextPart("Answer."),
    ]


async def test_usage_is_reported_against_the_context_window(tmp_path: Path) -> None:
    provider = ScriptedProvider(
        [TextDelta("x"), Usage(input_tokens=120, output_tokens=30), Stop("end_turn")]
    )
    host = Host()
    await make_turn(provider, host, tmp_path).run(user("go"))
    [usage] = host.of_type(UsageUpdated)
    assert (usage.used, usage.size) == (150, 1000)


# --- tool failures the model sees ------------------------------------------------------


async def test_an_unknown_tool_name_becomes_an_error_result_the_model_sees(
    tmp_path: Path,
) -> None:
    provider = ScriptedProvider(
        [call("c1", "delete_everything", path="/"), Stop("tool_use")],
        [TextDelta("Sorry."), Stop("end_turn")],
    )
    host = Host()
    turn = make_turn(provider, host, tmp_path)
    assert await turn.run(user("go")) == "end_turn"
    [result] = tool_results(provider.requests[1].messages[-1])
    assert result.is_error
    assert "delete_everything" in result.text
    assert "add" in result.text  # it names the tools that exist
    assert [e.id for e in host.of_type(ToolCallStarted)] == ["c1"]
    assert host.of_type(ToolCallUpdated)[-1].status == "failed"
    assert_history_valid(turn.history)


async def test_invalid_json_arguments_become_an_error_result_the_model_sees(
    tmp_path: Path,
) -> None:
    provider = ScriptedProvider(
        [
            ToolCallEnd(ToolCallPart("c1", "add", {"_invalid_json": '{"a": 1, "b": '})),
            Stop("tool_use"),
        ],
        [Stop("end_turn")],
    )
    host = Host()
    turn = make_turn(provider, host, tmp_path)
    assert await turn.run(user("go")) == "end_turn"
    [result] = tool_results(provider.requests[1].messages[-1])
    assert result.is_error
    assert "JSON" in result.text
    assert host.of_type(ToolCallUpdated)[-1].status == "failed"
    assert_history_valid(turn.history)


async def test_arguments_that_fail_the_schema_become_an_error_result_naming_the_field(
    tmp_path: Path,
) -> None:
    provider = ScriptedProvider(
        [call("c1", "add", a="one", b=2, c=3), Stop("tool_use")],
        [Stop("end_turn")],
    )
    turn = make_turn(provider, Host(), tmp_path)
    await turn.run(user("go"))
    [result] = tool_results(provider.requests[1].messages[-1])
    assert result.is_error
    assert "a" in result.text
    assert "add" in result.text


async def test_a_failed_tool_call_does_not_stop_the_others_in_the_same_reply(
    tmp_path: Path,
) -> None:
    provider = ScriptedProvider(
        [call("c1", "nope"), call("c2", "add", a=20, b=22), Stop("tool_use")],
        [Stop("end_turn")],
    )
    turn = make_turn(provider, Host(), tmp_path)
    await turn.run(user("go"))
    first, second = tool_results(turn.history[2])
    assert first.is_error
    assert (second.is_error, second.text) == (False, "42")


# --- permission ------------------------------------------------------------------------


async def test_a_side_effect_asks_permission_and_a_rejection_is_an_error_result(
    tmp_path: Path,
) -> None:
    provider = ScriptedProvider(
        [call("c1", "write_note", text="hello"), Stop("tool_use")],
        [Stop("end_turn")],
    )
    host = Host("reject_once")
    turn = make_turn(provider, host, tmp_path)
    assert await turn.run(user("go")) == "end_turn"
    [question] = host.questions
    assert (question.tool_call_id, question.kind) == ("c1", "edit")
    assert question.raw_input == {"text": "hello"}
    [result] = tool_results(turn.history[2])
    assert result.is_error
    assert "reject" in result.text
    assert host.of_type(ToolCallUpdated)[-1].status == "failed"


async def test_allow_always_is_remembered_and_not_asked_again(tmp_path: Path) -> None:
    provider = ScriptedProvider(
        [call("c1", "write_note", text="one"), Stop("tool_use")],
        [call("c2", "write_note", text="two"), Stop("tool_use")],
        [Stop("end_turn")],
    )
    host = Host("allow_always")
    remembered = PermissionMemory()
    turn = make_turn(provider, host, tmp_path, memory=remembered)
    await turn.run(user("go"))
    assert len(host.questions) == 1
    assert remembered.allowed == {"tool:write_note"}
    assert [r.text for m in turn.history for r in tool_results(m)] == ["wrote one", "wrote two"]


async def test_a_cancelled_permission_answer_ends_the_turn_cancelled_with_a_valid_history(
    tmp_path: Path,
) -> None:
    provider = ScriptedProvider(
        [call("c1", "write_note", text="x"), call("c2", "add", a=1, b=1), Stop("tool_use")],
        [Stop("end_turn")],
    )
    host = Host("cancelled")
    turn = make_turn(provider, host, tmp_path)
    try:
        stop = await turn.run(user("go"))
    except BaseException as exc:  # a stray CancelledError must not escape the test
        pytest.fail(f"turn.run raised {type(exc).__name__} instead of returning 'cancelled'")
    assert stop == "cancelled"
    assert len(provider.requests) == 1
    assert_history_valid(turn.history)
    assert host.of_type(ToolCallUpdated)[-1].status == "failed"


async def test_a_read_only_tool_inside_the_roots_asks_nothing(tmp_path: Path) -> None:
    provider = ScriptedProvider([call("c1", "add", a=1, b=1), Stop("tool_use")], [Stop("end_turn")])
    host = Host()
    await make_turn(provider, host, tmp_path).run(user("go"))
    assert host.questions == []


# --- cancellation and errors -----------------------------------------------------------


async def test_cancelling_mid_stream_keeps_the_partial_text_and_a_valid_history(
    tmp_path: Path,
) -> None:
    provider = ScriptedProvider([TextDelta("partial "), TextDelta("answer"), HANG])
    host = Host()
    turn = make_turn(provider, host, tmp_path)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:

            async def run() -> None:
                await turn.run(user("go"))
                raise AssertionError("the turn should have been cancelled")

            tg.start_soon(run)
            await host.chunk_seen.wait()
            await anyio.wait_all_tasks_blocked()
            tg.cancel_scope.cancel()
    assert [m.role for m in turn.history] == ["user", "assistant"]
    assert turn.history[1].text == "partial answer"
    assert_history_valid(turn.history)


async def test_cancelling_mid_stream_after_tool_calls_answers_every_call(
    tmp_path: Path,
) -> None:
    provider = ScriptedProvider(
        [TextDelta("calling"), call("c1", "add", a=1, b=1), call("c2", "add", a=2, b=2), HANG]
    )
    host = Host()
    turn = make_turn(provider, host, tmp_path)
    with anyio.fail_after(5), anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(turn.run, user("go"))
            await host.chunk_seen.wait()
            await anyio.wait_all_tasks_blocked()
            scope.cancel()
    assert scope.cancelled_caught
    assert [m.role for m in turn.history] == ["user", "assistant", "tool"]
    assert turn.history[1].text == "calling"
    results = tool_results(turn.history[2])
    assert [r.tool_call_id for r in results] == ["c1", "c2"]
    assert all(r.is_error for r in results)
    assert_history_valid(turn.history)


async def test_cancelling_a_running_tool_answers_it_and_the_calls_after_it(
    tmp_path: Path,
) -> None:
    provider = ScriptedProvider(
        [
            call("c1", "add", a=1, b=1),
            call("c2", "wait"),
            call("c3", "add", a=3, b=3),
            Stop("tool_use"),
        ]
    )
    host = Host()
    turn = make_turn(provider, host, tmp_path)
    with anyio.fail_after(5), anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(turn.run, user("go"))
            await host.running("c2").wait()
            await anyio.wait_all_tasks_blocked()
            scope.cancel()
    assert_history_valid(turn.history)
    results = {r.tool_call_id: r for r in tool_results(turn.history[-1])}
    assert (results["c1"].is_error, results["c1"].text) == (False, "2")
    assert results["c2"].is_error
    assert results["c3"].is_error
    updates = [e for e in host.of_type(ToolCallUpdated) if e.id == "c2"]
    assert updates[-1].status == "failed"  # the user sees the cancelled call end


async def test_a_cancelled_turn_leaves_a_history_the_next_turn_can_extend(
    tmp_path: Path,
) -> None:
    history: list[Message] = []
    first = ScriptedProvider([call("c1", "add", a=1, b=1), HANG])
    host = Host()
    with anyio.fail_after(5), anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(make_turn(first, host, tmp_path, history=history).run, user("one"))
            await anyio.wait_all_tasks_blocked()
            scope.cancel()
    second = ScriptedProvider([TextDelta("fine"), Stop("end_turn")])
    assert await make_turn(second, Host(), tmp_path, history=history).run(user("two")) == (
        "end_turn"
    )
    assert_history_valid(history)
    assert [m.role for m in second.requests[0].messages] == ["user", "assistant", "tool", "user"]


async def test_a_provider_error_mid_stream_propagates_and_the_history_stays_valid(
    tmp_path: Path,
) -> None:
    provider = ScriptedProvider(
        [TextDelta("half"), call("c1", "add", a=1, b=1), ProviderError("scripted", "stream broke")]
    )
    turn = make_turn(provider, Host(), tmp_path)
    with pytest.raises(ProviderError, match="stream broke"):
        await turn.run(user("go"))
    assert_history_valid(turn.history)
    (result,) = tool_results(turn.history[-1])
    assert "cancelled" not in result.text
    assert result.text == "Not run: the model's reply broke off (scripted: stream broke)."


async def test_a_provider_error_when_the_call_starts_propagates(tmp_path: Path) -> None:
    provider = ScriptedProvider(fail_on_enter=ProviderError("scripted", "401 unauthorized"))
    turn = make_turn(provider, Host(), tmp_path)
    with pytest.raises(ProviderError, match="401"):
        await turn.run(user("go"))
    assert_history_valid(turn.history)


async def test_a_provider_error_on_a_later_call_propagates_after_the_tools_ran(
    tmp_path: Path,
) -> None:
    provider = ScriptedProvider(
        [call("c1", "add", a=1, b=1), Stop("tool_use")],
        [ProviderError("scripted", "rate limited")],
    )
    turn = make_turn(provider, Host(), tmp_path)
    with pytest.raises(ProviderError, match="rate limited"):
        await turn.run(user("go"))
    assert tool_results(turn.history[2])[0].text == "2"
    assert_history_valid(turn.history)


# --- a reply that broke off and was asked again ------------------------------------------


async def test_a_reply_restarted_after_a_drop_keeps_one_coherent_reply_in_the_history(
    tmp_path: Path,
) -> None:
    restart = RetryNotice("scripted", "connection lost", 0.5, 1, 5, restarts_reply=True)
    provider = ScriptedProvider(
        [
            ThinkingDelta("Hmm"),
            TextDelta("Hel"),
            call("c0", "add", a=9, b=9),
            restart,
            TextDelta("Hello there."),
            Usage(input_tokens=10, output_tokens=3),
            Stop("end_turn"),
        ]
    )
    host = Host()
    turn = make_turn(provider, host, tmp_path)
    assert await turn.run(user("hi")) == "end_turn"
    assert [m.role for m in turn.history] == ["user", "assistant"]
    assert turn.history[1].parts == [TextPart("Hello there.")]
    chunks = host.of_type(MessageChunk)
    # What was streamed stays on screen, set apart from the reply that starts over.
    assert [c.text for c in chunks] == ["Hel", "\n\n", "Hello there."]
    [notice] = host.of_type(Notice)
    assert "connection lost" in notice.title and "starts over" in (notice.description or "")
    assert notice.severity == "warning"
    # Clients without notices see it in the reply it voids; the new reply is a new message.
    assert notice.message_id == chunks[0].message_id == chunks[1].message_id
    assert chunks[2].message_id != chunks[0].message_id
    assert not host.of_type(ToolCallStarted)  # the broken reply's call never ran


# --- a tool call cut off by the output limit -----------------------------------------------


async def test_a_tool_call_cut_off_by_the_output_limit_is_not_run_and_the_turn_says_why(
    tmp_path: Path,
) -> None:
    provider = ScriptedProvider(
        [TextDelta("Writing."), call("c1", "write_note", text="half a no"), Stop("max_tokens")]
    )
    host = Host()
    turn = make_turn(provider, host, tmp_path, choices=Choices(provider, mode="bypass"))
    assert await turn.run(user("go")) == "max_tokens"
    assert not host.of_type(ToolCallStarted)
    assert_history_valid(turn.history)
    (result,) = tool_results(turn.history[-1])
    assert result.is_error and "output token limit" in result.text
    assert "output token limit" in host.of_type(MessageChunk)[-1].text


# --- choices that change while a turn runs -------------------------------------------------


class SwitchingHost(Host):
    """Runs `switch` once, when the first tool call completes (the user acting mid-turn)."""

    def __init__(self, switch: Any) -> None:
        super().__init__()
        self._switch = switch

    async def emit(self, event: TurnEvent) -> None:
        await super().emit(event)
        if isinstance(event, ToolCallUpdated) and event.status == "completed" and self._switch:
            self._switch()
            self._switch = None


async def test_switching_to_read_only_mid_turn_stops_the_next_write_of_that_turn(
    tmp_path: Path,
) -> None:
    provider = ScriptedProvider(
        [call("c1", "add", a=1, b=1), Stop("tool_use")],
        [call("c2", "write_note", text="late write"), Stop("tool_use")],
        [TextDelta("ok"), Stop("end_turn")],
    )
    choices = Choices(provider, mode="bypass")
    host = SwitchingHost(lambda: setattr(choices, "mode", "read-only"))
    turn = make_turn(provider, host, tmp_path, choices=choices)
    assert await turn.run(user("go")) == "end_turn"
    second_request_tools = {spec.name for spec in provider.requests[1].tools}
    assert "write_note" not in second_request_tools
    (result,) = tool_results(turn.history[4])
    assert result.is_error and "read-only" in result.text
    assert [e.status for e in host.of_type(ToolCallUpdated) if e.id == "c2"] == ["failed"]


async def test_a_model_or_thought_level_switch_applies_from_the_next_model_request(
    tmp_path: Path,
) -> None:
    first = ScriptedProvider([call("c1", "add", a=1, b=1), Stop("tool_use")])
    second = ScriptedProvider([TextDelta("from the new model"), Stop("end_turn")])
    choices = Choices(first)

    def switch() -> None:
        choices.provider = second
        choices.settings = ModelSettings(
            model="other-model",
            system_prompt="You are a test.",
            context_window=2000,
            thought_level="high",
        )

    host = SwitchingHost(switch)
    turn = make_turn(first, host, tmp_path, choices=choices)
    assert await turn.run(user("go")) == "end_turn"
    assert len(first.requests) == 1
    [request] = second.requests
    assert (request.model, request.thought_level) == ("other-model", "high")
    assert [m.role for m in request.messages] == ["user", "assistant", "tool"]
    assert host.of_type(UsageUpdated)[-1].size == 2000


# --- the context guard (compaction) --------------------------------------------------------

SUMMARY = Message("user", [TextPart("summary of earlier turns")])


class Guard:
    """A context guard that replaces all but the running turn by `SUMMARY` when asked to:
    before requests (`before`), and after an overflow (`on_overflow`)."""

    def __init__(self, *, before: bool = False, on_overflow: bool = True) -> None:
        self.before = before
        self.on_overflow = on_overflow
        self.calls: list[tuple[list[Message], bool]] = []
        """(the messages of the request it was shown, whether the vendor refused it)"""

    async def fit(
        self,
        history: list[Message],
        request: ModelRequest,
        setup: ModelSetup,
        overflow: ContextWindowError | None = None,
    ) -> bool:
        self.calls.append((list(request.messages), overflow is not None))
        if not (self.on_overflow if overflow is not None else self.before):
            return False
        running = max(i for i, m in enumerate(history) if m.role == "user")
        history[:] = [SUMMARY, *history[running:]]
        return True


def overflow() -> ContextWindowError:
    return ContextWindowError("scripted", "prompt is too long: 210000 tokens > 200000 maximum")


def guarded_turn(provider: ScriptedProvider, host: Host, tmp_path: Path, guard: Guard) -> Turn:
    earlier = [user("earlier"), Message("assistant", [TextPart("earlier answer")])]
    turn = make_turn(provider, host, tmp_path, history=earlier)
    turn.context_guard = guard
    return turn


async def test_the_guard_sees_every_request_before_it_is_sent(tmp_path: Path) -> None:
    provider = ScriptedProvider(
        [call("c1", "add", a=1, b=2), Stop("tool_use")], [TextDelta("3"), Stop("end_turn")]
    )
    guard = Guard()
    turn = guarded_turn(provider, Host(), tmp_path, guard)

    assert await turn.run(user("add")) == "end_turn"

    assert [(len(messages), refused) for messages, refused in guard.calls] == [
        (3, False),
        (5, False),
    ]
    assert [m for m, _ in guard.calls] == [list(r.messages) for r in provider.requests]


async def test_a_history_compacted_before_a_request_mid_turn_is_what_the_request_carries(
    tmp_path: Path,
) -> None:
    provider = ScriptedProvider(
        [call("c1", "add", a=1, b=2), Stop("tool_use")], [TextDelta("3"), Stop("end_turn")]
    )
    guard = Guard(before=True)
    turn = guarded_turn(provider, Host(), tmp_path, guard)

    assert await turn.run(user("add")) == "end_turn"

    first, second = provider.requests
    assert first.messages[0] == SUMMARY
    assert second.messages[0] == SUMMARY
    assert [m.role for m in second.messages] == ["user", "user", "assistant", "tool"]
    assert_history_valid(turn.history)


async def test_an_overflow_compacts_and_the_request_is_sent_once_more(tmp_path: Path) -> None:
    provider = ScriptedProvider([overflow()], [TextDelta("fits now"), Stop("end_turn")])
    guard = Guard()
    host = Host()
    turn = guarded_turn(provider, host, tmp_path, guard)

    assert await turn.run(user("go")) == "end_turn"

    assert [refused for _, refused in guard.calls] == [False, True]
    refused, retried = provider.requests
    assert len(refused.messages) == 3
    assert retried.messages == [SUMMARY, user("go")]
    assert turn.history == [SUMMARY, user("go"), Message("assistant", [TextPart("fits now")])]


async def test_a_second_overflow_after_compacting_stops_max_tokens_and_says_why(
    tmp_path: Path,
) -> None:
    provider = ScriptedProvider([overflow()], [overflow()])
    guard = Guard()
    host = Host()
    turn = guarded_turn(provider, host, tmp_path, guard)

    assert await turn.run(user("go")) == "max_tokens"

    assert len(provider.requests) == 2
    assert [refused for _, refused in guard.calls] == [False, True]
    [notice] = host.of_type(MessageChunk)
    assert "prompt is too long" in notice.text and "new session" in notice.text


async def test_an_overflow_the_guard_cannot_shorten_stops_max_tokens_without_a_retry(
    tmp_path: Path,
) -> None:
    provider = ScriptedProvider([overflow()])
    guard = Guard(on_overflow=False)
    host = Host()
    turn = guarded_turn(provider, host, tmp_path, guard)

    assert await turn.run(user("go")) == "max_tokens"

    assert len(provider.requests) == 1
    assert "prompt is too long" in host.of_type(MessageChunk)[0].text


async def test_without_a_guard_an_overflow_stops_max_tokens_as_before(tmp_path: Path) -> None:
    provider = ScriptedProvider([overflow()])
    host = Host()
    turn = make_turn(provider, host, tmp_path)

    assert await turn.run(user("go")) == "max_tokens"

    assert len(provider.requests) == 1
    assert [m.role for m in turn.history] == ["user"]


# --- what the user sees of a tool call ---------------------------------------------------


class ReplaceParams(ToolParams):
    path: str
    new: str


@dataclass(frozen=True)
class ReplaceText(Tool[ReplaceParams]):
    """An edit with a preview: the diff it would apply, from `files` (the editor's view)."""

    name = "replace_text"
    kind = "edit"
    description = "Replace a file's text."
    params_model = ReplaceParams
    read_only = False

    files: dict[str, str] = field(default_factory=dict)
    preview_error: Exception | None = None
    previews: list[str] = field(default_factory=list)
    while_previewing: Callable[[], None] | None = None
    """Runs during the preview (the user acting while the file is read)."""

    def title(self, params: ReplaceParams, ctx: ToolContext) -> str:
        return f"Replace {params.path}"

    def locations(self, params: ReplaceParams, ctx: ToolContext) -> tuple[Location, ...]:
        return (Location(params.path),)

    def paths(self, params: ReplaceParams, ctx: ToolContext) -> tuple[Path, ...]:
        return (ctx.resolve(params.path),)

    async def preview(self, params: ReplaceParams, ctx: ToolContext) -> tuple[ToolContent, ...]:
        self.previews.append(params.path)
        if self.while_previewing is not None:
            self.while_previewing()
        if self.preview_error is not None:
            raise self.preview_error
        return (DiffContent(params.path, self.files.get(params.path), params.new),)

    async def run(self, params: ReplaceParams, ctx: ToolContext) -> ToolOutcome:
        if params.path not in self.files:
            raise ToolFailed(f"{params.path}: no such file")
        old = self.files[params.path]
        self.files[params.path] = params.new
        return ToolOutcome(
            model_text=f"Replaced {params.path}.",
            display=(DiffContent(params.path, old, params.new),),
            locations=(Location(params.path, 1),),
            raw_output={"path": params.path, "replacements": 1},
        )


class CheckParams(ToolParams):
    pass


class FailingCheck(Tool[CheckParams]):
    """Runs, but does not succeed (like a command that exits 1)."""

    name = "check"
    kind = "execute"
    description = "Run the checks."
    params_model = CheckParams

    async def run(self, params: CheckParams, ctx: ToolContext) -> ToolOutcome:
        return ToolOutcome(
            model_text="2 checks failed\n[exit code 1]",
            display=(TextPart("Exited with code 1."),),
            raw_output={"exit_code": 1},
            failed=True,
        )


async def test_a_tool_call_starts_with_its_name_raw_input_and_preview(tmp_path: Path) -> None:
    tool = ReplaceText({"a.txt": "old\n"})
    provider = ScriptedProvider(
        [call("c1", "replace_text", path="a.txt", new="new\n"), Stop("tool_use")],
        [Stop("end_turn")],
    )
    host = Host()
    await make_turn(provider, host, tmp_path, extra_tools=[tool]).run(user("go"))

    [started] = host.of_type(ToolCallStarted)
    assert started == ToolCallStarted(
        "c1",
        "Replace a.txt",
        "edit",
        raw_input={"path": "a.txt", "new": "new\n"},
        locations=(Location("a.txt"),),
        content=(DiffContent("a.txt", "old\n", "new\n"),),
        name="replace_text",
    )


async def test_the_permission_question_carries_the_diff_and_the_same_call_completes(
    tmp_path: Path,
) -> None:
    files = {"a.txt": "old\n"}
    tool = ReplaceText(files)
    provider = ScriptedProvider(
        [call("c1", "replace_text", path="a.txt", new="new\n"), Stop("tool_use")],
        [Stop("end_turn")],
    )
    host = Host("allow_once")
    await make_turn(provider, host, tmp_path, extra_tools=[tool]).run(user("go"))

    [question] = host.questions
    assert question.tool_call_id == "c1"
    assert question.name == "replace_text"
    assert question.content == (DiffContent("a.txt", "old\n", "new\n"),)
    assert question.locations == (Location("a.txt"),)
    assert question.raw_input == {"path": "a.txt", "new": "new\n"}
    updates = host.of_type(ToolCallUpdated)
    assert [(u.id, u.status) for u in updates] == [("c1", "in_progress"), ("c1", "completed")]
    assert updates[-1].raw_output == {"path": "a.txt", "replacements": 1}
    assert updates[-1].content == (DiffContent("a.txt", "old\n", "new\n"),)
    assert files == {"a.txt": "new\n"}


async def test_a_failing_preview_shows_nothing_and_the_model_hears_only_the_runs_error(
    tmp_path: Path,
) -> None:
    tool = ReplaceText(preview_error=ToolFailed("secret.txt holds 'hunter2'"))
    provider = ScriptedProvider(
        [call("c1", "replace_text", path="secret.txt", new="x"), Stop("tool_use")],
        [Stop("end_turn")],
    )
    host = Host("reject_once")
    turn = make_turn(provider, host, tmp_path, extra_tools=[tool])
    assert await turn.run(user("go")) == "end_turn"

    [started] = host.of_type(ToolCallStarted)
    assert started.content == ()
    [question] = host.questions
    assert question.content == ()
    [result] = tool_results(turn.history[2])
    assert "hunter2" not in result.text, "a preview's failure says nothing before consent"


async def test_a_call_refused_without_asking_is_not_previewed(tmp_path: Path) -> None:
    tool = ReplaceText({"a.txt": "old\n"})
    provider = ScriptedProvider(
        [call("c1", "replace_text", path="a.txt", new="new\n"), Stop("tool_use")],
        [Stop("end_turn")],
    )
    host = Host()
    choices = Choices(provider, mode="read-only")
    await make_turn(provider, host, tmp_path, choices=choices, extra_tools=[tool]).run(user("go"))

    assert tool.previews == []
    assert host.questions == []
    assert host.of_type(ToolCallUpdated)[-1].status == "failed"


async def test_a_call_outside_the_roots_is_asked_about_without_reading_anything_first(
    tmp_path: Path,
) -> None:
    outside = str(tmp_path.parent / "elsewhere.txt")
    tool = ReplaceText({outside: "theirs\n"})
    provider = ScriptedProvider(
        [call("c1", "replace_text", path=outside, new="mine\n"), Stop("tool_use")],
        [Stop("end_turn")],
    )
    host = Host("reject_once")
    await make_turn(provider, host, tmp_path, extra_tools=[tool]).run(user("go"))

    assert tool.previews == []
    [question] = host.questions
    assert question.content == () and question.locations == (Location(outside),)


async def test_a_switch_to_read_only_during_the_preview_stops_that_call(tmp_path: Path) -> None:
    provider = ScriptedProvider(
        [call("c1", "replace_text", path="a.txt", new="new\n"), Stop("tool_use")],
        [Stop("end_turn")],
    )
    choices = Choices(provider, mode="bypass")
    tool = ReplaceText(
        {"a.txt": "old\n"}, while_previewing=lambda: setattr(choices, "mode", "read-only")
    )
    host = Host()
    turn = make_turn(provider, host, tmp_path, choices=choices, extra_tools=[tool])
    await turn.run(user("go"))

    assert tool.files == {"a.txt": "old\n"}
    [result] = tool_results(turn.history[2])
    assert result.is_error and "read-only" in result.text


async def test_a_failed_outcome_fails_on_screen_while_the_model_reads_a_normal_result(
    tmp_path: Path,
) -> None:
    provider = ScriptedProvider([call("c1", "check"), Stop("tool_use")], [Stop("end_turn")])
    host = Host()
    turn = make_turn(provider, host, tmp_path, extra_tools=[FailingCheck()])
    await turn.run(user("go"))

    finished = host.of_type(ToolCallUpdated)[-1]
    assert finished.status == "failed"
    assert finished.raw_output == {"exit_code": 1}
    assert finished.content == (TextPart("Exited with code 1."),)
    [result] = tool_results(turn.history[2])
    assert not result.is_error
    assert result.text == "2 checks failed\n[exit code 1]"


async def test_a_call_that_cannot_run_is_still_shown_with_the_name_and_input_the_model_sent(
    tmp_path: Path,
) -> None:
    provider = ScriptedProvider(
        [call("c1", "nope", x=1), call("c2", "add", a="not a number", b=1), Stop("tool_use")],
        [Stop("end_turn")],
    )
    host = Host()
    await make_turn(provider, host, tmp_path).run(user("go"))

    started = host.of_type(ToolCallStarted)
    assert [(e.name, e.raw_input) for e in started] == [
        ("nope", {"x": 1}),
        ("add", {"a": "not a number", "b": 1}),
    ]
