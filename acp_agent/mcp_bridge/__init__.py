"""MCP servers as a session's tools and prompts: the editor's and the config's, over stdio,
streamable HTTP or SSE, through the `mcp` SDK's client sessions.

Knows no ACP and no vendor: it speaks the neutral vocabulary (`messages.py`) and its own
plain data (`model.py`). Importing it does not import `mcp`; the first connection does.
"""

from ._names import qualified_name
from .editor import EditorMcp, EditorMcpAnswer, EditorMcpFailed, EditorMcpMessage
from .errors import CallFailed, McpError, ServerUnavailable, UnknownName
from .hub import McpHub
from .model import (
    AudioContent,
    ElicitationReply,
    ElicitationRequest,
    HubHandlers,
    McpContent,
    McpProgress,
    McpPromptInfo,
    McpToolInfo,
    McpToolResult,
    PromptArgument,
    PromptResult,
    ResourceContent,
    ResourceLinkContent,
    SamplingReply,
    SamplingRequest,
    ServerState,
    ServerStatus,
)
from .specs import McpServerSpec, McpTransport, merge_specs, specs_from_config

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
    "McpContent",
    "McpError",
    "McpHub",
    "McpProgress",
    "McpPromptInfo",
    "McpServerSpec",
    "McpToolInfo",
    "McpToolResult",
    "McpTransport",
    "PromptArgument",
    "PromptResult",
    "ResourceContent",
    "ResourceLinkContent",
    "SamplingReply",
    "SamplingRequest",
    "ServerState",
    "ServerStatus",
    "ServerUnavailable",
    "UnknownName",
    "merge_specs",
    "qualified_name",
    "specs_from_config",
]
