"""Token counting, the context figure shown to the user, and the cost of a session.

`TokenCounter` counts the tokens of neutral messages: exactly with tiktoken when its
encoding file is already on disk, never downloading it (tiktoken fetches encodings from
the network on first use; we look for its cached file first), else with an estimate:

    tokens(text)   = ceil(len(text) / 4)      OpenAI's rule of thumb for English prose; code
                                              and JSON run ~10-25% above it with o200k_base
    per message    + 4  (role and separators: the 3 of OpenAI's chat format, plus one)
    per request    + 3  (the reply's priming)
    per image      765  (a 1024x1024 image at high detail on OpenAI; Anthropic's
                          (w*h)/750 comes to ~1400 for the same image)
    per document  2000 a page (a PDF's `/Type /Page` objects, else one per 50 kB)
    per tool call / result / tool definition   + 3 / + 3 / + 8 for their framing

The estimate matters only where a server reports no usage, so it aims at "about right"
for the context meter, not at billing. Counting is incremental: a message is tokenized
once, and again only when its parts change (see `TokenCounter.count_messages`).

`UsageMeter` turns each model call into the figures the engine reports: `used`, the
context the next request would carry, and the session's cost from the model's `Prices`.
A finished call's report (its input, cache and output tokens: the request and the reply,
both of which the next request carries) is the figure; the messages added after it (tool
results, the next prompt) and every call that broke off (cancelled, failed: its report
describes a request, not the history as it now stands) add the counter's estimate of
what they added to the last figure, so the meter never jumps between a vendor's count and
ours. With no figure to start from, the whole request is estimated.

`Usage` fields are disjoint: `input_tokens` excludes cache reads and writes, as the
providers report it (OpenAI's totals are split by the mappers).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import logging
import math
import os
import re
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, Protocol

from ..messages import (
    DocumentPart,
    ImagePart,
    Message,
    Part,
    ResourceLinkPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
    Usage,
)

if TYPE_CHECKING:
    from ..config import LongContextPrices, Prices

log = logging.getLogger(__name__)

DEFAULT_ENCODING = "o200k_base"
CHARS_PER_TOKEN = 4
MESSAGE_TOKENS = 4
REQUEST_TOKENS = 3
IMAGE_TOKENS = 765
DOCUMENT_PAGE_TOKENS = 2_000
"""A PDF page: its text (Anthropic: 1,500-3,000 tokens a page) plus the page's image."""
PDF_BYTES_PER_PAGE = 50_000
"""For a PDF whose pages cannot be counted."""
TOOL_CALL_TOKENS = 3
TOOL_RESULT_TOKENS = 3
TOOL_SPEC_TOKENS = 8
_TOKENS_PER_MILLION = 1_000_000
# Encodings tiktoken loads from one `.tiktoken` file of this name at this address.
_ENCODING_URL = "https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"
_FILE_ENCODINGS = frozenset({"o200k_base", "cl100k_base", "p50k_base", "r50k_base"})


class Encoder(Protocol):
    """What the counter needs of a tokenizer (a `tiktoken.Encoding` is one)."""

    def encode_ordinary(self, text: str) -> list[int]: ...


def load_encoder(name: str = DEFAULT_ENCODING) -> Encoder | None:
    """tiktoken's encoding `name` if its file is in tiktoken's cache; None otherwise.

    Never downloads: the cache directory is found as tiktoken finds it
    (`TIKTOKEN_CACHE_DIR`, `DATA_GYM_CACHE_DIR`, else `<tmp>/data-gym-cache`). Parsing the
    file takes a fraction of a second: call it from a worker thread when that matters.
    """
    if name not in _FILE_ENCODINGS:
        return None
    cache_dir = _tiktoken_cache_dir()
    if not cache_dir:
        return None  # caching disabled: tiktoken would download on every load
    url = _ENCODING_URL.format(name=name)
    cached = os.path.join(cache_dir, hashlib.sha1(url.encode()).hexdigest())
    if not os.path.isfile(cached):
        return None
    try:
        import tiktoken

        encoding: Encoder = tiktoken.get_encoding(name)
    except Exception as exc:  # a damaged cache file, an old tiktoken ...: estimate instead
        log.warning("token counts are estimates: cannot load tiktoken %s: %s", name, exc)
        return None
    return encoding


def _tiktoken_cache_dir() -> str:
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        return os.environ["TIKTOKEN_CACHE_DIR"]
    if "DATA_GYM_CACHE_DIR" in os.environ:
        return os.environ["DATA_GYM_CACHE_DIR"]
    return os.path.join(tempfile.gettempdir(), "data-gym-cache")


@dataclass(slots=True)
class _Counted:
    message: Message
    parts: int
    last_part: Part | None
    tokens: int


class TokenCounter:
    """Tokens of messages, tool definitions and prompts; exact if an encoder is available.

    `encoder`: the tokenizer to use. Without one, tiktoken's `encoding` is loaded on first
    use if it is cached on disk (see `load_encoder`); `encoding=None` always estimates.
    `load`: what gives the tokenizer (or None) on first use, in place of `encoding`.
    """

    def __init__(
        self,
        encoder: Encoder | None = None,
        *,
        encoding: str | None = DEFAULT_ENCODING,
        load: Callable[[], Encoder | None] | None = None,
    ) -> None:
        self._encoder = encoder
        if encoder is None and load is None and encoding is not None:
            load = functools.partial(load_encoder, encoding)
        self._load = None if encoder is not None else load
        self._history: list[_Counted] = []
        self._prompt: tuple[str, tuple[ToolSpec, ...], int] | None = None

    @property
    def exact(self) -> bool:
        """Whether counts come from a tokenizer rather than the estimate."""
        return self._get_encoder() is not None

    def count_text(self, text: str) -> int:
        if not text:
            return 0
        encoder = self._get_encoder()
        if encoder is None:
            return math.ceil(len(text) / CHARS_PER_TOKEN)
        return len(encoder.encode_ordinary(text))

    def count_message(self, message: Message) -> int:
        return MESSAGE_TOKENS + sum(self._count_part(part) for part in message.parts)

    def count_messages(self, messages: Sequence[Message]) -> int:
        """The tokens of `messages`; see `message_counts` for what is counted again."""
        return sum(self.message_counts(messages))

    def message_counts(self, messages: Sequence[Message]) -> list[int]:
        """Tokens per message, counting only messages not seen at their position before.

        A message is recounted when a different object sits at its index, or when its
        parts list changed length or last part (a tool message filling up); so a history
        that grows by appending is tokenized once. Parts replaced in place, keeping the
        count and the last part, are not noticed: parts are immutable by convention.
        """
        counted = self._history
        del counted[len(messages) :]
        counts: list[int] = []
        for index, message in enumerate(messages):
            parts = message.parts
            last = parts[-1] if parts else None
            if index < len(counted):
                entry = counted[index]
                if (
                    entry.message is message
                    and entry.parts == len(parts)
                    and entry.last_part is last
                ):
                    counts.append(entry.tokens)
                    continue
            entry = _Counted(message, len(parts), last, self.count_message(message))
            if index < len(counted):
                counted[index] = entry
            else:
                counted.append(entry)
            counts.append(entry.tokens)
        return counts

    def count_tools(self, tools: Sequence[ToolSpec]) -> int:
        return sum(
            TOOL_SPEC_TOKENS
            + self.count_text(tool.name)
            + self.count_text(tool.description)
            + self.count_text(json.dumps(tool.parameters))
            for tool in tools
        )

    def count_request(
        self, system: str, messages: Sequence[Message], tools: Sequence[ToolSpec] = ()
    ) -> int:
        """What a request with this system prompt, history and tools sends, in tokens."""
        return REQUEST_TOKENS + self.count_prompt(system, tools) + self.count_messages(messages)

    def count_prompt(self, system: str, tools: Sequence[ToolSpec] = ()) -> int:
        """The system prompt and tool definitions; the same pair again is not recounted."""
        specs = tuple(tools)
        if self._prompt is not None:
            last_system, last_tools, tokens = self._prompt
            same_tools = len(last_tools) == len(specs) and all(
                a is b or a == b for a, b in zip(last_tools, specs, strict=True)
            )
            if last_system == system and same_tools:
                return tokens
        tokens = (MESSAGE_TOKENS + self.count_text(system) if system else 0) + self.count_tools(
            specs
        )
        self._prompt = (system, specs, tokens)
        return tokens

    def _count_part(self, part: Part) -> int:
        match part:
            case TextPart(text=text) | ThinkingPart(text=text):
                return self.count_text(text)
            case ImagePart():
                return IMAGE_TOKENS
            case DocumentPart():
                return document_tokens(part)
            case ResourceLinkPart(context=context):
                return self.count_text(part.link) + sum(
                    self._count_part(item) for item in context or ()
                )
            case ToolCallPart(name=name, arguments=arguments):
                return (
                    TOOL_CALL_TOKENS
                    + self.count_text(name)
                    + self.count_text(json.dumps(arguments))
                )
            case ToolResultPart(content=content):
                return TOOL_RESULT_TOKENS + sum(self._count_part(item) for item in content)

    def _get_encoder(self) -> Encoder | None:
        if self._load is not None:
            self._encoder = self._load()
            self._load = None  # one try: a missing file does not appear mid-session
        return self._encoder


_PDF_PAGE = re.compile(rb"/Type\s*/Page(?![a-zA-Z])")


def document_tokens(part: DocumentPart) -> int:
    """About what a document costs a model that reads it: per page."""
    try:
        data = base64.b64decode(part.data)
    except ValueError:
        return DOCUMENT_PAGE_TOKENS
    pages = len(_PDF_PAGE.findall(data)) or math.ceil(len(data) / PDF_BYTES_PER_PAGE)
    return max(1, pages) * DOCUMENT_PAGE_TOKENS


def cost(usage: Usage, prices: Prices | None) -> float | None:
    """US dollars for `usage` at `prices` (per million tokens); None without prices.

    Cache reads and writes use their own prices when given, else the input price. A call
    whose input (cache included) passes `prices.long_context.above` tokens is charged the
    long-context rates for all its tokens.
    """
    if prices is None:
        return None
    rates: Prices | LongContextPrices = prices
    read = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
    if prices.long_context is not None and read > prices.long_context.above:
        rates = prices.long_context
    cache_read = rates.cache_read if rates.cache_read is not None else rates.input
    cache_write = rates.cache_write if rates.cache_write is not None else rates.input
    dollars_per_million = (
        usage.input_tokens * rates.input
        + usage.cache_read_tokens * cache_read
        + usage.cache_write_tokens * cache_write
        + usage.output_tokens * rates.output
    )
    return dollars_per_million / _TOKENS_PER_MILLION


def context_tokens(usage: Usage) -> int:
    """The context one call took: everything it read plus everything it wrote."""
    return (
        usage.input_tokens
        + usage.cache_read_tokens
        + usage.cache_write_tokens
        + usage.output_tokens
    )


class Reading(NamedTuple):
    used: int
    """Tokens of the context window the conversation takes now."""
    cost_usd: float | None
    """The session's cost so far; None while no call had prices."""
    estimated: bool
    """`used` (and this call's cost) came from the token counter, not the vendor."""


class UsageMeter:
    """Per session: the context figure and the running cost, updated after each model call.

    `prices` may be changed when the session switches model; the cost so far is kept.
    """

    def __init__(self, prices: Prices | None = None, counter: TokenCounter | None = None) -> None:
        self.prices = prices
        self.counter = counter if counter is not None else TokenCounter()
        self.cost_usd: float | None = None
        self.last: Reading | None = None
        self.messages: int | None = None
        """How many messages of the history `last` covers (None: not known)."""
        self._prompt: tuple[str, tuple[ToolSpec, ...]] = ("", ())
        """The system prompt and tools of the last request: estimated when nothing else
        covers them."""

    def after_call(
        self,
        history: Sequence[Message],
        reported: Usage | None,
        *,
        system: str = "",
        tools: Sequence[ToolSpec] = (),
        finished: bool = True,
    ) -> Reading:
        """Account for one model call.

        `history`: the conversation after the call, with what it replied (also the part
        of a reply a call streamed before it broke off); `reported`: the last `Usage` event
        of the call, or None if none came; `system` and `tools`: what the request carried;
        `finished`: False for a call that was cancelled or failed.

        A call is charged what it reported; without a report, a finished call and one that
        broke off after replying something are charged the estimate (a call that failed
        before any reply was, as far as we know, not billed).
        """
        self._prompt = (system, tuple(tools))
        charged = False
        if reported is not None and context_tokens(reported) > 0:  # zeros: no report
            self.charge(reported)
            if finished:
                return self._read(context_tokens(reported), history, estimated=False)
            charged = True
        used, estimated, reply = self._grown(history)
        if not charged and (finished or reply):
            self.charge(Usage(input_tokens=max(0, used - reply), output_tokens=reply))
        return self._read(used, history, estimated)

    def after_change(self, history: Sequence[Message]) -> Reading | None:
        """The figure for a history that changed without a model call since the last one
        (the results of a tool round the turn ended in); None when nothing changed, or no
        figure was taken yet (the next call measures it all)."""
        if self.last is None or self.messages is None or self.messages == len(history):
            return None
        used, estimated, _ = self._grown(history)
        return self._read(used, history, estimated)

    def _grown(self, history: Sequence[Message]) -> tuple[int, bool, int]:
        """(tokens, estimated, reply): the context `history` takes, as the last figure plus
        an estimate of the messages added since (all of it, without a figure that covers
        its start); `reply`: the tokens of a reply among the added messages, if it ends
        in one."""
        counts = self.counter.message_counts(history)
        covered = self.messages
        last = self.last
        if last is None or covered is None or covered > len(history):
            system, tools = self._prompt
            used = REQUEST_TOKENS + self.counter.count_prompt(system, tools) + sum(counts)
            covered, estimated = 0, True
        else:
            used, estimated = last.used + sum(counts[covered:]), last.estimated
        ends_in_reply = len(history) > covered and history[-1].role == "assistant"
        return used, estimated, counts[-1] if ends_in_reply else 0

    def _read(self, used: int, history: Sequence[Message], estimated: bool) -> Reading:
        self.last = Reading(used=used, cost_usd=self.cost_usd, estimated=estimated)
        self.messages = len(history)
        return self.last

    def charge(self, usage: Usage) -> None:
        """Add the cost of a call to the session's (also of one outside the conversation,
        such as a summary of it)."""
        call_cost = cost(usage, self.prices)
        if call_cost is not None:
            self.cost_usd = (self.cost_usd or 0.0) + call_cost
