"""A workspace directory per test, and contexts over a fake editor or the local fallback."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from tool_fakes import Events, FakeEditor, make_context

from acp_agent.tools import ToolContext


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """The session root; resolved so that comparisons with resolved paths hold (macOS /tmp)."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    return Path(os.path.realpath(workspace))


@pytest.fixture
def events() -> Events:
    return Events()


@pytest.fixture
def local_editor() -> FakeEditor:
    """A client that advertised nothing: every tool must fall back to local execution."""
    return FakeEditor(can_read_files=False, can_write_files=False, can_run_terminals=False)


@pytest.fixture
def local_ctx(root: Path, local_editor: FakeEditor, events: Events) -> ToolContext:
    return make_context(root, local_editor, events=events)
