"""The requests a session's life runs on, read as plain JSON: `session/new`, `load`,
`resume`, `fork`, `prompt` and `session/cancel`.

They are what an editor sends first, so they are read without the schema models (see
`schema`), with the models' rules: the same required fields and types, unknown fields
ignored, and (as `acp.schema` does) an unreadable item of `mcpServers` or
`additionalDirectories` dropped from its list, here with a warning in the log. Every other
request is read by its model (`ModelReader`). `tests/protocol/test_protocol_requests.py`
holds the two readings to each other.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..mcp_bridge import McpServerSpec
from ..messages import EditorPrompt, EditorPromptMode, Message
from ..rpc.errors import INVALID_PARAMS, RpcError
from .content import prompt_message
from .fields import Invalid, array, obj, string, text

log = logging.getLogger(__name__)

Reader = Callable[[dict[str, Any]], Any]
"""Reads a request's params (an object) into what its handler takes; raises `Invalid`."""


@dataclass(frozen=True, slots=True)
class SessionSetup:
    """`session/new`, `load`, `resume` and `fork`: where the session works and its servers."""

    session_id: str | None
    """None for `session/new`."""
    cwd: str
    additional_directories: list[str]
    mcp_servers: list[McpServerSpec]
    system_prompt: EditorPrompt | None
    """The editor's system prompt (`systemPrompt`); None: not given."""
    origin: str | None = None
    """`_meta["acp-agent/origin"]` of `session/new` ("run" from `acp-agent run`), kept in
    the session's log so stored sessions can be told apart; None: an editor's."""
    config_choices: tuple[tuple[str, str], ...] = ()
    """`session/fork`'s initial config options, (config id, value) in order."""


@dataclass(frozen=True, slots=True)
class Prompt:
    session_id: str
    message: Message


@dataclass(frozen=True, slots=True)
class OneSession:
    """`session/cancel`, `archive`, `unarchive` and `status`: the session they name."""

    session_id: str


def new_session(params: dict[str, Any]) -> SessionSetup:
    return _setup(params, session_id=None, servers_required=True)


def new_session_servers_optional(params: dict[str, Any]) -> SessionSetup:
    """`session/new` whose `mcpServers` may be absent or null (v2: none)."""
    return _setup(params, session_id=None, servers_required=False)


def load_session(params: dict[str, Any]) -> SessionSetup:
    return _setup(params, session_id=text(params, "sessionId"), servers_required=True)


def existing_session(params: dict[str, Any]) -> SessionSetup:
    """`session/resume` and `fork`: a session id, then what `session/new` takes, with the
    servers optional."""
    return _setup(params, session_id=text(params, "sessionId"), servers_required=False)


def prompt(params: dict[str, Any]) -> Prompt:
    session_id = text(params, "sessionId")
    blocks = array(params, "prompt", required=True)
    return Prompt(session_id, prompt_message([obj(b, f"prompt.{i}") for i, b in enumerate(blocks)]))


def one_session(params: dict[str, Any]) -> OneSession:
    return OneSession(text(params, "sessionId"))


def read_params(method: str, reader: Reader, params: Any) -> Any:
    """`params` read by `reader`, or the JSON-RPC error that names the field at fault."""
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise RpcError(INVALID_PARAMS, f"{method}: params must be an object")
    try:
        return reader(params)
    except Invalid as exc:
        raise RpcError(INVALID_PARAMS, f"{method}: invalid params: {exc}") from None


@dataclass(frozen=True, slots=True)
class ModelReader:
    """Reads params with the schema model of that name (in `schema` or `legacy`)."""

    model_name: str

    def model(self) -> Any:
        from . import legacy, schema

        return getattr(legacy, self.model_name, None) or getattr(schema, self.model_name)

    def __call__(self, params: dict[str, Any]) -> Any:
        from pydantic import ValidationError

        try:
            return self.model().model_validate(params)
        except ValidationError as exc:
            raise Invalid(
                "; ".join(
                    f"{'.'.join(str(p) for p in err['loc']) or 'params'}: {err['msg']}"
                    for err in exc.errors()
                )
            ) from None


# --- the session's place and servers ----------------------------------------------------


def _setup(
    params: dict[str, Any], *, session_id: str | None, servers_required: bool
) -> SessionSetup:
    cwd = text(params, "cwd")
    if servers_required:
        # Required by the schema, yet left out by early v1 clients: missing reads as none.
        params = {"mcpServers": [], **params}
    directories = [
        d
        for i, d in enumerate(array(params, "additionalDirectories"))
        if _kept(isinstance(d, str), f"additionalDirectories.{i}", "not a string")
    ]
    servers = [
        spec
        for i, item in enumerate(array(params, "mcpServers", required=servers_required))
        if (spec := _mcp_server(item, f"mcpServers.{i}")) is not None
    ]
    return SessionSetup(
        session_id, cwd, directories, servers, _system_prompt(params), _origin(params)
    )


ORIGIN_META_KEY = "acp-agent/origin"


def _origin(params: dict[str, Any]) -> str | None:
    """What `_meta` says opened the session; anything unreadable is no origin (lenient in)."""
    meta = params.get("_meta")
    value = meta.get(ORIGIN_META_KEY) if isinstance(meta, dict) else None
    return value if isinstance(value, str) and value.isidentifier() else None


def _system_prompt(params: dict[str, Any]) -> EditorPrompt | None:
    """`systemPrompt`, which the session must not be opened without if it cannot apply it
    (an unknown mode, no content, a block other than text)."""
    value = params.get("systemPrompt")
    if value is None:
        return None
    prompt = obj(value, "systemPrompt")
    mode = text(prompt, "mode", "systemPrompt")
    modes: dict[str, EditorPromptMode] = {"append": "append", "override": "override"}
    if mode not in modes:
        raise Invalid(f"systemPrompt.mode: {mode[:40]!r} is not supported (append, override)")
    blocks = array(prompt, "content", "systemPrompt", required=True)
    if not blocks:
        raise Invalid("systemPrompt.content: is empty")
    texts = []
    for i, item in enumerate(blocks):
        where = f"systemPrompt.content.{i}"
        block = obj(item, where)
        if block.get("type") != "text":
            raise Invalid(f"{where}: only text blocks are supported")
        texts.append(text(block, "text", where))
    return EditorPrompt(modes[mode], "\n\n".join(texts))


def _mcp_server(item: Any, where: str) -> McpServerSpec | None:
    """One of the editor's MCP servers in the bridge's terms; None (logged) for one that
    cannot be read."""
    try:
        server = obj(item, where)
        name = text(server, "name", where)
        match server.get("type"):
            case "http" | "sse" as transport:
                url = text(server, "url", where)
                headers = _pairs(server, "headers", where)
                return McpServerSpec(name, transport, url=url, headers=headers)
            case "acp":
                # Reached through `mcp/message` (we advertise `mcpCapabilities.acp`).
                return McpServerSpec(name, "acp", server_id=text(server, "serverId", where))
            case _:
                command = text(server, "command", where)
                args = array(server, "args", where, required=True)
                args = [string(arg, f"{where}.args.{i}") for i, arg in enumerate(args)]
                env = _pairs(server, "env", where)
                return McpServerSpec(name, "stdio", command=command, args=tuple(args), env=env)
    except Invalid as exc:
        _kept(False, where, str(exc))
        return None


def _pairs(server: dict[str, Any], key: str, where: str) -> dict[str, str]:
    """`env` or `headers`: a required list of `{name, value}` objects."""
    pairs: dict[str, str] = {}
    for i, item in enumerate(array(server, key, where, required=True)):
        at = f"{where}.{key}.{i}"
        pair = obj(item, at)
        pairs[text(pair, "name", at)] = text(pair, "value", at)
    return pairs


def _kept(ok: bool, where: str, problem: str) -> bool:
    if not ok:
        log.warning("%s left out: %s", where, problem)
    return ok
