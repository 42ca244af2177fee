"""MCP servers as a session's tools and prompts: the editor's and the config's, over stdio,
streamable HTTP or SSE, through the `mcp` SDK's client sessions.

Knows no ACP and no vendor: it speaks the neutral vocabulary (`messages.py`) and its own
plain data (`model.py`). Importing it does not import `mcp`; the first connection does.
"""

from ._names import qualified_name
from .editor import EditorMcp, EditorMcpAnswer, EditorMcpFailed, EditorMcpMessage
from .errors import CallFailed, McpError, ServerUnavailable
from .hub import McpHub
from .model import (
    AudioContent,
    ElicitationReply,
    ElicitationRequest,
    HubHandlers,
    McpProgress,
    McpPromptInfo,
    McpToolInfo,
    McpToolResult,
    ResourceContent,
    ResourceLinkContent,
    SamplingReply,
    SamplingRequest,
    ServerStatus,
)
from .specs import McpServerSpec, merge_specs, specs_from_config

__all__ = [
    "AudioContent",
    "CallFailed",
    "EditorMcp",
    "EditorMcpAnswer",
    "EditorMcpFailed",
    "EditorMcpMessage",
    "ElicitationReply",
    "ElicitationRequest",
    "HubHandlers",
    "McpError",
    "McpHub",
    "McpProgress",
    "McpPromptInfo",
    "McpServerSpec",
    "McpToolInfo",
    "McpToolResult",
    "ResourceContent",
    "ResourceLinkContent",
    "SamplingReply",
    "SamplingRequest",
    "ServerStatus",
    "ServerUnavailable",
    "merge_specs",
    "qualified_name",
    "specs_from_config",
]
