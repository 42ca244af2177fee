"""The one module that imports the `openai` SDK: a version bump touches only this file.

Requests go out without the SDK (`_openai_client`), and Chat Completions streams are read
from their JSON alone; only the Responses API's rarer stream events (output items, and
anything the quick look in `_openai_responses_mapping` leaves) are built by the SDK's own
lenient `construct_type`, exactly as its typed stream would build them. Importing this
module costs about a second, so the provider imports it in a worker thread while its first
request is on the way, never on the event loop (`_lazy_import`).
"""

from __future__ import annotations

from typing import Any, cast

from openai._models import construct_type
from openai.types.responses import (
    ResponseCompletedEvent,
    ResponseErrorEvent,
    ResponseFailedEvent,
    ResponseFunctionCallArgumentsDeltaEvent,
    ResponseFunctionToolCall,
    ResponseIncompleteEvent,
    ResponseOutputItemAddedEvent,
    ResponseOutputItemDoneEvent,
    ResponseOutputMessage,
    ResponseReasoningItem,
    ResponseReasoningSummaryTextDeltaEvent,
    ResponseReasoningTextDeltaEvent,
    ResponseRefusalDeltaEvent,
    ResponseStreamEvent,
    ResponseTextDeltaEvent,
)

__all__ = [
    "ResponseCompletedEvent",
    "ResponseErrorEvent",
    "ResponseFailedEvent",
    "ResponseFunctionCallArgumentsDeltaEvent",
    "ResponseFunctionToolCall",
    "ResponseIncompleteEvent",
    "ResponseOutputItemAddedEvent",
    "ResponseOutputItemDoneEvent",
    "ResponseOutputMessage",
    "ResponseReasoningItem",
    "ResponseReasoningSummaryTextDeltaEvent",
    "ResponseReasoningTextDeltaEvent",
    "ResponseRefusalDeltaEvent",
    "ResponseStreamEvent",
    "ResponseTextDeltaEvent",
    "response_event",
]


def response_event(payload: Any) -> ResponseStreamEvent:
    """A Responses stream event, built from its JSON as `openai.AsyncStream` builds it."""
    return cast(ResponseStreamEvent, construct_type(type_=ResponseStreamEvent, value=payload))
