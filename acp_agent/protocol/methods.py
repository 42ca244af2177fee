"""The agent-side method table, as data: wire name, params model, agent handler."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Method:
    name: str
    params_model: str
    """Name of the `acp.schema` model (resolved lazily: the schema loads after initialize)."""
    handler: str
    """Name of the `Agent` coroutine method that serves it."""


REQUESTS = {
    m.name: m
    for m in (
        Method("authenticate", "AuthenticateRequest", "authenticate"),
        Method("session/new", "NewSessionRequest", "new_session"),
        Method("session/prompt", "PromptRequest", "prompt"),
        Method("session/close", "CloseSessionRequest", "close_session"),
        Method(
            "session/set_config_option", "SetSessionConfigOptionSelectRequest", "set_config_option"
        ),
        Method("session/set_mode", "SetSessionModeRequest", "set_mode"),
        # Legacy (older v1 clients); its model is not in acp.schema.
        Method("session/set_model", "SetSessionModelRequest", "set_model"),
    )
}

NOTIFICATIONS = {m.name: m for m in (Method("session/cancel", "CancelNotification", "cancel"),)}
