"""PDFs, images and mentions in requests: each vendor's document and image input for
models that read them, a note for the others (`models[].documents`, `models[].images`), a
mention's link where it was typed and what was read for it after; and what they count for."""

from __future__ import annotations

import base64
from typing import Any

import pytest
import respx
from provider_support import collect, sent_body, sse

from acp_agent.config import (
    AnthropicProviderConfig,
    EchoProviderConfig,
    ModelConfig,
    OpenAIProviderConfig,
)
from acp_agent.messages import (
    DocumentPart,
    ImagePart,
    Message,
    ResourceLinkPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from acp_agent.providers import ModelRequest
from acp_agent.providers.anthropic import AnthropicProvider
from acp_agent.providers.echo import EchoProvider
from acp_agent.providers.openai_chat import OpenAIChatProvider
from acp_agent.providers.usage import DOCUMENT_PAGE_TOKENS, TokenCounter, document_tokens

pytestmark = pytest.mark.anyio

PDF = (
    b"%PDF-1.4\n1 0 obj << /Type /Pages /Kids [2 0 R 3 0 R] >>\n"
    b"2 0 obj << /Type /Page >>\n3 0 obj << /Type/Page >>\n%%EOF"
)
DATA = base64.b64encode(PDF).decode()
DOCUMENT = DocumentPart(DATA, "application/pdf", "spec.pdf")
MENTION = ResourceLinkPart(
    "file:///w/app.py#L1-2",
    "app.py",
    context=(TextPart('<file path="/w/app.py" lines="1-2">\na = 1\nb = 2\n</file>'),),
)
PROMPT = Message("user", [TextPart("read "), MENTION, TextPart(" and "), DOCUMENT])
MESSAGES_URL = "https://api.anthropic.com/v1/messages"
CHAT_URL = "https://api.openai.com/v1/chat/completions"
RESPONSES_URL = "https://api.openai.com/v1/responses"
LOCAL_URL = "http://localhost:11434/v1/chat/completions"
NOTE = (
    "[document spec.pdf (application/pdf) not sent: this model is not set up to read "
    "documents (models[].documents in the agent's config)]"
)
TYPED = "read [@app.py](file:///w/app.py#L1-2) and "
READ = '<file path="/w/app.py" lines="1-2">\na = 1\nb = 2\n</file>'


def anthropic(**model: Any) -> AnthropicProvider:
    config = AnthropicProviderConfig(
        type="anthropic",
        models=(ModelConfig(id="claude", **model),),
        prompt_caching=False,
    )
    return AnthropicProvider("anthropic", config, {"ANTHROPIC_API_KEY": "sk-ant-test"})


def openai(provider_type: str = "openai", **model: Any) -> OpenAIChatProvider:
    config = OpenAIProviderConfig(
        type=provider_type,  # type: ignore[arg-type]
        base_url="http://localhost:11434/v1" if provider_type == "openai-compatible" else None,
        models=(ModelConfig(id="gpt", **model), ModelConfig(id="resp", api="responses", **model)),
    )
    return OpenAIChatProvider("openai", config, {"OPENAI_API_KEY": "sk-test"})


def request(model: str) -> ModelRequest:
    return ModelRequest(model=model, system="", messages=[PROMPT])


@respx.mock
async def test_anthropic_models_get_pdfs_as_document_blocks_after_the_typed_words() -> None:
    route = respx.post(MESSAGES_URL).mock(return_value=sse("anthropic_text.sse"))
    provider = anthropic()
    await collect(provider, request("claude"))
    await provider.aclose()

    assert sent_body(route)["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": TYPED},
                {
                    "type": "document",
                    "source": {"type": "base64", "media_type": "application/pdf", "data": DATA},
                    "title": "spec.pdf",
                },
                {"type": "text", "text": READ},
            ],
        }
    ]


@respx.mock
async def test_an_anthropic_model_configured_without_documents_gets_a_note() -> None:
    route = respx.post(MESSAGES_URL).mock(return_value=sse("anthropic_text.sse"))
    provider = anthropic(documents=False)
    await collect(provider, request("claude"))
    await provider.aclose()

    content = sent_body(route)["messages"][0]["content"]
    assert content[1] == {"type": "text", "text": NOTE}
    assert "document" not in [block["type"] for block in content]


@respx.mock
async def test_openai_chat_models_get_pdfs_as_file_parts() -> None:
    route = respx.post(CHAT_URL).mock(return_value=sse("openai_text.sse"))
    provider = openai()
    await collect(provider, request("gpt"))
    await provider.aclose()

    assert sent_body(route)["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": TYPED},
                {
                    "type": "file",
                    "file": {
                        "filename": "spec.pdf",
                        "file_data": f"data:application/pdf;base64,{DATA}",
                    },
                },
                {"type": "text", "text": READ},
            ],
        }
    ]


@respx.mock
async def test_openai_responses_models_get_pdfs_as_input_files() -> None:
    route = respx.post(RESPONSES_URL).mock(return_value=sse("openai_responses_text.sse"))
    provider = openai()
    await collect(provider, request("resp"))
    await provider.aclose()

    assert sent_body(route)["input"] == [
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": TYPED},
                {
                    "type": "input_file",
                    "filename": "spec.pdf",
                    "file_data": f"data:application/pdf;base64,{DATA}",
                },
                {"type": "input_text", "text": READ},
            ],
        }
    ]


@respx.mock
async def test_a_compatible_server_gets_a_note_unless_its_model_says_it_reads_documents() -> None:
    route = respx.post(LOCAL_URL).mock(side_effect=lambda _: sse("openai_text.sse"))
    plain, reader = openai("openai-compatible"), openai("openai-compatible", documents=True)
    await collect(plain, request("gpt"))
    # All text: one string, as older servers want it.
    assert sent_body(route)["messages"][0]["content"] == f"{TYPED}\n{NOTE}\n{READ}"
    await collect(reader, request("gpt"))
    assert sent_body(route)["messages"][0]["content"][1]["type"] == "file"
    await plain.aclose()
    await reader.aclose()


@respx.mock
async def test_one_provider_sends_each_model_what_it_reads_from_one_history() -> None:
    config = OpenAIProviderConfig(
        type="openai",
        models=(ModelConfig(id="gpt"), ModelConfig(id="mini", documents=False)),
    )
    provider = OpenAIChatProvider("openai", config, {"OPENAI_API_KEY": "sk-test"})
    route = respx.post(CHAT_URL).mock(side_effect=lambda _: sse("openai_text.sse"))
    for model in ("gpt", "mini", "gpt"):
        await collect(provider, request(model))
        content = sent_body(route)["messages"][0]["content"]
        if model == "gpt":
            assert content[1]["type"] == "file"
        else:
            assert content == f"{TYPED}\n{NOTE}\n{READ}"
    await provider.aclose()


PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
    "+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
IMAGE_NOTE = (
    "[image (image/png) not sent: this model does not read images (models[].images in the "
    "agent's config)]"
)
PICTURE_MENTION = ResourceLinkPart(
    "file:///w/shot.png", "shot.png", "image/png", context=(ImagePart(PNG, "image/png"),)
)


def image_history() -> list[Message]:
    """An image typed, an image mentioned, and an image a tool returned."""
    return [
        Message("user", [TextPart("look "), ImagePart(PNG, "image/png"), PICTURE_MENTION]),
        Message("assistant", [ToolCallPart("call_1", "screenshot", {})]),
        Message(
            "tool", [ToolResultPart("call_1", (TextPart("taken"), ImagePart(PNG, "image/png")))]
        ),
    ]


def text_only_anthropic() -> AnthropicProvider:
    config = AnthropicProviderConfig(
        type="anthropic",
        models=(ModelConfig(id="claude"), ModelConfig(id="text-only", images=False)),
        prompt_caching=False,
    )
    return AnthropicProvider("anthropic", config, {"ANTHROPIC_API_KEY": "sk-ant-test"})


@respx.mock
async def test_a_model_that_reads_no_images_gets_notes_and_the_next_model_the_images() -> None:
    """A session that switches to a text-only model keeps working: every image of its
    history (typed, mentioned, from a tool) is a note for that model, and the images are
    still there for a model that reads them."""
    route = respx.post(MESSAGES_URL).mock(side_effect=lambda _: sse("anthropic_text.sse"))
    provider = text_only_anthropic()
    history = image_history()
    bodies = []
    for model in ("text-only", "claude"):
        await collect(provider, ModelRequest(model=model, system="", messages=history))
        bodies.append(str(sent_body(route)["messages"]))
    await provider.aclose()

    text_only, reader = bodies
    assert text_only.count(IMAGE_NOTE) == 3 and PNG not in text_only
    assert reader.count(PNG) == 3 and IMAGE_NOTE not in reader


@respx.mock
@pytest.mark.parametrize(
    ("model", "url", "fixture"),
    [
        ("gpt", CHAT_URL, "openai_text.sse"),
        ("resp", RESPONSES_URL, "openai_responses_text.sse"),
    ],
)
async def test_openai_models_that_read_no_images_get_notes(
    model: str, url: str, fixture: str
) -> None:
    route = respx.post(url).mock(side_effect=lambda _: sse(fixture))
    provider = openai(images=False)
    await collect(provider, ModelRequest(model=model, system="", messages=image_history()))
    await provider.aclose()

    sent = str(sent_body(route))
    assert PNG not in sent
    assert sent.count(IMAGE_NOTE) == 3


async def test_echo_shows_the_link_and_what_was_read_without_obeying_it() -> None:
    scripted = ResourceLinkPart("file:///w/x", "x", context=(TextPart("@stop refusal"),))
    provider = EchoProvider("echo", EchoProviderConfig(type="echo"))
    events = await collect(
        provider,
        ModelRequest(model="echo", system="", messages=[Message("user", [scripted, DOCUMENT])]),
    )
    text = "".join(getattr(event, "text", "") for event in events)
    assert text == "Echo: [@x](file:///w/x)\n[document: spec.pdf (application/pdf)]\n@stop refusal"


def test_a_pdf_counts_per_page_and_a_mention_counts_what_was_read() -> None:
    assert document_tokens(DOCUMENT) == 2 * DOCUMENT_PAGE_TOKENS
    counter = TokenCounter(encoding=None)
    image = ImagePart("aW1n", "image/png")
    without = counter.count_message(Message("user", [TextPart("read "), TextPart(" and ")]))
    with_read = counter.count_message(
        Message("user", [TextPart("read "), MENTION, TextPart(" and ")])
    )
    assert with_read == without + counter.count_text(MENTION.link) + counter.count_text(READ)
    assert counter.count_message(Message("user", [image, DOCUMENT])) > 2 * DOCUMENT_PAGE_TOKENS
