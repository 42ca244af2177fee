"""The schema models: `acp.schema` (heavy: ~0.5 s to import) and, at the end, the types the
pinned package lacks, from `shared/spec/stable-v1`. Imported only through `schema`, which
loads this module on first use.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from acp.meta import AGENT_METHODS, CLIENT_METHODS
from acp.schema import (
    AgentMessageChunk,
    AgentPlanUpdate,
    AgentThoughtChunk,
    AllowedOutcome,
    AudioContentBlock,
    AuthenticateRequest,
    AuthenticateResponse,
    AvailableCommand,
    AvailableCommandInput,
    AvailableCommandsUpdate,
    BlobResourceContents,
    CancelNotification,
    CloseSessionRequest,
    CloseSessionResponse,
    ConfigOptionUpdate,
    ContentToolCallContent,
    Cost,
    CreateTerminalRequest,
    CreateTerminalResponse,
    CurrentModeUpdate,
    DeleteSessionRequest,
    DeleteSessionResponse,
    DeniedOutcome,
    EmbeddedResourceContentBlock,
    EnvVariable,
    FileEditToolCallContent,
    ForkSessionRequest,
    ForkSessionResponse,
    HttpHeader,
    HttpMcpServer,
    ImageContentBlock,
    InitializeRequest,
    InitializeResponse,
    ListSessionsRequest,
    ListSessionsResponse,
    LoadSessionRequest,
    LoadSessionResponse,
    LogoutRequest,
    LogoutResponse,
    McpServerStdio,
    NewSessionRequest,
    NewSessionResponse,
    PermissionOption,
    PlanEntry,
    PromptRequest,
    PromptResponse,
    ReadTextFileRequest,
    ReadTextFileResponse,
    RequestPermissionResponse,
    ResourceContentBlock,
    ResumeSessionRequest,
    ResumeSessionResponse,
    SessionConfigOptionSelect,
    SessionConfigSelectGroup,
    SessionConfigSelectOption,
    SessionInfo,
    SessionInfoUpdate,
    SessionMode,
    SessionModeState,
    SessionNotification,
    SetSessionConfigOptionResponse,
    SetSessionConfigOptionSelectRequest,
    SetSessionModeRequest,
    SetSessionModeResponse,
    SseMcpServer,
    TerminalOutputResponse,
    TerminalToolCallContent,
    TextContentBlock,
    TextResourceContents,
    ToolCallLocation,
    ToolCallProgress,
    UnstructuredCommandInput,
    Usage,
    UsageUpdate,
    UserMessageChunk,
    WaitForTerminalExitResponse,
    WriteTextFileRequest,
    WriteTextFileResponse,
)
from acp.schema import RequestPermissionRequest as _PinnedRequestPermissionRequest
from acp.schema import ToolCallStart as _PinnedToolCallStart
from acp.schema import ToolCallUpdate as _PinnedToolCallUpdate
from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "AGENT_METHODS",
    "CLIENT_METHODS",
    "AgentMessageChunk",
    "AgentPlanUpdate",
    "AgentThoughtChunk",
    "AllowedOutcome",
    "AudioContentBlock",
    "AuthenticateRequest",
    "AuthenticateResponse",
    "AvailableCommand",
    "AvailableCommandInput",
    "AvailableCommandsUpdate",
    "BaseModel",
    "BlobResourceContents",
    "CancelNotification",
    "CloseSessionRequest",
    "CloseSessionResponse",
    "CompactionStatus",
    "CompactionSummaryChunk",
    "CompactionUpdate",
    "ConfigOptionUpdate",
    "ContentToolCallContent",
    "Cost",
    "CreateTerminalRequest",
    "CreateTerminalResponse",
    "CurrentModeUpdate",
    "DeleteSessionRequest",
    "DeleteSessionResponse",
    "DeniedOutcome",
    "EmbeddedResourceContentBlock",
    "EnvVariable",
    "FileEditToolCallContent",
    "ForkSessionRequest",
    "ForkSessionResponse",
    "HttpHeader",
    "HttpMcpServer",
    "ImageContentBlock",
    "InitializeRequest",
    "InitializeResponse",
    "ListSessionsRequest",
    "ListSessionsResponse",
    "LoadSessionRequest",
    "LoadSessionResponse",
    "LogoutRequest",
    "LogoutResponse",
    "McpServerStdio",
    "NewSessionRequest",
    "NewSessionResponse",
    "NoticeSeverity",
    "NoticeUpdate",
    "PermissionOption",
    "PlanEntry",
    "PromptRequest",
    "PromptResponse",
    "ReadTextFileRequest",
    "ReadTextFileResponse",
    "RequestPermissionRequest",
    "RequestPermissionResponse",
    "ResourceContentBlock",
    "ResumeSessionRequest",
    "ResumeSessionResponse",
    "SessionConfigOptionSelect",
    "SessionConfigSelectGroup",
    "SessionConfigSelectOption",
    "SessionInfo",
    "SessionInfoUpdate",
    "SessionMode",
    "SessionModeState",
    "SessionNotification",
    "SetSessionConfigOptionResponse",
    "SetSessionConfigOptionSelectRequest",
    "SetSessionModeRequest",
    "SetSessionModeResponse",
    "SseMcpServer",
    "TerminalOutputResponse",
    "TerminalToolCallContent",
    "TextContentBlock",
    "TextResourceContents",
    "ToolCallLocation",
    "ToolCallProgress",
    "ToolCallStart",
    "ToolCallUpdate",
    "UnstructuredCommandInput",
    "Usage",
    "UsageUpdate",
    "UserMessageChunk",
    "WaitForTerminalExitResponse",
    "WriteTextFileRequest",
    "WriteTextFileResponse",
]


# --- from the stable v1 schema (1.25), missing in the pinned package --------------------------


class _SpecModel(BaseModel):
    model_config = ConfigDict(populate_by_name=True, use_attribute_docstrings=True)


CompactionStatus = Literal["in_progress", "completed", "failed", "cancelled"]
"""The spec also allows custom (`_`-prefixed) and future values; we send these."""


class CompactionUpdate(_SpecModel):
    """`compaction_update`: a context compaction created or patched, by id. Only for
    clients that advertised `session.compaction`."""

    session_update: Annotated[Literal["compaction_update"], Field(alias="sessionUpdate")]
    compaction_id: Annotated[str, Field(alias="compactionId")]
    status: CompactionStatus
    summary: list[TextContentBlock] | None = None
    """The whole summary, replacing what was shown; left out, it stays as it was."""
    error: str | None = None
    field_meta: Annotated[dict[str, Any] | None, Field(alias="_meta")] = None


class CompactionSummaryChunk(_SpecModel):
    """`compaction_summary_chunk`: text appended to a compaction's summary. Only for
    clients that advertised `session.compaction`."""

    session_update: Annotated[Literal["compaction_summary_chunk"], Field(alias="sessionUpdate")]
    compaction_id: Annotated[str, Field(alias="compactionId")]
    content: TextContentBlock
    field_meta: Annotated[dict[str, Any] | None, Field(alias="_meta")] = None


NoticeSeverity = Literal["info", "warning", "error"]
"""The spec also allows custom (`_`-prefixed) and future values; we send these."""


class NoticeUpdate(_SpecModel):
    """`notice`: live information for the user, not session history. Only for clients that
    advertised `session.notices`."""

    session_update: Annotated[Literal["notice"], Field(alias="sessionUpdate")]
    severity: NoticeSeverity
    title: Annotated[str, Field(min_length=1)]
    description: str | None = None
    field_meta: Annotated[dict[str, Any] | None, Field(alias="_meta")] = None


# `name` on tool calls (1.25): the pinned models lack it.


class ToolCallStart(_PinnedToolCallStart):
    """`tool_call`, with the tool's programmatic `name`."""

    name: str | None = None


class ToolCallUpdate(_PinnedToolCallUpdate):
    """A tool call as a permission request carries it, with the tool's `name`."""

    name: str | None = None


class RequestPermissionRequest(_PinnedRequestPermissionRequest):
    tool_call: Annotated[ToolCallUpdate, Field(alias="toolCall")]
