"""An image `read_file` gave, as each vendor is sent it: inside Anthropic's tool result, in
the Responses API's function call output, and (Chat Completions tool messages taking text
only) in a user message right after the tool messages; a note for a model that reads no
images, the image still in the history for the next model."""

from __future__ import annotations

import base64
import io
from pathlib import Path
from typing import Any

import pytest
import respx
from PIL import Image
from provider_support import collect, sent_body, sse

from acp_agent.config import AnthropicProviderConfig, ModelConfig, OpenAIProviderConfig
from acp_agent.messages import Message, TextPart, ToolCallPart, ToolResultPart
from acp_agent.providers import ModelRequest
from acp_agent.providers.anthropic import AnthropicProvider
from acp_agent.providers.openai_chat import OpenAIChatProvider
from acp_agent.tools import ToolContext
from acp_agent.tools.local import LocalEditor
from acp_agent.tools.read_file import ReadFile, ReadFileParams

pytestmark = pytest.mark.anyio

MESSAGES_URL = "https://api.anthropic.com/v1/messages"
CHAT_URL = "https://api.openai.com/v1/chat/completions"
RESPONSES_URL = "https://api.openai.com/v1/responses"
NOTE = (
    "[image (image/png) not sent: this model does not read images (models[].images in the "
    "agent's config)]"
)


async def history_with_a_read_image(tmp_path: Path) -> tuple[list[Message], str, str]:
    """A prompt, the model's read_file call of a PNG, and the result the tool gave (as the
    engine makes it); with the PNG's base64 and the result's text."""
    picture = io.BytesIO()
    Image.new("RGB", (40, 30), "teal").save(picture, "PNG")
    (tmp_path / "shot.png").write_bytes(picture.getvalue())
    ctx = ToolContext(session_id="s", cwd=tmp_path, roots=(tmp_path,), editor=LocalEditor())
    outcome = await ReadFile().run(ReadFileParams(path="shot.png"), ctx)
    history = [
        Message("user", [TextPart("what is in shot.png?")]),
        Message("assistant", [ToolCallPart("call_1", "read_file", {"path": "shot.png"})]),
        Message("tool", [ToolResultPart("call_1", outcome.model_parts)]),
    ]
    return history, base64.b64encode(picture.getvalue()).decode(), outcome.model_text


def anthropic(**model: Any) -> AnthropicProvider:
    config = AnthropicProviderConfig(
        type="anthropic", models=(ModelConfig(id="claude", **model),), prompt_caching=False
    )
    return AnthropicProvider("anthropic", config, {"ANTHROPIC_API_KEY": "sk-ant-test"})


def openai(**model: Any) -> OpenAIChatProvider:
    config = OpenAIProviderConfig(
        type="openai",
        models=(ModelConfig(id="gpt", **model), ModelConfig(id="resp", api="responses", **model)),
    )
    return OpenAIChatProvider("openai", config, {"OPENAI_API_KEY": "sk-test"})


@respx.mock
async def test_anthropic_gets_the_image_inside_the_tool_result(tmp_path: Path) -> None:
    history, png, text = await history_with_a_read_image(tmp_path)
    route = respx.post(MESSAGES_URL).mock(return_value=sse("anthropic_text.sse"))
    provider = anthropic()
    await collect(provider, ModelRequest(model="claude", system="", messages=history))
    await provider.aclose()

    result = sent_body(route)["messages"][-1]
    assert result == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "call_1",
                "content": [
                    {"type": "text", "text": text},
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": png},
                    },
                ],
            }
        ],
    }
    assert text == f"Image {tmp_path / 'shot.png'}: image/png 40x30, 1 KB"


@respx.mock
async def test_chat_completions_gets_the_image_in_a_user_message_after_the_tool_message(
    tmp_path: Path,
) -> None:
    history, png, text = await history_with_a_read_image(tmp_path)
    route = respx.post(CHAT_URL).mock(return_value=sse("openai_text.sse"))
    provider = openai()
    await collect(provider, ModelRequest(model="gpt", system="", messages=history))
    await provider.aclose()

    *_, call, tool, images = sent_body(route)["messages"]
    assert call["tool_calls"][0]["id"] == "call_1"
    assert tool == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": f"{text}\n[image (image/png): in the user message after the tool results]",
    }
    assert images == {
        "role": "user",
        "content": [
            {"type": "text", "text": "[tool call call_1 returned:]"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{png}"}},
        ],
    }


@respx.mock
async def test_chat_completions_puts_the_images_of_parallel_calls_after_all_tool_messages(
    tmp_path: Path,
) -> None:
    history, png, _ = await history_with_a_read_image(tmp_path)
    call, result = history[1], history[2]
    [image_result] = result.parts
    assert isinstance(image_result, ToolResultPart)
    call.parts.append(ToolCallPart("call_2", "read_file", {"path": "a.txt"}))
    result.parts.append(ToolResultPart("call_2", (TextPart("     1\ttext"),)))
    call.parts.append(ToolCallPart("call_3", "read_file", {"path": "shot.png"}))
    result.parts.append(ToolResultPart("call_3", image_result.content))
    route = respx.post(CHAT_URL).mock(return_value=sse("openai_text.sse"))
    provider = openai()
    await collect(provider, ModelRequest(model="gpt", system="", messages=history))
    await provider.aclose()

    *_, first, second, third, images = sent_body(route)["messages"]
    assert [m["role"] for m in (first, second, third)] == ["tool", "tool", "tool"]
    assert [m["tool_call_id"] for m in (first, second, third)] == ["call_1", "call_2", "call_3"]
    url = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{png}"}}
    assert images["content"] == [
        {"type": "text", "text": "[tool call call_1 returned:]"},
        url,
        {"type": "text", "text": "[tool call call_3 returned:]"},
        url,
    ]


@respx.mock
async def test_the_responses_api_gets_the_image_in_the_function_call_output(
    tmp_path: Path,
) -> None:
    history, png, text = await history_with_a_read_image(tmp_path)
    route = respx.post(RESPONSES_URL).mock(return_value=sse("openai_responses_text.sse"))
    provider = openai()
    await collect(provider, ModelRequest(model="resp", system="", messages=history))
    await provider.aclose()

    assert sent_body(route)["input"][-1] == {
        "type": "function_call_output",
        "call_id": "call_1",
        "output": [
            {"type": "input_text", "text": text},
            {"type": "input_image", "image_url": f"data:image/png;base64,{png}"},
        ],
    }


@respx.mock
@pytest.mark.parametrize(
    ("model", "url", "fixture"),
    [
        ("gpt", CHAT_URL, "openai_text.sse"),
        ("resp", RESPONSES_URL, "openai_responses_text.sse"),
    ],
)
async def test_an_openai_model_that_reads_no_images_gets_the_text_and_a_note(
    tmp_path: Path, model: str, url: str, fixture: str
) -> None:
    history, png, text = await history_with_a_read_image(tmp_path)
    route = respx.post(url).mock(return_value=sse(fixture))
    provider = openai(images=False)
    await collect(provider, ModelRequest(model=model, system="", messages=history))
    await provider.aclose()

    body = sent_body(route)
    sent = str(body)
    assert png not in sent
    assert text in sent and sent.count(NOTE) == 1
    if model == "gpt":
        assert body["messages"][-1]["role"] == "tool", "no image, so no user message after it"


@respx.mock
async def test_an_anthropic_model_that_reads_no_images_gets_a_note_and_the_next_the_image(
    tmp_path: Path,
) -> None:
    history, png, text = await history_with_a_read_image(tmp_path)
    route = respx.post(MESSAGES_URL).mock(side_effect=lambda _: sse("anthropic_text.sse"))
    config = AnthropicProviderConfig(
        type="anthropic",
        models=(ModelConfig(id="text-only", images=False), ModelConfig(id="claude")),
        prompt_caching=False,
    )
    provider = AnthropicProvider("anthropic", config, {"ANTHROPIC_API_KEY": "sk-ant-test"})
    bodies = []
    for model in ("text-only", "claude"):
        await collect(provider, ModelRequest(model=model, system="", messages=history))
        bodies.append(sent_body(route)["messages"][-1]["content"][0]["content"])
    await provider.aclose()

    text_only, reader = bodies
    assert text_only == [{"type": "text", "text": text}, {"type": "text", "text": NOTE}]
    assert reader[1]["source"]["data"] == png
