"""`initialize` without pydantic: it must answer before the heavy modules load.

Parses the client's capabilities leniently (any v1 shape, unknown keys ignored, wrong types
read as "not supported") and builds a response that `acp.schema.InitializeResponse`
accepts; a test holds it to that.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .. import __version__
from ..rpc.errors import INVALID_PARAMS, RpcError

PROTOCOL_VERSION = 1
AGENT_NAME = "acp-agent"


@dataclass(frozen=True, slots=True)
class ClientCapabilities:
    read_text_file: bool = False
    write_text_file: bool = False
    terminal: bool = False
    terminal_output_meta: bool = False
    """Zed's `_meta.terminal_output`: it renders `terminal_*` metadata on tool calls."""
    auth_terminal: bool = False
    knows_auth: bool = False
    """The client sent an `auth` capability, so it is new enough for typed auth methods."""
    elicitation_form: bool = False
    elicitation_url: bool = False
    session_compaction: bool = False
    """`session.compaction`: it shows `compaction_update` / `compaction_summary_chunk`."""


@dataclass(frozen=True, slots=True)
class Handshake:
    protocol_version: int
    client: ClientCapabilities
    client_name: str | None


def parse_initialize(params: Any) -> Handshake:
    if not isinstance(params, dict):
        raise RpcError(INVALID_PARAMS, "initialize: params must be an object")
    version = params.get("protocolVersion")
    if isinstance(version, bool) or not isinstance(version, int):
        raise RpcError(INVALID_PARAMS, "initialize: protocolVersion must be an integer")
    caps = _object(params.get("clientCapabilities"))
    fs = _object(caps.get("fs"))
    meta = _object(caps.get("_meta"))
    auth = caps.get("auth")
    elicitation = _object(caps.get("elicitation"))
    client_info = _object(params.get("clientInfo"))
    name = client_info.get("name")
    return Handshake(
        protocol_version=version,
        client=ClientCapabilities(
            read_text_file=fs.get("readTextFile") is True,
            write_text_file=fs.get("writeTextFile") is True,
            terminal=caps.get("terminal") is True,
            terminal_output_meta=meta.get("terminal_output") is True,
            auth_terminal=_object(auth).get("terminal") is True,
            knows_auth=isinstance(auth, dict),
            elicitation_form=isinstance(elicitation.get("form"), dict),
            elicitation_url=isinstance(elicitation.get("url"), dict),
            session_compaction=isinstance(_object(caps.get("session")).get("compaction"), dict),
        ),
        client_name=name if isinstance(name, str) else None,
    )


def initialize_response(handshake: Handshake) -> dict[str, Any]:
    """Our answer: version 1 to any client asking 1 or more (the latest we speak otherwise)."""
    return {
        "protocolVersion": PROTOCOL_VERSION,
        "agentCapabilities": {
            "loadSession": True,
            "promptCapabilities": {"image": True, "audio": False, "embeddedContext": True},
            "mcpCapabilities": {"http": True, "sse": True},
            # Exactly what the method table routes; `fork` is unstable in the schema and
            # advertised the way `schema.unstable.json` says (`sessionCapabilities.fork`).
            "sessionCapabilities": {
                "list": {},
                "resume": {},
                "close": {},
                "delete": {},
                "additionalDirectories": {},
                "fork": {},
            },
        },
        "authMethods": auth_methods(handshake.client),
        "agentInfo": {"name": AGENT_NAME, "title": "ACP Agent", "version": __version__},
    }


def auth_methods(client: ClientCapabilities) -> list[dict[str, Any]]:
    """How credentials reach us: environment variables or the config file.

    The untyped ("agent") entry parses in every v1 client; typed `env_var` entries only go
    to clients that sent an `auth` capability, since older clients reject unknown types.
    """
    methods: list[dict[str, Any]] = [
        {
            "id": "acp-agent-config",
            "name": "API keys from environment or config",
            "description": (
                "Set OPENAI_API_KEY (and OPENAI_BASE_URL for a compatible server) in the agent's "
                "environment, or point ACP_AGENT_CONFIG / --config at a TOML file whose "
                "providers.<name>.api_key_env names the variable holding the key. "
                "With no key the offline 'echo' provider answers."
            ),
        }
    ]
    if client.knows_auth:
        methods.append(
            {
                "type": "env_var",
                "id": "openai-api-key",
                "name": "OpenAI API key",
                "description": "Any OpenAI-compatible API: the key, and a base URL if not OpenAI.",
                "vars": [
                    {"name": "OPENAI_API_KEY", "label": "API key"},
                    {
                        "name": "OPENAI_BASE_URL",
                        "label": "Base URL",
                        "secret": False,
                        "optional": True,
                    },
                ],
                "link": "https://platform.openai.com/api-keys",
            }
        )
    return methods


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
