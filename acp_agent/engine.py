"""One prompt turn: model call -> tool calls -> results -> model call ... until the model stops.

The engine speaks only the neutral vocabulary: it emits turn events to its host and asks the
host for permission; it knows no wire format and no vendor. Cancellation arrives as anyio
cancellation of the caller's scope; the history is left consistent (every tool call
answered) whatever ends the turn.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import anyio
from pydantic import ValidationError

from . import telemetry
from .config import Speed, ThoughtLevel
from .messages import (
    INVALID_JSON_KEY,
    Message,
    MessageChunk,
    ModelStopReason,
    Notice,
    Part,
    RetryNotice,
    Stop,
    TextDelta,
    TextPart,
    ThinkingDelta,
    ThinkingPart,
    ThoughtChunk,
    ToolCallEnd,
    ToolCallPart,
    ToolCallStarted,
    ToolCallUpdated,
    ToolContent,
    ToolKind,
    ToolResultPart,
    TurnEvent,
    TurnStopReason,
    Usage,
    UsageUpdated,
    open_call_results,
)
from .providers import ContextWindowError, ModelRequest, Provider, ProviderError
from .providers.usage import UsageMeter
from .tools import (
    Decision,
    PermissionQuestion,
    Tool,
    ToolContext,
    ToolFailed,
    TurnCancelled,
)
from .tools.permissions import (
    PermissionMemory,
    PermissionMode,
    decide,
    mode_refusal,
    tools_for_mode,
)

log = logging.getLogger(__name__)
AGENT_NAME = "acp-agent"
"""The agent's name in traces (`gen_ai.agent.name`)."""

CANCELLED_RESULT = "The user cancelled this tool call."
CANCELLED_ALONE_RESULT = (
    "The user cancelled this tool call while it ran (only this call: the turn goes on). "
    "Do not run it again unless the user asks."
)
CUT_OFF_RESULT = (
    "Not run: the reply reached the output token limit while this tool call was being "
    "written, so its arguments may be incomplete."
)
# Time allowed to report a tool call's end after the turn was cancelled.
CLEANUP_SECONDS = 0.5
# Time allowed to work out what a tool call will do (read the file an edit changes).
PREVIEW_SECONDS = 10.0


class TurnHost(Protocol):
    async def emit(self, event: TurnEvent) -> None: ...

    async def ask_permission(self, question: PermissionQuestion) -> Decision: ...

    def keep(self, message: Message, message_id: str | None) -> None:
        """A complete message joined the history (the session stores it)."""
        ...


@dataclass(frozen=True, slots=True)
class ModelSettings:
    model: str
    system_prompt: str
    context_window: int
    max_output_tokens: int | None = None
    thought_level: ThoughtLevel | None = None
    speed: Speed | None = None


@dataclass(frozen=True, slots=True)
class ModelSetup:
    """What one model request uses."""

    provider: Provider
    settings: ModelSettings


class ContextGuard(Protocol):
    """Keeps the conversation within the model's context window (the session compacts it)."""

    async def fit(
        self,
        history: list[Message],
        request: ModelRequest,
        setup: ModelSetup,
        overflow: ContextWindowError | None = None,
    ) -> bool:
        """Called before each model request with the request about to be sent, and again
        with `overflow` when the vendor refused it as too long: shortens `history` in place
        (older turns replaced by a summary; the running turn kept whole) when it must, and
        says whether it did."""
        ...


class SessionChoices(Protocol):
    """The user's choices, read live: a switch while a turn runs applies from the next model
    request (model, thought level) or the next tool call (mode)."""

    @property
    def mode(self) -> PermissionMode: ...

    async def model_setup(self) -> ModelSetup: ...


@dataclass
class Turn:
    choices: SessionChoices
    history: list[Message]
    tools: Mapping[str, Tool[Any]]
    context: ToolContext
    host: TurnHost
    max_turn_requests: int = 50
    max_concurrent_calls: int = 4
    """Calls of a concurrent tool (subagents) in one reply that run at once."""
    meter: UsageMeter = field(default_factory=UsageMeter)
    """The session's context and cost figures, updated after every model call."""
    memory: PermissionMemory = field(default_factory=PermissionMemory)
    """The user's "always" answers, shared with the session."""
    context_guard: ContextGuard | None = None
    """Asked before every model request; without one the history is sent as it is."""

    _answered: list[ToolResultPart] = field(default_factory=list, init=False)
    """Results of the tool round under way, kept as one message when it ends."""
    _window: int | None = field(default=None, init=False)
    """The context window of the model last called."""
    _requests: int = field(default=0, init=False)
    _tool_calls: int = field(default=0, init=False)
    """Model requests sent and tool calls run (or refused) by the turn, for the log."""

    async def run(self, prompt: Message, prompt_id: str | None = None) -> TurnStopReason:
        """The turn, logged at its start and end (debug) and traced as an `invoke_agent`
        span, current for the turn: its model requests and tool calls are its children."""
        session = self.context.session_id
        attributes = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": AGENT_NAME,
            "gen_ai.conversation.id": session,
        }
        began = time.perf_counter()
        log.debug("turn started in session %s (%d messages before it)", session, len(self.history))
        with telemetry.span(f"invoke_agent {AGENT_NAME}", attributes, current=True) as span:
            outcome = "cancelled"
            try:
                stop = await self._run(prompt, prompt_id)
                outcome = stop
                span.set({"acp_agent.stop_reason": stop})
                return stop
            except Exception as exc:
                outcome = f"failed ({type(exc).__name__}: {exc})"
                raise
            finally:
                log.debug(
                    "turn ended in session %s: %s after %.2fs (model requests: %d, tool calls: %d)",
                    session,
                    outcome,
                    time.perf_counter() - began,
                    self._requests,
                    self._tool_calls,
                )

    async def _run(self, prompt: Message, prompt_id: str | None) -> TurnStopReason:
        # The model hears of background jobs that ended with its next request.
        self._keep(_with_notes(prompt, self.context.state.jobs.take_ended_notes()), prompt_id)
        # What the model reads for a tool call left unanswered, by how the turn ended.
        not_run = CANCELLED_RESULT
        try:
            for _ in range(self.max_turn_requests):
                try:
                    stop = await self._call_model()
                except ContextWindowError as exc:
                    await self.host.emit(
                        MessageChunk(f"\n\n[{exc} Start a new session.]", _new_id())
                    )
                    return "max_tokens"
                if stop == "pause_turn":
                    continue  # the vendor paused a long turn: calling again resumes it
                calls = self._pending_calls()
                if stop == "max_tokens" and calls:
                    not_run = CUT_OFF_RESULT
                    await self.host.emit(MessageChunk(_cut_off_notice(calls), _new_id()))
                    return "max_tokens"
                if stop != "tool_use":
                    return stop
                if not calls:
                    return "end_turn"
                await self._run_tools(calls)
            return "max_turn_requests"
        except _PermissionCancelled:
            return "cancelled"
        except ProviderError as exc:
            not_run = f"Not run: the model's reply broke off ({exc})."
            raise
        except Exception as exc:
            not_run = f"Not run: the turn failed ({type(exc).__name__})."
            raise
        finally:
            self._answer_open_tool_calls(not_run)
            await self._report_context()

    def _pending_calls(self) -> list[ToolCallPart]:
        """The tool calls of the reply just received (none when it was not kept)."""
        last = self.history[-1]
        return last.tool_calls if last.role == "assistant" else []

    def _keep(self, message: Message, message_id: str | None = None) -> None:
        # Stored first: a message the store refuses must not live on in memory alone, where
        # the next request would carry it while a reload would not.
        self.host.keep(message, message_id)
        self.history.append(message)

    def _answer_open_tool_calls(self, reason: str) -> None:
        """Vendors reject a history where a tool call has no result: fill the gaps."""
        results = open_call_results(self.history, self._answered, reason)
        if results is not None:
            self._keep(results)
        self._answered = []

    async def _report_context(self) -> None:
        """The context the next request would carry, when the turn changed the history
        after its last model call (tool results, also of a cancelled round)."""
        window = self._window
        reading = self.meter.after_change(self.history) if window is not None else None
        if window is None or reading is None:
            return
        with anyio.CancelScope(shield=True), anyio.move_on_after(CLEANUP_SECONDS):
            await self.host.emit(UsageUpdated(reading.used, window, reading.cost_usd))

    # --- model calls ---------------------------------------------------------------------

    async def _call_model(self) -> ModelStopReason:
        setup = await self.choices.model_setup()
        self._window = setup.settings.context_window
        request = self._request(setup)
        guard = self.context_guard
        if guard is not None and await guard.fit(self.history, request, setup):
            request = self._request(setup)
        try:
            return await self._stream_reply(setup, request)
        except ContextWindowError as overflow:
            if guard is None or not await guard.fit(self.history, request, setup, overflow):
                raise
        # Compacted after the vendor refused the request: sent once more, and a second
        # refusal ends the turn.
        return await self._stream_reply(setup, self._request(setup))

    def _request(self, setup: ModelSetup) -> ModelRequest:
        settings = setup.settings
        return ModelRequest(
            model=settings.model,
            system=settings.system_prompt,
            messages=list(self.history),
            tools=[tool.spec() for tool in self._offered().values()],
            max_output_tokens=settings.max_output_tokens,
            thought_level=settings.thought_level,
            speed=settings.speed,
        )

    async def _stream_reply(self, setup: ModelSetup, request: ModelRequest) -> ModelStopReason:
        settings = setup.settings
        self._requests += 1
        reply = _ReplyBuilder()
        reply_id, thought_id = _new_id(), _new_id()
        stop: ModelStopReason | None = None
        reported: Usage | None = None
        finished = False
        try:
            async with setup.provider.stream(request) as events:
                async for event in events:
                    match event:
                        case TextDelta(text=text):
                            reply.add_text(text)
                            await self.host.emit(MessageChunk(text, reply_id))
                        case ThinkingDelta(text=text, provider_data=data, ends_block=ends):
                            reply.add_thinking(text, data, ends_block=ends)
                            if text:
                                await self.host.emit(ThoughtChunk(text, thought_id))
                        case ToolCallEnd(call=call):
                            reply.parts.append(call)
                        case Usage() as usage:
                            reported = usage
                        case Stop(reason=reason):
                            stop = reason
                        case RetryNotice(restarts_reply=True):
                            # The partial reply stays on screen but not in the history:
                            # the model answers again from the start, in a new message.
                            if reply.has_text:
                                await self.host.emit(MessageChunk("\n\n", reply_id))
                            await self.host.emit(_restart_notice(event, reply_id))
                            reply, stop, reported = _ReplyBuilder(), None, None
                            reply_id, thought_id = _new_id(), _new_id()
                        case RetryNotice():
                            await self.host.emit(retry_notice(event))
                        case _:
                            pass  # tool call start / argument deltas: shown once complete
            finished = True
        finally:
            # Whatever ended the call (stop, error, cancellation), keep what was streamed.
            message = reply.message()
            if message.parts:
                self._keep(message, reply_id)
            reading = self.meter.after_call(
                self.history,
                reported,
                system=request.system,
                tools=request.tools,
                finished=finished,
            )
            with anyio.CancelScope(shield=True), anyio.move_on_after(CLEANUP_SECONDS):
                await self.host.emit(
                    UsageUpdated(reading.used, settings.context_window, reading.cost_usd)
                )
        if stop is None:
            return "end_turn"
        return stop

    # --- tool calls ----------------------------------------------------------------------

    async def _run_tools(self, calls: list[ToolCallPart]) -> None:
        for batch in self._batches(calls):
            if len(batch) == 1:
                self._answered.append(await self._run_tool(batch[0]))
            else:
                self._answered.extend(await self._run_at_once(batch))
        notes = self.context.state.jobs.take_ended_notes()
        self._keep(_with_notes(Message("tool", list(self._answered)), notes))
        self._answered = []

    async def _run_at_once(self, batch: list[ToolCallPart]) -> list[ToolResultPart]:
        """Calls of a concurrent tool (subagents) next to each other, run at the same time
        (up to `max_concurrent_calls`); their results keep the calls' order."""
        results: list[ToolResultPart | None] = [None] * len(batch)
        limit = anyio.CapacityLimiter(self.max_concurrent_calls)

        async def run(index: int, call: ToolCallPart) -> None:
            async with limit:
                results[index] = await self._run_tool(call)

        async with anyio.create_task_group() as group:
            for index, call in enumerate(batch):
                group.start_soon(run, index, call)
        return [result for result in results if result is not None]

    def _batches(self, calls: list[ToolCallPart]) -> list[list[ToolCallPart]]:
        """The calls in order, those of a concurrent tool grouped with their neighbours."""
        batches: list[list[ToolCallPart]] = []
        for call in calls:
            tool = self.tools.get(call.name)
            concurrent = tool is not None and tool.concurrent
            if concurrent and batches and batches[-1][-1].name == call.name:
                batches[-1].append(call)
            else:
                batches.append([call])
        return batches

    async def _run_tool(self, call: ToolCallPart) -> ToolResultPart:
        """One call, logged (debug) and traced as an `execute_tool` span."""
        self._tool_calls += 1
        attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.name,
            "gen_ai.tool.call.id": call.id,
            "gen_ai.tool.type": "function",
        }
        began = time.perf_counter()
        with telemetry.span(f"execute_tool {call.name}", attributes, current=True) as span:
            outcome = "cancelled"
            try:
                result = await self._run_tool_call(call)
                outcome = "failed" if result.is_error else "done"
                if result.is_error:
                    span.fail("tool_error")
                return result
            finally:
                log.debug(
                    "tool call %s (%s): %s after %.2fs",
                    call.name,
                    call.id,
                    outcome,
                    time.perf_counter() - began,
                )

    async def _run_tool_call(self, call: ToolCallPart) -> ToolResultPart:
        # Looked up among all tools: one offered before a switch to read-only is refused
        # by the policy below, with a reason the model can act on.
        tool = self.tools.get(call.name)
        if tool is None:
            await self._announce(call, call.name, "other")
            known = ", ".join(self._offered()) or "none"
            return await self._fail(call, f"There is no tool named {call.name!r}. Tools: {known}.")
        try:
            params = _parse_arguments(tool, call)
        except ToolFailed as exc:
            await self._announce(call, tool.name, tool.kind)
            return await self._fail(call, str(exc))
        context = replace(self.context, tool_call_id=call.id, emit=self.host.emit)
        try:
            started = await self._started(call, tool, params, context)
        except Exception as exc:
            # A tool's paths, title or the policy raised on these arguments (a bug, or
            # input the OS refuses): that call fails, the turn goes on.
            await self._announce(call, tool.name, tool.kind)
            return await self._fail(call, _unexpected_failure(tool, exc))
        await self.host.emit(started)
        try:
            return await self._permit_and_run(call, tool, params, context, started)
        except anyio.get_cancelled_exc_class():
            # Cancelled while asking or running: the call must not stay pending on screen.
            with anyio.move_on_after(CLEANUP_SECONDS, shield=True):
                await self.host.emit(
                    ToolCallUpdated(call.id, status="failed", content=(TextPart("Cancelled."),))
                )
            raise
        except _PermissionCancelled:
            raise
        except Exception as exc:
            # The policy or the question to the user raised: as above, that call fails.
            return await self._fail(call, _unexpected_failure(tool, exc))

    async def _started(
        self, call: ToolCallPart, tool: Tool[Any], params: Any, context: ToolContext
    ) -> ToolCallStarted:
        """What the call will do, shown from the start and in the permission request; not
        worked out for a call that will be refused without asking."""
        refused = decide(tool, params, context, self.choices.mode, self.memory) == "reject"
        preview = () if refused else await _preview(tool, params, context)
        return ToolCallStarted(
            call.id,
            tool.title(params, context),
            tool.kind,
            raw_input=call.arguments,
            locations=tool.locations(params, context),
            content=preview,
            name=call.name,
        )

    async def _permit_and_run(
        self,
        call: ToolCallPart,
        tool: Tool[Any],
        params: Any,
        context: ToolContext,
        started: ToolCallStarted,
    ) -> ToolResultPart:
        # Decided now, after the preview: a mode switch meanwhile applies to this call.
        verdict = decide(tool, params, context, self.choices.mode, self.memory)
        if verdict == "reject":
            refusal = mode_refusal(tool, params, context, self.choices.mode)
            if refusal is not None:
                return await self._fail(call, refusal)
            return await self._fail(call, "The user chose to always reject calls like this.")
        if verdict == "ask":
            decision = await self.host.ask_permission(
                PermissionQuestion(
                    call.id,
                    started.title,
                    tool.kind,
                    call.arguments,
                    always_scope=self.memory.describe(tool, params, context),
                    name=call.name,
                    content=started.content,
                    locations=started.locations,
                )
            )
            if decision == "cancelled":
                await self._fail(call, "Cancelled.")
                raise _PermissionCancelled
            self.memory.remember(decision, tool, params, context)
            if decision in ("reject_once", "reject_always"):
                return await self._fail(call, "The user rejected this tool call.")
            refusal = mode_refusal(tool, params, context, self.choices.mode)
            if refusal is not None:
                # Switched to read-only while the question was open: the mode wins.
                return await self._fail(call, refusal)
        await self.host.emit(ToolCallUpdated(call.id, status="in_progress", cancellable=True))
        try:
            with context.state.work.tool_call(call.id) as alone:
                outcome = await tool.run(params, context)
            if alone.cancelled_caught:
                return await self._cancelled_alone(call)
        except ToolFailed as exc:
            return await self._fail(call, str(exc))
        except TurnCancelled as exc:
            # The user stopped the turn from the tool (dismissed its question): as after a
            # cancelled permission request, the call fails and the turn ends `cancelled`.
            await self._fail(call, str(exc) or "Cancelled.")
            raise _PermissionCancelled from None
        except Exception as exc:
            # A bug or an unexpected client reply: the user and the model both hear of it,
            # and the turn goes on.
            return await self._fail(call, _unexpected_failure(tool, exc))
        # A failed outcome (a command that exited non-zero) fails on screen only: the model
        # reads it as a normal result.
        await self.host.emit(
            ToolCallUpdated(
                call.id,
                status="failed" if outcome.failed else "completed",
                title=outcome.title,
                content=outcome.display or None,
                locations=outcome.locations or None,
                # A client that shows only rawOutput still sees what the model was told.
                raw_output=(
                    outcome.raw_output
                    if outcome.raw_output is not None
                    else {"output": outcome.model_text}
                ),
            )
        )
        return ToolResultPart(call.id, outcome.model_parts or (TextPart(outcome.model_text),))

    async def _cancelled_alone(self, call: ToolCallPart) -> ToolResultPart:
        """The user cancelled this call only (not the turn): the model hears it and goes on."""
        await self.host.emit(
            ToolCallUpdated(
                call.id,
                status="cancelled",
                content=(TextPart("Cancelled by the user."),),
                raw_output={"error": CANCELLED_ALONE_RESULT},
            )
        )
        return ToolResultPart(call.id, (TextPart(CANCELLED_ALONE_RESULT),), is_error=True)

    async def _announce(self, call: ToolCallPart, title: str, kind: ToolKind) -> None:
        """A call that will not run (an unknown tool, bad arguments), about to fail."""
        await self.host.emit(
            ToolCallStarted(call.id, title, kind, raw_input=call.arguments, name=call.name)
        )

    def _offered(self) -> dict[str, Tool[Any]]:
        return tools_for_mode(self.tools, self.choices.mode)

    async def _fail(self, call: ToolCallPart, reason: str) -> ToolResultPart:
        await self.host.emit(
            ToolCallUpdated(
                call.id, status="failed", content=(TextPart(reason),), raw_output={"error": reason}
            )
        )
        return ToolResultPart(call.id, (TextPart(reason),), is_error=True)


def _with_notes(message: Message, notes: list[str]) -> Message:
    """`message` with `notes` (background jobs that ended) as text at its end: a part of
    the prompt, or of the last tool result (a tool message holds results only)."""
    if not notes or not message.parts:
        return message
    note = TextPart("\n".join(notes))
    *parts, last = message.parts
    if isinstance(last, ToolResultPart):
        return Message(message.role, [*parts, replace(last, content=(*last.content, note))])
    return Message(message.role, [*message.parts, note])


def _new_id() -> str:
    return uuid.uuid4().hex


async def _preview(tool: Tool[Any], params: Any, context: ToolContext) -> tuple[ToolContent, ...]:
    """`tool.preview`, or nothing when it fails or the editor is slow to answer: the run
    reports the failure (after the user's consent: a preview's error could tell the model
    about a file it may not read).

    A call that touches a path outside the session roots is not previewed: before the
    user's consent nothing there is read, not even for the user's eyes.
    """
    if not all(context.inside_roots(path) for path in tool.paths(params, context)):
        return ()
    with anyio.move_on_after(PREVIEW_SECONDS):
        try:
            return await tool.preview(params, context)
        except Exception as exc:
            log.debug("no preview for %s: %s", tool.name, exc)
    return ()


class _PermissionCancelled(Exception):
    """The client answered a permission request `cancelled` (or a tool's question was
    dismissed, `TurnCancelled`): the turn ends, cancelled."""


def retry_notice(retry: RetryNotice) -> Notice:
    """A retry wait, as the user is told of it."""
    return Notice(
        f"{retry.provider}: {retry.reason}",
        f"retrying in {retry.delay:.1f}s (attempt {retry.attempt + 1} of {retry.max_attempts})",
        "warning",
    )


def _unexpected_failure(tool: Tool[Any], exc: Exception) -> str:
    """What the model and the user read of an exception a tool call raised (logged)."""
    log.error("tool %s failed", tool.name, exc_info=exc)
    return f"{tool.name} failed: {type(exc).__name__}: {exc}"


def _restart_notice(retry: RetryNotice, reply_id: str) -> Notice:
    """Shown in the reply it voids to clients without notices (as it always was)."""
    return Notice(
        f"{retry.provider}: the reply broke off ({retry.reason})",
        f"asking again in {retry.delay:.1f}s (attempt {retry.attempt + 1} of "
        f"{retry.max_attempts}). The reply starts over below.",
        "warning",
        message_id=reply_id,
    )


def _cut_off_notice(calls: list[ToolCallPart]) -> str:
    names = ", ".join(sorted({call.name for call in calls}))
    return (
        f"\n\n[The reply reached the output token limit while writing a tool call ({names}); "
        "it was not run. Ask for a smaller step, or raise max_output_tokens for this model.]"
    )


def _parse_arguments(tool: Tool[Any], call: ToolCallPart) -> Any:
    if INVALID_JSON_KEY in call.arguments:
        raw = call.arguments[INVALID_JSON_KEY]
        raise ToolFailed(f"The arguments for {tool.name} were not valid JSON: {raw!r}")
    try:
        return tool.params_model.model_validate(call.arguments)
    except RecursionError:
        raise ToolFailed(f"The arguments for {tool.name} are nested too deeply.") from None
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'arguments'}: {err['msg']}"
            for err in exc.errors()
        )
        raise ToolFailed(f"Invalid arguments for {tool.name}: {problems}") from None


class _ReplyBuilder:
    """Accumulates one assistant message from stream deltas, merging adjacent text."""

    def __init__(self) -> None:
        self.parts: list[Part] = []
        self._text: list[str] = []
        self._thinking: list[str] = []
        self._thinking_data: dict[str, Any] | None = None

    @property
    def has_text(self) -> bool:
        return bool(self._text) or any(isinstance(p, TextPart) for p in self.parts)

    def add_text(self, text: str) -> None:
        self._flush_thinking()
        self._text.append(text)

    def add_thinking(self, text: str, data: dict[str, Any] | None, *, ends_block: bool) -> None:
        self._flush_text()
        self._thinking.append(text)
        if data:
            self._thinking_data = {**(self._thinking_data or {}), **data}
        if ends_block:
            # The provider says the block is complete: it goes back as one part, as it came.
            self._flush_thinking()

    def message(self) -> Message:
        self._flush_text()
        self._flush_thinking()
        # Tool calls go last: vendors expect them after the text they follow.
        calls: list[Part] = [p for p in self.parts if isinstance(p, ToolCallPart)]
        others: list[Part] = [p for p in self.parts if not isinstance(p, ToolCallPart)]
        return Message("assistant", others + calls)

    def _flush_text(self) -> None:
        if self._text:
            self.parts.append(TextPart("".join(self._text)))
            self._text = []

    def _flush_thinking(self) -> None:
        if self._thinking or self._thinking_data:
            self.parts.append(ThinkingPart("".join(self._thinking), self._thinking_data))
            self._thinking, self._thinking_data = [], None
