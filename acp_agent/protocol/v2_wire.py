"""What ACP v2 says differently at the edges of a connection: `initialize` both ways, the
auth method descriptors, and the session answers the agent builds in the v1 (neutral) form.

Plain functions on plain JSON, like `handshake`: the first `initialize` is answered before
the event loop exists, so nothing here may load pydantic or the schema models. Shapes are
the npm `@agentclientprotocol/sdk` 2.4.0 v2 schemas (`shared/spec/v2`); the tests validate
every frame built here against them.
"""

from __future__ import annotations

from typing import Any

from .. import __version__
from .handshake import AGENT_NAME, ClientCapabilities, Handshake, auth_methods, session_markers

V2 = 2


def read_initialize(params: dict[str, Any]) -> Handshake:
    """A v2 `initialize`: `info` and `capabilities`, where an object marks support and
    anything else (a boolean, a string) does not (lenient in)."""
    caps = _object(params.get("capabilities"))
    auth = _object(caps.get("auth"))
    elicitation = _object(caps.get("elicitation"))
    name = _object(params.get("info")).get("name")
    return Handshake(
        protocol_version=V2,
        client=ClientCapabilities(
            # v2 has no client fs/terminal: tools act locally within the session's roots.
            auth_terminal=isinstance(auth.get("terminal"), dict),
            elicitation_form=isinstance(elicitation.get("form"), dict),
            elicitation_url=isinstance(elicitation.get("url"), dict),
            # No capability in v2: every client must understand these updates.
            session_compaction=True,
            session_notices=True,
            subagents=True,
            plan=True,
        ),
        client_name=name if isinstance(name, str) else None,
    )


def initialize_response(handshake: Handshake) -> dict[str, Any]:
    """Our v2 answer. `capabilities.session` promises the baseline (`session/new`, `list`,
    `resume`, `close`, `prompt`, `cancel`, `update`), which has no markers of its own; the
    markers below are exactly the rest of what the v2 method table routes."""
    return {
        "protocolVersion": V2,
        "info": {"name": AGENT_NAME, "title": "ACP Agent", "version": __version__},
        "capabilities": {
            "session": {
                "prompt": {"image": {}, "embeddedContext": {}},
                # v2 dropped SSE from the wire; the bridge still speaks it to v1 clients.
                # `acp` (unstable): MCP over ACP, servers the editor hosts (`mcp/message`).
                "mcp": {"stdio": {}, "http": {}, "acp": {}},
                **session_markers(),
            },
            # Unstable: `providers/list|set|disable`.
            "providers": {},
            # Unstable: `auth/status`, and `auth/status_update` after a login or logout.
            "auth": {"status": {}},
        },
        # Non-empty: `auth/login` and `auth/logout` are both routed.
        "authMethods": auth_methods_v2(handshake.client),
    }


def auth_methods_v2(client: ClientCapabilities) -> list[dict[str, Any]]:
    """The v1 methods (one source for ids and texts) as v2 descriptors: `methodId` for
    `id`, and the `type` v2 requires (`agent` for the untyped v1 entry)."""
    methods = []
    for method in auth_methods(client):
        kind = method.get("type", "agent")
        v2: dict[str, Any] = {
            "type": kind,
            "methodId": method["id"],
            "name": method["name"],
            "description": method["description"],
        }
        if kind == "terminal":
            v2["args"] = method["args"]
        methods.append(v2)
    return methods


# --- session answers and updates --------------------------------------------------------


def session_answer(answer: dict[str, Any]) -> dict[str, Any]:
    """A lifecycle or `set_config_option` answer as v2 has it: no `modes` (modes are the
    `mode` config option), no legacy `models`, config options in the v2 shape."""
    reshaped = {key: value for key, value in answer.items() if key not in ("modes", "models")}
    if isinstance(answer.get("configOptions"), list):
        reshaped["configOptions"] = config_options(answer["configOptions"])
    return reshaped


def plain_update(update: dict[str, Any]) -> dict[str, Any] | None:
    """An update the agent built as v1 JSON; None for one v2 does not have."""
    match update.get("sessionUpdate"):
        case "current_mode_update":
            return None  # v2 reports the mode as a config option, sent alongside
        case "config_option_update":
            return {**update, "configOptions": config_options(update["configOptions"])}
        case _:
            return update


def config_options(options: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [_config_option(option) for option in options]


def _config_option(option: dict[str, Any]) -> dict[str, Any]:
    """`id` is `configId` in v2, and a group's `group` is its `groupId`."""
    reshaped = {"configId" if key == "id" else key: value for key, value in option.items()}
    choices = option.get("options")
    if isinstance(choices, list):
        reshaped["options"] = [_select_choice(choice) for choice in choices]
    return reshaped


def _select_choice(choice: dict[str, Any]) -> dict[str, Any]:
    if "group" not in choice:
        return choice
    return {"groupId" if key == "group" else key: value for key, value in choice.items()}


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
