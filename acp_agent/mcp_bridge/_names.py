"""Names the model and the user see for MCP tools and prompts.

Vendors accept tool names matching `^[a-zA-Z0-9_-]{1,64}$` (OpenAI, Anthropic). A tool is
offered as `mcp__<server>__<tool>` when that is such a name and unambiguous; otherwise
(characters outside the set, a server name containing `__`, more than 64 characters) as a
sanitised prefix of it plus `_` and 8 hex digits of a hash of the server and tool names.
The name depends only on those two names: it stays the same across reconnections and tool
list changes, and two tools never share one unless their hashes collide (the hub then
skips the later tool with a warning). Built-in tools never start with `mcp__`.
"""

from __future__ import annotations

import hashlib
import re

PREFIX = "mcp__"
MAX_NAME = 64
_VALID = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_INVALID_CHARS = re.compile(r"[^a-zA-Z0-9_-]")
_HASH_DIGITS = 8


def qualified_name(server: str, tool: str) -> str:
    plain = f"{PREFIX}{server}__{tool}"
    if _VALID.fullmatch(plain) and "__" not in server and server and tool:
        return plain
    digest = hashlib.sha256(f"{server}\0{tool}".encode()).hexdigest()[:_HASH_DIGITS]
    safe = _INVALID_CHARS.sub("_", plain)[: MAX_NAME - _HASH_DIGITS - 1]
    return f"{safe}_{digest}"


def prompt_command(server: str, prompt: str) -> str:
    """The slash command for a prompt: `<server>:<prompt>`, without whitespace."""
    return re.sub(r"\s+", "-", f"{server}:{prompt}")
