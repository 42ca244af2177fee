"""Mentions end to end: clients we did not write send `resource_link` blocks to
`python -m acp_agent`, which reads them (through the client's fs when offered) and sends the
fake OpenAI server the text with its path and range.

The SDK client stands in for an editor with unsaved buffers; acpx sends a structured prompt
(`exec --file prompt.json`, a JSON array of content blocks) and serves fs only inside its
`--cwd`, so a mention outside it is asked about, then read from the disk.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from acp import resource_block, resource_link_block, text_block
from acp.schema import ReadTextFileResponse, TextResourceContents
from acpx_support import needs_acpx, run_acpx
from fake_llm import FakeLLM
from test_e2e_acpx import answer_to, frames, updates
from test_e2e_sdk_client import RecordingClient, running_agent

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]

APP = 'def main():\n    return "disk"\n\nprint(main())\n'


class EditorWithBuffer(RecordingClient):
    """An editor where `app.py` has unsaved changes."""

    def __init__(self, buffer_path: Path) -> None:
        super().__init__()
        self.buffer_path = str(buffer_path)

    async def read_text_file(
        self,
        session_id: str,
        path: str,
        line: int | None = None,
        limit: int | None = None,
        **kwargs: Any,
    ) -> ReadTextFileResponse:
        if path != self.buffer_path:
            return await super().read_text_file(session_id, path, line, limit, **kwargs)
        self.reads.append((path, line, limit))
        lines = 'def main():\n    return "buffer"\n'.splitlines(keepends=True)
        start = (line or 1) - 1
        return ReadTextFileResponse(
            content="".join(lines[start : None if limit is None else start + limit])
        )


def user_content(fake: FakeLLM) -> Any:
    return fake.requests[-1]["messages"][-1]["content"]


async def test_the_sdk_client_mentions_reach_the_model_with_path_range_and_unsaved_text(
    fake_llm: FakeLLM,
    agent_env: dict[str, str],
    agent_stderr: Path,
    workspace: Path,
    tmp_path: Path,
) -> None:
    app = workspace / "app.py"
    app.write_text(APP)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "notes.md").write_text("# Notes from outside\n")
    client = EditorWithBuffer(app)
    async with running_agent(agent_env, agent_stderr, workspace, client) as (conn, _, _):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        blocks = [
            text_block("compare "),
            resource_link_block("app.py", app.as_uri() + "#L1-2"),
            text_block(" with "),
            resource_link_block("notes.md", (elsewhere / "notes.md").as_uri()),
            text_block(" and "),
            resource_link_block("gone.py", (workspace / "gone.py").as_uri()),
        ]
        result = await asyncio.wait_for(
            conn.prompt(session_id=session.session_id, prompt=blocks), 10
        )

    assert result.stop_reason == "end_turn"
    assert client.reads[0] == (str(app), 1, 2)
    [asked] = client.permission_requests  # only the mention outside the workspace
    assert asked.title == f"Read {elsewhere}/notes.md (mentioned)"
    content = user_content(fake_llm)
    assert content == "\n".join(
        [
            f"compare [@app.py]({app.as_uri()}#L1-2) with "
            f"[@notes.md]({(elsewhere / 'notes.md').as_uri()}) and "
            f"[@gone.py]({(workspace / 'gone.py').as_uri()})",
            f'<file path="{app}" lines="1-2">\ndef main():\n    return "buffer"\n</file>',
            f'<file path="{elsewhere}/notes.md">\n# Notes from outside\n</file>',
            f"[the mentioned file {workspace}/gone.py was not read: it does not exist]",
        ]
    )


async def test_the_sdk_client_embedded_selection_reaches_the_model_with_its_range(
    fake_llm: FakeLLM,
    agent_env: dict[str, str],
    agent_stderr: Path,
    workspace: Path,
) -> None:
    """What Zed sends for `@file` and selections to an agent with `embeddedContext`: the
    text comes along, so nothing is read and nothing asked, and the model gets it with its
    path and range."""
    app = workspace / "app.py"
    app.write_text(APP)
    client = RecordingClient()
    selection = TextResourceContents(
        uri=app.as_uri() + "#L4:4", text="print(main())\n", mime_type="text/x-python"
    )
    async with running_agent(agent_env, agent_stderr, workspace, client) as (conn, _, _):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        blocks = [text_block("why "), resource_block(selection)]
        result = await asyncio.wait_for(
            conn.prompt(session_id=session.session_id, prompt=blocks), 10
        )

    assert result.stop_reason == "end_turn"
    assert client.reads == [] and client.permission_requests == []
    assert user_content(fake_llm) == (
        f"why [@app.py]({app.as_uri()}#L4:4)\n"
        f'<file path="{app}" lines="4-4">\nprint(main())\n</file>'
    )


def run_acpx_file(
    env: dict[str, str], cwd: Path, blocks: list[dict[str, Any]], prompt_file: Path
) -> subprocess.CompletedProcess[str]:
    """`acpx exec --file PROMPT.json`: a structured prompt (ACP content blocks)."""
    prompt_file.write_text(json.dumps(blocks), encoding="utf-8")
    return run_acpx(env, cwd, "exec", "--file", str(prompt_file))


@needs_acpx
def test_acpx_sends_resource_links_which_are_read_through_its_fs_or_asked_about(
    fake_llm: FakeLLM, agent_env: dict[str, str], workspace: Path, tmp_path: Path
) -> None:
    app = workspace / "app.py"
    app.write_text(APP)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "notes.md").write_text("# Notes from outside\n")
    blocks = [
        {"type": "text", "text": "explain "},
        {"type": "resource_link", "uri": app.as_uri() + "#L1:2", "name": "app.py"},
        {"type": "text", "text": " using "},
        {"type": "resource_link", "uri": (elsewhere / "notes.md").as_uri(), "name": "notes.md"},
    ]
    messages = frames(run_acpx_file(agent_env, workspace, blocks, tmp_path / "prompt.json"))

    sent = next(m for m in messages if m.get("method") == "session/prompt")
    assert sent["params"]["prompt"] == blocks
    reads = [m["params"] for m in messages if m.get("method") == "fs/read_text_file"]
    assert reads[0]["path"] == str(app) and (reads[0]["line"], reads[0]["limit"]) == (1, 2)
    [asked] = [m["params"] for m in messages if m.get("method") == "session/request_permission"]
    assert asked["toolCall"]["title"] == f"Read {elsewhere}/notes.md (mentioned)"
    statuses = [u.get("status") for u in updates(messages, "tool_call_update")]
    assert statuses == ["completed"]
    assert answer_to(messages, "session/prompt")["result"]["stopReason"] == "end_turn"
    content = user_content(fake_llm)
    assert f'<file path="{app}" lines="1-2">\ndef main():\n    return "disk"\n</file>' in content
    # acpx serves fs only inside its cwd: the allowed read outside comes from the disk.
    assert f'<file path="{elsewhere}/notes.md">\n# Notes from outside\n</file>' in content
    assert content.startswith(
        f"explain [@app.py]({app.as_uri()}#L1:2) using "
        f"[@notes.md]({(elsewhere / 'notes.md').as_uri()})"
    )
