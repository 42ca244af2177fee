"""Which MCP servers a session connects to: the config file's and the editor's, merged.

A spec is neutral: the ACP layer translates the editor's `mcpServers` entries into specs, the
config's `[mcp_servers.<name>]` tables become specs here, and `merge_specs` lets the
session's entry win on a name clash.

Only the config file can trust a server (`trusted = true`: its read-only annotations are
believed). An editor's server never brings trust of its own: it is trusted only when it
replaces a trusted config entry of its name that reaches the same place (the same command
and args, or the same URL), so a project's settings cannot borrow a trusted name.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Literal, TypeAlias

from ..config import AgentConfig

McpTransport: TypeAlias = Literal["stdio", "http", "sse", "acp"]
"""`http` is streamable HTTP; `sse` the older HTTP+SSE transport; `acp` a server that lives
in the editor, reached through the ACP connection (`mcp/message`, see `editor.py`)."""


@dataclass(frozen=True)
class McpServerSpec:
    name: str
    transport: McpTransport = "stdio"
    command: str | None = None
    """stdio: the program to start (in the session's directory)."""
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    """stdio: variables for the server, over the safe base it inherits (never our keys)."""
    url: str | None = None
    """http, sse: the endpoint."""
    headers: dict[str, str] = field(default_factory=dict)
    """http, sse: sent with every request."""
    server_id: str | None = None
    """acp: the editor's id for the server, which every `mcp/message` names."""
    trusted: bool = False
    """Its tools' read-only annotations are believed (the config says so)."""

    def problem(self) -> str | None:
        """Why this spec cannot be connected, or None."""
        if not self.name:
            return "a server needs a name"
        if self.transport == "stdio":
            return None if self.command else f"{self.name}: a stdio server needs a command"
        if self.transport == "acp":
            return None if self.server_id else f"{self.name}: an acp server needs a serverId"
        if not self.url:
            return f"{self.name}: an {self.transport} server needs a url"
        if not self.url.startswith(("http://", "https://")):
            return f"{self.name}: {self.url!r} is not an http(s) URL"
        return None

    def same_place(self, other: McpServerSpec) -> bool:
        """Both start the same command line, or both reach the same URL (or editor server)."""
        return (self.transport, self.command, self.args, self.url, self.server_id) == (
            other.transport,
            other.command,
            other.args,
            other.url,
            other.server_id,
        )

    def describe(self) -> str:
        """Where the server is, for status lines (no headers or env: they may hold secrets)."""
        if self.transport == "stdio":
            return " ".join((self.command or "", *self.args)).strip()
        if self.transport == "acp":
            return f"in the editor, id {self.server_id}"
        return f"{self.transport} {self.url}"


def specs_from_config(config: AgentConfig) -> list[McpServerSpec]:
    """The config file's enabled servers, in file order."""
    return [
        McpServerSpec(
            name=name,
            transport=server.type,
            command=server.command,
            args=server.args,
            env=dict(server.env),
            url=server.url,
            headers=dict(server.headers),
            trusted=server.trusted,
        )
        for name, server in config.mcp_servers.items()
        if server.enabled
    ]


def merge_specs(
    configured: Iterable[McpServerSpec], given: Iterable[McpServerSpec]
) -> list[McpServerSpec]:
    """The configured servers with the session's (`given`) over them: a given server
    replaces a configured one of the same name, in its place; new ones follow. A given
    server is trusted only as the configured one it replaces, and only if it reaches the
    same place."""
    merged = {spec.name: spec for spec in configured}
    for spec in given:
        replaced = merged.get(spec.name)
        trusted = replaced is not None and replaced.trusted and replaced.same_place(spec)
        merged[spec.name] = replace(spec, trusted=trusted)
    return list(merged.values())
