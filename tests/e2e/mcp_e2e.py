"""Shared by the MCP end-to-end modules: the test MCP servers (tests/mcp_servers) as ACP
`mcpServers` entries, as config-file tables, or served over HTTP / SSE by their own
process; an agent config file that points at the fake LLM; and the process-table checks.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

import anyio
from e2e_support import MODEL, REPO_ROOT, processes_with_env
from fake_llm import message_text

SERVERS = REPO_ROOT / "tests" / "mcp_servers"
MARK = "ACP_MCP_E2E_MARK"
"""Every stdio server gets `MARK=<unique>`, so the process table finds it and its children."""
VENDOR_KEY_ENV = "MY_VENDOR_TOKEN"
"""The config's `api_key_env`: an agent credential no MCP server may see."""
VENDOR_KEY = "vendor-secret-value"
GONE_GUARD = 10.0


def new_mark() -> str:
    return uuid.uuid4().hex


def stdio_entry(
    name: str, script: str = "everything.py", *args: str, mark: str, **env: str
) -> dict[str, Any]:
    """An ACP `McpServerStdio` (wire shape) running one of the test servers."""
    return {
        "name": name,
        "command": sys.executable,
        "args": [str(SERVERS / script), *args],
        "env": [{"name": k, "value": v} for k, v in {MARK: mark, **env}.items()],
    }


STARTED_LINE = "mcp e2e: the stdio server's process is running"


def announced_stdio_entry(name: str, log: Path, *, mark: str) -> dict[str, Any]:
    """`stdio_entry` of `everything.py` behind a shell that first appends `STARTED_LINE` to
    `log`: given the agent's own stderr file (opened for appending), the line lands among
    the agent's lines in the order the two processes wrote them."""
    script = f'echo "{STARTED_LINE}" >> "$ANNOUNCE_TO"; exec "$0" "$@"'
    entry = stdio_entry(name, mark=mark, ANNOUNCE_TO=str(log))
    return {**entry, "command": "/bin/sh", "args": ["-c", script, sys.executable, *entry["args"]]}


def import_finished_line(log_lines: list[str], module: str) -> int:
    """The index of the `-X importtime` line printed when `module`'s import finished."""
    ends = [
        i
        for i, line in enumerate(log_lines)
        if re.fullmatch(rf"import time:.*\|\s*{re.escape(module)}", line)
    ]
    assert ends, f"no `-X importtime` line for {module!r} in the agent's stderr"
    return ends[0]


def web_entry(name: str, kind: Literal["http", "sse"], url: str, **headers: str) -> dict[str, Any]:
    return {
        "type": kind,
        "name": name,
        "url": url,
        "headers": [{"name": k, "value": v} for k, v in headers.items()],
    }


def stdio_table(script: str = "everything.py", *args: str, mark: str, **env: str) -> dict[str, Any]:
    """A config file's `[mcp_servers.<name>]` table running one of the test servers."""
    return {
        "command": sys.executable,
        "args": [str(SERVERS / script), *args],
        "env": {MARK: mark, **env},
    }


@contextmanager
def web_server(kind: Literal["http", "sse"], name: str = "web") -> Iterator[str]:
    """`everything` served over streamable HTTP or SSE by its own process; yields the URL."""
    process = subprocess.Popen(
        [sys.executable, str(SERVERS / "web.py"), kind, name],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=SERVERS,
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), f"web.py printed {url!r}"
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=GONE_GUARD)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def tool_names(body: dict[str, Any]) -> set[str]:
    return {tool["function"]["name"] for tool in body.get("tools", [])}


def tool_results(body: dict[str, Any]) -> dict[str, str]:
    """The request's trailing tool messages, by the name of the call each answers."""
    names = {
        call["id"]: call["function"]["name"]
        for message in body["messages"]
        for call in message.get("tool_calls") or []
    }
    results: dict[str, str] = {}
    messages = body["messages"]
    if len(messages) > 1 and messages[-2]["role"] == "tool" and messages[-1]["role"] == "user":
        messages = messages[:-1]  # the images of the tool results (tool messages take text)
    for message in reversed(messages):
        if message["role"] != "tool":
            break
        results[names[message["tool_call_id"]]] = message_text(message)
    return results


def calls(*directives: tuple[str, dict[str, Any]]) -> str:
    return " ".join(f"[[tool {name} {json.dumps(args)}]]" for name, args in directives)


def write_config(
    path: Path,
    base_url: str,
    servers: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    connect_timeout: float | None = None,
) -> Path:
    """An agent config: one OpenAI-compatible provider (the fake LLM) whose key lives in
    `VENDOR_KEY_ENV`, and `[mcp_servers.<name>]` tables."""
    lines = [f'default_model = "fake/{MODEL}"']
    if connect_timeout is not None:
        lines.append(f"mcp_connect_timeout = {connect_timeout}")
    lines += [
        "",
        "[providers.fake]",
        'type = "openai-compatible"',
        f"base_url = {json.dumps(base_url)}",
        f'api_key_env = "{VENDOR_KEY_ENV}"',
        'max_tokens_param = "max_tokens"',
        "",
        "[[providers.fake.models]]",
        f'id = "{MODEL}"',
    ]
    for name, table in (servers or {}).items():
        lines += ["", f"[mcp_servers.{name}]"]
        for key, value in table.items():
            if isinstance(value, Mapping):
                pairs = ", ".join(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in value.items())
                lines.append(f"{key} = {{ {pairs} }}")
            else:
                lines.append(f"{key} = {json.dumps(value)}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def wait_gone(mark: str, timeout: float = GONE_GUARD) -> list[int]:
    """The live processes carrying `MARK=mark`; polls (another process's end has no event to
    wait on) until there are none, or `timeout` seconds, a hang guard, have passed."""
    deadline = time.monotonic() + timeout
    while (left := processes_with_env(MARK, mark)) and time.monotonic() < deadline:
        time.sleep(0.02)
    return left


async def gone(mark: str, within: float = GONE_GUARD) -> list[int]:
    """`wait_gone` for async tests: the event loop goes on meanwhile."""
    deadline = time.monotonic() + within
    # Polling: another process's end is no event of ours.
    while (left := processes_with_env(MARK, mark)) and time.monotonic() < deadline:  # noqa: ASYNC110
        await anyio.sleep(0.02)
    return left
