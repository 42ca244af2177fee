"""The git the agent runs itself (search's fallback listing, file mentions) runs no program
the repository's config names, and gets none of our keys."""

from __future__ import annotations

import shutil
import stat
import subprocess
from pathlib import Path

import anyio
import pytest

from acp_agent.tools import ToolContext, _ripgrep
from acp_agent.tools._filelist import list_files
from acp_agent.tools.search import Search, SearchParams

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed"),
]

TOOL = Search()


def executable(path: Path, body: str) -> Path:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture(params=["ripgrep", "fallback"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "fallback":  # the fallback lists files through git
        monkeypatch.setattr(_ripgrep, "find_rg", lambda: None)
    return str(request.param)


@pytest.fixture
def marker(root: Path, tmp_path: Path) -> Path:
    """A git repository in `root` whose config runs a program that leaves this marker."""
    created = tmp_path / "fsmonitor-ran"
    hook = executable(tmp_path / "fsmonitor-hook", f"echo ran >> '{created}'\nexit 1")
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    (root / "tracked.py").write_text("needle\n")
    (root / "untracked.py").write_text("needle\n")
    subprocess.run(["git", "add", "tracked.py"], cwd=root, check=True)
    for key, value in {
        "core.fsmonitor": str(hook),
        "diff.external": str(hook),
        "core.pager": str(hook),
    }.items():
        subprocess.run(["git", "config", key, value], cwd=root, check=True)
    return created


async def test_a_search_in_a_repository_never_runs_its_fsmonitor(
    backend: str, root: Path, local_ctx: ToolContext, marker: Path
) -> None:
    files = await TOOL.run(SearchParams(glob="*.py"), local_ctx)
    lines = await TOOL.run(SearchParams(grep="needle"), local_ctx)

    expected = [str(root / "tracked.py"), str(root / "untracked.py")]
    assert [loc.path for loc in files.locations] == expected
    assert [loc.path for loc in lines.locations] == expected
    assert not await anyio.Path(marker).exists()


def test_listing_a_repository_never_runs_its_fsmonitor(root: Path, marker: Path) -> None:
    assert [path.name for path in list_files(root)] == ["tracked.py", "untracked.py"]
    assert not marker.exists()


def test_git_gets_none_of_our_keys(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = tmp_path / "git-env"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    executable(bin_dir / "git", f"env > '{seen}'\nexit 128")  # "not a repository": a walk
    monkeypatch.setenv("PATH", f"{bin_dir}:{Path(shutil.which('sh') or '/bin/sh').parent}")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-ours")
    monkeypatch.setenv("HARMLESS_SETTING", "kept")
    (root / "a.txt").write_text("")

    assert [path.name for path in list_files(root)] == ["a.txt"]

    env = seen.read_text()
    assert "HARMLESS_SETTING=kept" in env
    assert "sk-ours" not in env
