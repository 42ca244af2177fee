"""Token counting without the network, incremental counting, cost and the context figure."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import pytest

from acp_agent.config import Prices
from acp_agent.messages import (
    ImagePart,
    Message,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
    Usage,
)
from acp_agent.providers import usage as usage_module
from acp_agent.providers.usage import (
    IMAGE_TOKENS,
    MESSAGE_TOKENS,
    REQUEST_TOKENS,
    TOOL_CALL_TOKENS,
    TOOL_RESULT_TOKENS,
    TokenCounter,
    UsageMeter,
    cost,
    load_encoder,
)


@pytest.fixture(autouse=True)
def _empty_tiktoken_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """tiktoken downloads missing encodings: point it at an empty cache and forbid loading."""
    cache = tmp_path / "tiktoken-cache"
    cache.mkdir()
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    monkeypatch.delenv("DATA_GYM_CACHE_DIR", raising=False)

    def no_network(name: str) -> object:
        raise AssertionError(f"tiktoken.get_encoding({name!r}) called without a cached file")

    import tiktoken

    monkeypatch.setattr(tiktoken, "get_encoding", no_network)
    return cache


class CountingEncoder:
    """One token per whitespace-separated word; records every text it was asked to encode."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def encode_ordinary(self, text: str) -> list[int]:
        self.texts.append(text)
        return list(range(len(text.split())))


def words(count: int) -> str:
    return " ".join(["word"] * count)


# --- the counter --------------------------------------------------------------------------


def test_without_a_cached_encoding_the_counter_estimates_and_never_downloads() -> None:
    counter = TokenCounter()

    assert load_encoder() is None
    assert not counter.exact
    assert counter.count_text("abcdefgh") == 2
    assert counter.count_text("abcdefghi") == 3
    assert counter.count_text("") == 0


def test_the_estimate_adds_the_documented_overheads() -> None:
    counter = TokenCounter(encoding=None)
    message = Message(
        "assistant",
        [
            TextPart("x" * 40),
            ThinkingPart("y" * 8),
            ToolCallPart("call_1", "read", {"path": "a"}),
        ],
    )
    result = Message("tool", [ToolResultPart("call_1", (TextPart("z" * 12), ImagePart("", "p")))])

    assert counter.count_message(message) == (
        MESSAGE_TOKENS + 10 + 2 + TOOL_CALL_TOKENS + 1 + math.ceil(len('{"path": "a"}') / 4)
    )
    assert counter.count_message(result) == (MESSAGE_TOKENS + TOOL_RESULT_TOKENS + 3 + IMAGE_TOKENS)
    assert counter.count_request("", [message]) == REQUEST_TOKENS + counter.count_message(message)


def test_a_cached_encoding_file_is_loaded_from_where_tiktoken_keeps_it(
    _empty_tiktoken_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
    (_empty_tiktoken_cache / hashlib.sha1(url.encode()).hexdigest()).write_bytes(b"cached")
    encoder = CountingEncoder()
    import tiktoken

    monkeypatch.setattr(tiktoken, "get_encoding", lambda name: encoder)

    assert load_encoder("o200k_base") is encoder
    assert load_encoder("cl100k_base") is None  # that one is not cached
    assert TokenCounter().count_text("three little words") == 3


def test_a_broken_cached_encoding_falls_back_to_the_estimate(
    _empty_tiktoken_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
    (_empty_tiktoken_cache / hashlib.sha1(url.encode()).hexdigest()).write_bytes(b"junk")
    import tiktoken

    def broken(name: str) -> object:
        raise ValueError("bad file")

    monkeypatch.setattr(tiktoken, "get_encoding", broken)

    assert load_encoder() is None
    assert TokenCounter().count_text("abcd") == 1


def test_disabled_tiktoken_caching_means_estimates(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")

    assert load_encoder() is None


def test_a_growing_history_is_tokenized_only_where_it_grew() -> None:
    encoder = CountingEncoder()
    counter = TokenCounter(encoder)
    history = [Message("user", [TextPart(words(3))]), Message("assistant", [TextPart(words(5))])]

    first = counter.count_messages(history)
    assert first == 2 * MESSAGE_TOKENS + 8
    assert len(encoder.texts) == 2

    assert counter.count_messages(history) == first
    assert len(encoder.texts) == 2  # nothing new: nothing encoded

    history.append(Message("user", [TextPart("new words here")]))
    assert counter.count_messages(history) == first + MESSAGE_TOKENS + 3
    assert encoder.texts[2:] == ["new words here"]


def test_a_message_whose_parts_grew_is_counted_again() -> None:
    encoder = CountingEncoder()
    counter = TokenCounter(encoder)
    results = Message("tool", [ToolResultPart("c1", (TextPart("one"),))])
    history = [Message("user", [TextPart("hi")]), results]
    counter.count_messages(history)
    encoder.texts.clear()

    results.parts.append(ToolResultPart("c2", (TextPart("two more"),)))
    total = counter.count_messages(history)

    assert encoder.texts == ["one", "two more"]
    assert total == 2 * MESSAGE_TOKENS + 1 + 2 * TOOL_RESULT_TOKENS + 3


def test_a_replaced_or_removed_message_is_not_counted_from_the_cache() -> None:
    encoder = CountingEncoder()
    counter = TokenCounter(encoder)
    history = [Message("user", [TextPart(words(4))]), Message("assistant", [TextPart(words(6))])]
    counter.count_messages(history)

    assert counter.count_messages(history[:1]) == MESSAGE_TOKENS + 4
    history[1] = Message("assistant", [TextPart(words(2))])
    assert counter.count_messages(history) == 2 * MESSAGE_TOKENS + 6


def test_the_system_prompt_and_tools_are_counted_once_per_change() -> None:
    encoder = CountingEncoder()
    counter = TokenCounter(encoder)
    tools = [ToolSpec("read", "Read a file.", {"type": "object"})]

    first = counter.count_prompt("Be brief.", tools)
    calls = len(encoder.texts)
    assert counter.count_prompt("Be brief.", list(tools)) == first
    assert len(encoder.texts) == calls
    assert counter.count_prompt("Be very brief.", tools) == first + 1


# --- cost ---------------------------------------------------------------------------------

USAGE = Usage(
    input_tokens=2_000, output_tokens=1_000, cache_read_tokens=10_000, cache_write_tokens=4_000
)


def test_cost_uses_the_cache_prices_when_given() -> None:
    prices = Prices(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75)

    assert cost(USAGE, prices) == pytest.approx(
        (2_000 * 3.0 + 1_000 * 15.0 + 10_000 * 0.3 + 4_000 * 3.75) / 1e6
    )


def test_cost_prices_cache_tokens_as_input_without_cache_prices() -> None:
    prices = Prices(input=2.0, output=8.0)

    assert cost(USAGE, prices) == pytest.approx((16_000 * 2.0 + 1_000 * 8.0) / 1e6)


def test_cost_without_prices_is_unknown() -> None:
    assert cost(USAGE, None) is None


# --- the meter ----------------------------------------------------------------------------

HISTORY = [Message("user", [TextPart(words(10))]), Message("assistant", [TextPart(words(4))])]


def test_reported_usage_gives_the_context_figure_and_the_running_cost() -> None:
    meter = UsageMeter(
        Prices(input=1.0, output=2.0, cache_read=0.5), TokenCounter(CountingEncoder())
    )

    used, cost_so_far, estimated = meter.after_call(
        HISTORY, Usage(input_tokens=100, output_tokens=50, cache_read_tokens=1_000)
    )
    assert (used, estimated) == (1_150, False)
    assert cost_so_far == pytest.approx((100 * 1.0 + 50 * 2.0 + 1_000 * 0.5) / 1e6)

    reading = meter.after_call(HISTORY, Usage(input_tokens=200, output_tokens=10))
    assert reading.used == 210
    assert reading.cost_usd == pytest.approx((700 + 200 + 20) / 1e6)


def test_without_reported_usage_the_history_is_estimated_and_priced() -> None:
    encoder = CountingEncoder()
    meter = UsageMeter(Prices(input=1.0, output=1.0), TokenCounter(encoder))
    tools = [ToolSpec("read", "Read it", {})]

    reading = meter.after_call(HISTORY, None, system="Be brief", tools=tools)

    counter = TokenCounter(CountingEncoder())
    expected = counter.count_request("Be brief", HISTORY, tools)
    assert reading.used == expected
    assert reading.estimated
    assert reading.cost_usd == pytest.approx(expected / 1e6)

    encoder.texts.clear()
    meter.after_call(
        [*HISTORY, Message("user", [TextPart("next")])], None, system="Be brief", tools=tools
    )
    assert encoder.texts == ["next"]  # only the new message was tokenized


def test_a_report_of_all_zeros_counts_as_no_report() -> None:
    meter = UsageMeter(None, TokenCounter(CountingEncoder()))

    reading = meter.after_call(HISTORY, Usage())

    assert reading.estimated
    assert reading.used > 0


def test_unknown_prices_give_no_cost_and_later_prices_start_counting() -> None:
    meter = UsageMeter(None, TokenCounter(encoding=None))

    assert meter.after_call(HISTORY, Usage(input_tokens=10, output_tokens=5)).cost_usd is None

    meter.prices = Prices(input=1.0, output=1.0)
    assert meter.after_call(HISTORY, Usage(input_tokens=10, output_tokens=5)).cost_usd == (
        pytest.approx(15 / 1e6)
    )
    meter.prices = None
    assert meter.after_call(HISTORY, Usage(input_tokens=10, output_tokens=5)).cost_usd == (
        pytest.approx(15 / 1e6)
    )


def test_the_default_counter_needs_no_network() -> None:
    meter = UsageMeter()

    assert meter.after_call(HISTORY, None).used > 0
    assert usage_module.load_encoder() is None
