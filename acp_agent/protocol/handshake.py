"""`initialize` without pydantic: it must answer before the heavy modules load.

Parses the client's capabilities leniently (any v1 shape, unknown keys ignored, wrong types
read as "not supported") and builds a response that `acp.schema.InitializeResponse`
accepts; a test holds it to that. An editor sends `initialize` the moment it starts us, so
`dialect.answer_first_initialize` answers it before the event loop exists (asyncio and
anyio alone take ~50 ms to load); anything else first is left to the server. This is the
v1 handshake; `v2_wire` reads and answers the v2 one.
"""

from __future__ import annotations

import os
import sys
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
    """`auth.terminal`: it runs a `terminal` auth method (our command plus its `args`)."""
    terminal_auth_meta: bool = False
    """`_meta["terminal-auth"]` (Zed before typed methods): it runs the command named in an
    auth method's `_meta["terminal-auth"]`."""
    elicitation_form: bool = False
    elicitation_url: bool = False
    session_compaction: bool = False
    """`session.compaction`: it shows `compaction_update` / `compaction_summary_chunk`."""
    session_notices: bool = False
    """`session.notices`: it shows `notice` updates (retry waits, fallbacks ...)."""
    subagents: bool = False
    """`subagents`: it shows child sessions (`subagent_update`, their updates by their id)."""
    plan: bool = False
    """`plan`: it shows `plan_update` (item and Markdown plans, by id) and `plan_removed`;
    others get the legacy `plan` update."""


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
    session = _object(caps.get("session"))
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
            terminal_auth_meta=meta.get("terminal-auth") is True,
            elicitation_form=isinstance(elicitation.get("form"), dict),
            elicitation_url=isinstance(elicitation.get("url"), dict),
            session_compaction=isinstance(session.get("compaction"), dict),
            session_notices=isinstance(session.get("notices"), dict),
            subagents=isinstance(caps.get("subagents"), dict),
            plan=isinstance(caps.get("plan"), dict),
        ),
        client_name=name if isinstance(name, str) else None,
    )


def session_markers() -> dict[str, Any]:
    """The session methods past the baseline that both dialects route, as their markers (v1
    `sessionCapabilities`, v2 `capabilities.session`). `fork` is unstable in both schemas,
    advertised the way `schema.unstable.json` says; unstable too: `session/set_title`,
    `archive`/`unarchive` (and the list's `archived` filter), `session/status`
    (`session_meta`)."""
    return {
        "delete": {},
        "additionalDirectories": {},
        "fork": {},
        "title": {},
        "archive": {},
        "status": {},
        # The editor's system prompt: appended to ours, or in place of our default.
        "systemPrompt": {"mode": {"override": {}}},
    }


def initialize_response(handshake: Handshake) -> dict[str, Any]:
    """Our v1 answer, to a client asking 1 or less (`dialect` answers 2 and more in v2)."""
    return {
        "protocolVersion": PROTOCOL_VERSION,
        "agentCapabilities": {
            "loadSession": True,
            "promptCapabilities": {"image": True, "audio": False, "embeddedContext": True},
            # Unstable `acp`: servers that live in the editor, through `mcp/message`.
            "mcpCapabilities": {"http": True, "sse": True, "acp": True},
            # `logout` forgets the keys `acp-agent login` stored; unstable `status`:
            # `auth/status`, and `auth/status_update` after a login or logout.
            "auth": {"logout": {}, "status": {}},
            # Unstable: `providers/list|set|disable` (the editor routes our LLM traffic).
            "providers": {},
            # Exactly what the method table routes.
            "sessionCapabilities": {
                "list": {},
                "resume": {},
                "close": {},
                **session_markers(),
            },
        },
        "authMethods": auth_methods(handshake.client),
        "agentInfo": {"name": AGENT_NAME, "title": "ACP Agent", "version": __version__},
    }


CONFIG_METHOD_ID = "acp-agent-config"
LOGIN_METHOD_ID = "acp-agent-login"
LOGIN_ARGS = ("login",)
"""What a client appends to our command to log in: `acp-agent login` (`login.py`)."""


def auth_methods(client: ClientCapabilities) -> list[dict[str, Any]]:
    """How credentials reach us, as the stable schema's `AuthMethod`s.

    Always the untyped ("agent") entry, which every v1 client parses (and the ACP registry
    needs one of type agent or terminal): keys come from the environment, the config or
    `acp-agent login`, and `authenticate` with it only acknowledges. To a client with
    `auth.terminal`, a `terminal` entry too: the editor runs our command with `login`
    appended in a terminal, which asks for a provider and its key and stores it (exit 0:
    logged in). Zed's older `_meta["terminal-auth"]` gets the full command in the entry's
    `_meta` as well (typed, or on an untyped entry for a client without `auth.terminal`).
    """
    methods: list[dict[str, Any]] = [
        {
            "id": CONFIG_METHOD_ID,
            "name": "API key from environment, config or login",
            "description": (
                "Set OPENAI_API_KEY or ANTHROPIC_API_KEY in the agent's environment (or "
                "OPENAI_BASE_URL for a compatible server), point ACP_AGENT_CONFIG / --config at "
                "a TOML file whose providers.<name>.api_key_env names the variable, or store a "
                "key with `acp-agent login` in a terminal. With no key the offline 'echo' "
                "provider answers."
            ),
        }
    ]
    if not (client.auth_terminal or client.terminal_auth_meta):
        return methods
    login: dict[str, Any] = {
        "id": LOGIN_METHOD_ID,
        "name": "Log in with an API key",
        "description": (
            "Runs `acp-agent login` in a terminal: choose a provider, paste its API key "
            "(checked with one cheap request), and it is stored for this user."
        ),
    }
    if client.auth_terminal:
        login = {"type": "terminal", **login, "args": list(LOGIN_ARGS)}
    if client.terminal_auth_meta:
        login["_meta"] = {"terminal-auth": _login_command()}
    methods.append(login)
    return methods


def answer_authenticate(handshake: Handshake, params: Any) -> dict[str, Any]:
    """`authenticate`, answered from the handshake alone (hand-parsed, as `initialize`): the
    methods it may name are known before start-up, and clients call it before their first
    prompt (CodeCompanion), which must not wait for the provider warm-up. With every method
    there is nothing to exchange: keys come from the environment, the config or a login."""
    method_id = params.get("methodId") if isinstance(params, dict) else None
    if not isinstance(method_id, str):
        raise RpcError(INVALID_PARAMS, "authenticate: methodId must be a string")
    offered = [method["id"] for method in auth_methods(handshake.client)]
    if method_id not in offered:
        raise RpcError(
            INVALID_PARAMS,
            f"authenticate: unknown auth method {method_id!r}",
            {"details": f"the auth methods offered in initialize are: {', '.join(offered)}"},
        )
    return {}


def _login_command() -> dict[str, Any]:
    """The whole command line of `acp-agent login` for `_meta["terminal-auth"]`: this
    interpreter running our package, with the config file we were started with."""
    return {
        "command": sys.executable,
        "args": ["-m", "acp_agent", *_config_option(sys.argv[1:]), *LOGIN_ARGS],
        "label": "acp-agent login",
    }


def _config_option(argv: list[str]) -> list[str]:
    """`--config FILE` (absolute) from our own command line, so login offers the providers
    we serve; nothing else of it."""
    for index, word in enumerate(argv):
        if word.startswith("--config="):
            return ["--config", os.path.abspath(word.removeprefix("--config="))]
        if word == "--config" and index + 1 < len(argv):
            return ["--config", os.path.abspath(argv[index + 1])]
    return []


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
