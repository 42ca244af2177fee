"""The context figure describes what the next request would carry: a finished call's report,
plus an estimate of what was added since; never a broken-off call's report, never a jump."""

from __future__ import annotations

import pytest

from acp_agent.config import Prices
from acp_agent.messages import Message, TextPart, ToolResultPart, ToolSpec, Usage
from acp_agent.providers.usage import TokenCounter, UsageMeter


class WordEncoder:
    """One token per whitespace-separated word."""

    def encode_ordinary(self, text: str) -> list[int]:
        return list(range(len(text.split())))


def words(count: int) -> str:
    return " ".join(["word"] * count)


def text(role: str, count: int) -> Message:
    return Message(role, [TextPart(words(count))])  # type: ignore[arg-type]


def tool_result(count: int) -> Message:
    return Message("tool", [ToolResultPart("c1", (TextPart(words(count)),))])


def meter(prices: Prices | None = None) -> UsageMeter:
    return UsageMeter(prices, TokenCounter(WordEncoder()))


def tokens(message: Message) -> int:
    return TokenCounter(WordEncoder()).count_message(message)


def test_a_finished_calls_report_is_the_figure() -> None:
    usage = meter()
    history = [text("user", 10), text("assistant", 5)]

    reading = usage.after_call(history, Usage(input_tokens=900, output_tokens=100))

    assert (reading.used, reading.estimated) == (1_000, False)


def test_a_cancelled_call_adds_its_partial_reply_to_the_last_figure_and_is_charged_for_it() -> None:
    usage = meter(Prices(input=1.0, output=1.0))
    history = [text("user", 10), text("assistant", 5)]
    usage.after_call(history, Usage(input_tokens=900, output_tokens=100))
    cost_before = usage.cost_usd or 0.0

    prompt, partial = text("user", 7), text("assistant", 3)
    history += [prompt, partial]
    reading = usage.after_call(history, None, finished=False)

    assert reading.used == 1_000 + tokens(prompt) + tokens(partial)
    assert not reading.estimated  # still anchored on the vendor's count
    charged = (reading.cost_usd or 0.0) - cost_before
    assert charged == pytest.approx(reading.used / 1e6)  # the request and the partial reply


def test_a_broken_off_calls_own_report_is_charged_but_not_shown() -> None:
    usage = meter(Prices(input=1.0, output=1.0))
    history = [text("user", 10), text("assistant", 5)]
    usage.after_call(history, Usage(input_tokens=900, output_tokens=100))

    history += [text("user", 7)]
    # Anthropic reports the input when a stream starts; then the call was cancelled.
    reading = usage.after_call(history, Usage(input_tokens=5_000), finished=False)

    assert reading.used == 1_000 + tokens(history[-1])
    assert reading.cost_usd == pytest.approx((1_000 + 5_000) / 1e6)


def test_a_call_that_failed_before_replying_is_not_charged_and_shows_the_history() -> None:
    usage = meter(Prices(input=1.0, output=1.0))
    history = [text("user", 10), text("assistant", 5)]
    usage.after_call(history, Usage(input_tokens=900, output_tokens=100))
    cost_before = usage.cost_usd

    history += [text("user", 7)]
    reading = usage.after_call(history, None, finished=False)

    assert reading.used == 1_000 + tokens(history[-1])
    assert reading.cost_usd == cost_before


def test_a_first_call_that_failed_shows_the_request_it_would_send() -> None:
    usage = meter(Prices(input=1.0, output=1.0))
    tools = [ToolSpec("read", "Read a file", {"type": "object"})]
    history = [text("user", 10)]

    reading = usage.after_call(history, None, system="Be brief", tools=tools, finished=False)

    assert reading.used == TokenCounter(WordEncoder()).count_request("Be brief", history, tools)
    assert reading.estimated
    assert reading.cost_usd is None  # nothing was billed


def test_messages_added_after_a_call_are_added_to_its_figure() -> None:
    usage = meter()
    history = [text("user", 10), text("assistant", 5)]
    usage.after_call(history, Usage(input_tokens=900, output_tokens=100))

    assert usage.after_change(history) is None  # nothing new
    history.append(tool_result(40))
    reading = usage.after_change(history)

    assert reading is not None
    assert reading.used == 1_000 + tokens(history[-1])
    assert usage.after_change(history) is None


def test_a_finished_call_without_a_report_extends_the_last_reported_figure() -> None:
    usage = meter()
    history = [text("user", 10), text("assistant", 5)]
    usage.after_call(history, Usage(input_tokens=900, output_tokens=100))

    history += [text("user", 3), text("assistant", 4)]
    reading = usage.after_call(history, None)

    assert reading.used == 1_000 + tokens(history[-2]) + tokens(history[-1])


def test_a_history_shorter_than_the_figure_covers_is_estimated_afresh() -> None:
    usage = meter()
    history = [text("user", 10), text("assistant", 5), text("user", 3), text("assistant", 4)]
    usage.after_call(history, Usage(input_tokens=900, output_tokens=100), system="s")

    shorter = history[2:]
    reading = usage.after_call(shorter, None, system="s", finished=False)

    assert reading.used == TokenCounter(WordEncoder()).count_request("s", shorter)
    assert reading.estimated


def test_without_a_figure_yet_a_change_is_left_for_the_next_call_to_measure() -> None:
    usage = meter()

    assert usage.after_change([text("user", 10)]) is None
    assert usage.last is None
