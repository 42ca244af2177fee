"""MCP servers as a session's tools and prompts: the editor's and the config's, over stdio,
streamable HTTP or SSE, through the `mcp` SDK's client sessions.

Knows no ACP and no vendor: it speaks the neutral vocabulary (`messages.py`) and its own
plain data (`model.py`). Importing it does not import `mcp`; the first connection does.
Nor the rest of the room: each name loads its module when it is first looked up (PEP 562),
so a session without MCP servers loads only its specs and the editor's MCP channel.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._names import qualified_name as qualified_name
    from .editor import EditorMcp as EditorMcp
    from .editor import EditorMcpAnswer as EditorMcpAnswer
    from .editor import EditorMcpFailed as EditorMcpFailed
    from .editor import EditorMcpMessage as EditorMcpMessage
    from .errors import CallFailed as CallFailed
    from .errors import McpError as McpError
    from .errors import ServerUnavailable as ServerUnavailable
    from .hub import McpHub as McpHub
    from .model import AudioContent as AudioContent
    from .model import ElicitationReply as ElicitationReply
    from .model import ElicitationRequest as ElicitationRequest
    from .model import HubHandlers as HubHandlers
    from .model import McpProgress as McpProgress
    from .model import McpPromptInfo as McpPromptInfo
    from .model import McpToolInfo as McpToolInfo
    from .model import McpToolResult as McpToolResult
    from .model import ResourceContent as ResourceContent
    from .model import ResourceLinkContent as ResourceLinkContent
    from .model import SamplingReply as SamplingReply
    from .model import SamplingRequest as SamplingRequest
    from .model import ServerStatus as ServerStatus
    from .specs import McpServerSpec as McpServerSpec
    from .specs import merge_specs as merge_specs
    from .specs import specs_from_config as specs_from_config

_NAMES = {
    "._names": ("qualified_name",),
    ".editor": ("EditorMcp", "EditorMcpAnswer", "EditorMcpFailed", "EditorMcpMessage"),
    ".errors": ("CallFailed", "McpError", "ServerUnavailable"),
    ".hub": ("McpHub",),
    ".model": (
        "AudioContent",
        "ElicitationReply",
        "ElicitationRequest",
        "HubHandlers",
        "McpProgress",
        "McpPromptInfo",
        "McpToolInfo",
        "McpToolResult",
        "ResourceContent",
        "ResourceLinkContent",
        "SamplingReply",
        "SamplingRequest",
        "ServerStatus",
    ),
    ".specs": ("McpServerSpec", "merge_specs", "specs_from_config"),
}
"""The room's interface, by the module each name lives in (as imported above for types)."""
_MODULE_OF = {name: module for module, names in _NAMES.items() for name in names}


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # found directly from now on
    return value
