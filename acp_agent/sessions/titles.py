"""A session's title: its first prompt cut to a line at once, then, when the config names a
`title_model`, a few words that model writes from that prompt. The prompt's answer never
waits for the model's title: it is written beside the turns and replaces the first one when
it comes; a title model that fails or takes too long leaves the first-prompt title.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..messages import Message, Part, ResourceLinkPart, RetryNotice, TextDelta, TextPart
from ..providers import ModelRequest, Provider

TITLE_CHARS = 60
TITLE_SECONDS = 30.0
"""Time the title model has; after it the first-prompt title stays."""
PROMPT_CHARS = 4000
"""Of the first prompt, what the title model reads."""
TITLE_TOKENS = 40
TITLE_INSTRUCTIONS = (
    "You name coding sessions. Reply with a title of at most six words for the session "
    "that starts with the user's message below: the title alone, no quotes, no trailing "
    "punctuation, no explanation. Do not answer the message itself."
)


def first_prompt_title(history: Sequence[Message]) -> str | None:
    """The session's first prompt, cut to a short line; None when it has no words."""
    return shortened(first_prompt_text(history))


def first_prompt_text(history: Sequence[Message]) -> str:
    """The words of the session's first prompt as the user typed them (a mention: `@name`)."""
    first = next((m for m in history if m.role == "user"), None)
    return " ".join(_typed_text(part) for part in first.parts) if first else ""


async def generated_title(provider: Provider, model_id: str, prompt_text: str) -> str | None:
    """The title the model writes for a session starting with `prompt_text`; None when it
    wrote nothing usable. Provider errors propagate."""
    request = ModelRequest(
        model=model_id,
        system=TITLE_INSTRUCTIONS,
        messages=[Message("user", [TextPart(prompt_text[:PROMPT_CHARS])])],
        max_output_tokens=TITLE_TOKENS,
    )
    written: list[str] = []
    async with provider.stream(request) as events:
        async for event in events:
            if isinstance(event, TextDelta):
                written.append(event.text)
            elif isinstance(event, RetryNotice) and event.restarts_reply:
                written = []
    return cleaned("".join(written))


def cleaned(text: str) -> str | None:
    """The first line of what the model wrote, without the quotes, markdown and trailing
    punctuation models add, cut to a short line."""
    line = next((line for line in text.splitlines() if line.strip()), "")
    line = line.strip().lstrip("#").strip().removeprefix("Title:").strip()
    line = line.strip("\"'`*_ ").rstrip(".!:;, ")
    return shortened(line)


def shortened(text: str) -> str | None:
    words = " ".join(text.split())
    if not words:
        return None
    if len(words) <= TITLE_CHARS:
        return words
    cut = words[: TITLE_CHARS - 1].rsplit(" ", 1)[0] or words[: TITLE_CHARS - 1]
    return cut + "…"


def _typed_text(part: Part) -> str:
    if isinstance(part, TextPart):
        return part.text
    return f"@{part.name}" if isinstance(part, ResourceLinkPart) else ""
