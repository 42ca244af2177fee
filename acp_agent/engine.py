"""One prompt turn: model call -> tool calls -> results -> model call ... until the model stops.

The engine speaks only the neutral vocabulary: it emits turn events to its host and asks the
host for permission; it knows no wire format and no vendor. Cancellation arrives as anyio
cancellation of the caller's scope; the history is left consistent (every tool call
answered) whatever ends the turn.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import anyio
from pydantic import ValidationError

from .config import ThoughtLevel
from .messages import (
    INVALID_JSON_KEY,
    Location,
    Message,
    MessageChunk,
    ModelStopReason,
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
    ToolKind,
    ToolResultPart,
    TurnEvent,
    TurnStopReason,
    Usage,
    UsageUpdated,
)
from .providers import ContextWindowError, ModelRequest, Provider
from .providers.usage import UsageMeter
from .tools import (
    Decision,
    PermissionQuestion,
    Tool,
    ToolContext,
    ToolFailed,
)
from .tools.permissions import (
    DEFAULT_MODE,
    PermissionMemory,
    PermissionMode,
    decide,
    tools_for_mode,
)

log = logging.getLogger(__name__)

CANCELLED_RESULT = "The user cancelled this tool call."
# Time allowed to report a tool call's end after the turn was cancelled.
CLEANUP_SECONDS = 0.5


class TurnHost(Protocol):
    async def emit(self, event: TurnEvent) -> None: ...

    async def ask_permission(self, question: PermissionQuestion) -> Decision: ...


@dataclass(frozen=True, slots=True)
class TurnSettings:
    model: str
    system_prompt: str
    context_window: int
    max_turn_requests: int
    max_output_tokens: int | None = None
    thought_level: ThoughtLevel | None = None


@dataclass
class Turn:
    provider: Provider
    settings: TurnSettings
    history: list[Message]
    tools: Mapping[str, Tool[Any]]
    context: ToolContext
    host: TurnHost
    meter: UsageMeter = field(default_factory=UsageMeter)
    """The session's context and cost figures, updated after every model call."""
    mode: PermissionMode = DEFAULT_MODE
    memory: PermissionMemory = field(default_factory=PermissionMemory)
    """The user's "always" answers, shared with the session."""

    async def run(self, prompt: Message) -> TurnStopReason:
        self.history.append(prompt)
        try:
            for _ in range(self.settings.max_turn_requests):
                try:
                    stop = await self._call_model()
                except ContextWindowError as exc:
                    await self.host.emit(MessageChunk(f"\n\n[{exc} Start a new session.]"))
                    return "max_tokens"
                if stop == "pause_turn":
                    continue  # the vendor paused a long turn: calling again resumes it
                if stop != "tool_use":
                    return stop
                calls = self.history[-1].tool_calls
                if not calls:
                    return "end_turn"
                await self._run_tools(calls)
            return "max_turn_requests"
        except _PermissionCancelled:
            return "cancelled"
        finally:
            self._answer_open_tool_calls()

    def _answer_open_tool_calls(self) -> None:
        """Vendors reject a history where a tool call has no result: fill the gaps."""
        last = self.history[-1]
        if last.role == "assistant":
            calls, results = last.tool_calls, Message("tool")
        elif last.role == "tool" and len(self.history) > 1:
            calls, results = self.history[-2].tool_calls, last
        else:
            return
        answered = {p.tool_call_id for p in results.parts if isinstance(p, ToolResultPart)}
        for call in calls:
            if call.id not in answered:
                results.parts.append(
                    ToolResultPart(call.id, (TextPart(CANCELLED_RESULT),), is_error=True)
                )
        if results.parts and results is not last:
            self.history.append(results)

    # --- model calls ---------------------------------------------------------------------

    async def _call_model(self) -> ModelStopReason:
        request = ModelRequest(
            model=self.settings.model,
            system=self.settings.system_prompt,
            messages=list(self.history),
            tools=[tool.spec() for tool in self._offered().values()],
            max_output_tokens=self.settings.max_output_tokens,
            thought_level=self.settings.thought_level,
        )
        reply = _ReplyBuilder()
        stop: ModelStopReason | None = None
        reported: Usage | None = None
        try:
            async with self.provider.stream(request) as events:
                async for event in events:
                    match event:
                        case TextDelta(text=text):
                            reply.add_text(text)
                            await self.host.emit(MessageChunk(text))
                        case ThinkingDelta(text=text, provider_data=data):
                            reply.add_thinking(text, data)
                            if text:
                                await self.host.emit(ThoughtChunk(text))
                        case ToolCallEnd(call=call):
                            reply.parts.append(call)
                        case Usage() as usage:
                            reported = usage
                        case Stop(reason=reason):
                            stop = reason
                        case RetryNotice():
                            await self.host.emit(ThoughtChunk(_describe_retry(event)))
                        case _:
                            pass  # tool call start / argument deltas: shown once complete
        finally:
            # Whatever ended the call (stop, error, cancellation), keep what was streamed.
            message = reply.message()
            if message.parts:
                self.history.append(message)
            reading = self.meter.after_call(
                self.history, reported, system=request.system, tools=request.tools
            )
            with anyio.CancelScope(shield=True), anyio.move_on_after(CLEANUP_SECONDS):
                await self.host.emit(
                    UsageUpdated(reading.used, self.settings.context_window, reading.cost_usd)
                )
        if stop is None:
            return "end_turn"
        return stop

    # --- tool calls ----------------------------------------------------------------------

    async def _run_tools(self, calls: list[ToolCallPart]) -> None:
        results = Message("tool")
        self.history.append(results)
        for call in calls:
            results.parts.append(await self._run_tool(call))

    async def _run_tool(self, call: ToolCallPart) -> ToolResultPart:
        offered = self._offered()
        tool = offered.get(call.name)
        if tool is None:
            await self._announce(call, call.name, "other")
            known = ", ".join(offered) or "none"
            return await self._fail(call, f"There is no tool named {call.name!r}. Tools: {known}.")
        try:
            params = _parse_arguments(tool, call)
        except ToolFailed as exc:
            await self._announce(call, tool.name, tool.kind)
            return await self._fail(call, str(exc))
        context = replace(self.context, tool_call_id=call.id, emit=self.host.emit)
        title = tool.title(params, context)
        await self._announce(call, title, tool.kind, tool.locations(params, context))
        try:
            return await self._permit_and_run(call, tool, params, context, title)
        except anyio.get_cancelled_exc_class():
            # Cancelled while asking or running: the call must not stay pending on screen.
            with anyio.move_on_after(CLEANUP_SECONDS, shield=True):
                await self.host.emit(
                    ToolCallUpdated(call.id, status="failed", content=(TextPart("Cancelled."),))
                )
            raise

    async def _permit_and_run(
        self, call: ToolCallPart, tool: Tool[Any], params: Any, context: ToolContext, title: str
    ) -> ToolResultPart:
        verdict = decide(tool, params, context, self.mode, self.memory)
        if verdict == "reject":
            return await self._fail(call, "The user chose to always reject calls like this.")
        if verdict == "ask":
            decision = await self.host.ask_permission(
                PermissionQuestion(
                    call.id,
                    title,
                    tool.kind,
                    call.arguments,
                    always_scope=self.memory.describe(tool, params, context),
                )
            )
            if decision == "cancelled":
                await self._fail(call, "Cancelled.")
                raise _PermissionCancelled
            self.memory.remember(decision, tool, params, context)
            if decision in ("reject_once", "reject_always"):
                return await self._fail(call, "The user rejected this tool call.")
        await self.host.emit(ToolCallUpdated(call.id, status="in_progress"))
        try:
            outcome = await tool.run(params, context)
        except ToolFailed as exc:
            return await self._fail(call, str(exc))
        except Exception as exc:
            # A bug or an unexpected client reply: the user and the model both hear of it,
            # and the turn goes on.
            log.exception("tool %s failed", tool.name)
            return await self._fail(call, f"{tool.name} failed: {type(exc).__name__}: {exc}")
        await self.host.emit(
            ToolCallUpdated(
                call.id,
                status="completed",
                title=outcome.title,
                content=outcome.display or None,
                locations=outcome.locations or None,
            )
        )
        return ToolResultPart(call.id, (TextPart(outcome.model_text),))

    async def _announce(
        self, call: ToolCallPart, title: str, kind: ToolKind, locations: tuple[Location, ...] = ()
    ) -> None:
        await self.host.emit(
            ToolCallStarted(call.id, title, kind, raw_input=call.arguments, locations=locations)
        )

    def _offered(self) -> dict[str, Tool[Any]]:
        return tools_for_mode(self.tools, self.mode)

    async def _fail(self, call: ToolCallPart, reason: str) -> ToolResultPart:
        await self.host.emit(ToolCallUpdated(call.id, status="failed", content=(TextPart(reason),)))
        return ToolResultPart(call.id, (TextPart(reason),), is_error=True)


class _PermissionCancelled(Exception):
    """The client answered a permission request `cancelled`: the turn ends, cancelled."""


def _describe_retry(notice: RetryNotice) -> str:
    return (
        f"[{notice.provider}: {notice.reason}; retrying in {notice.delay:.1f}s "
        f"(attempt {notice.attempt + 1} of {notice.max_attempts})]\n"
    )


def _parse_arguments(tool: Tool[Any], call: ToolCallPart) -> Any:
    if INVALID_JSON_KEY in call.arguments:
        raw = call.arguments[INVALID_JSON_KEY]
        raise ToolFailed(f"The arguments for {tool.name} were not valid JSON: {raw!r}")
    try:
        return tool.params_model.model_validate(call.arguments)
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

    def add_text(self, text: str) -> None:
        self._flush_thinking()
        self._text.append(text)

    def add_thinking(self, text: str, data: dict[str, Any] | None) -> None:
        self._flush_text()
        self._thinking.append(text)
        if data:
            self._thinking_data = {**(self._thinking_data or {}), **data}
        if data and ("signature" in data or "redacted_data" in data):
            # A signed (or redacted) block is complete: vendors need each one back as sent.
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
