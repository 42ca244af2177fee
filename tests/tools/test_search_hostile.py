"""search against what could hang it, leak from it or fool it: a regex that backtracks for
ever, a search that stalls, file names that break line-based output, symlinks out of the
project, ignored files a glob would bring back, patterns ripgrep rejects.

Each runs on ripgrep and on the Python fallback (`rg` looked up as missing), except where
one backend alone has the problem. The search child's processes are found through /proc.
"""

from __future__ import annotations

import dataclasses
import os
import stat
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import pytest

from acp_agent.tools import ToolContext, ToolFailed, _ripgrep, search
from acp_agent.tools.search import Search, SearchParams

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
]

TOOL = Search()
CATASTROPHIC = "(a+)+$"
HOSTILE_LINE = "a" * 40 + "!\n"
"""Python's `re` takes about 2**40 steps to fail `CATASTROPHIC` on it."""
POLL_SECONDS = 0.005


@pytest.fixture(params=["ripgrep", "fallback"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "fallback":
        monkeypatch.setattr(_ripgrep, "find_rg", lambda: None)
    return str(request.param)


def fake_rg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> None:
    """Make `rg` a shell script: a ripgrep that stalls (a hung network disk, say)."""
    script = tmp_path / "fake-rg"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setattr(_ripgrep, "find_rg", lambda: str(script))


# --- processes ---------------------------------------------------------------------------


def _stat_fields(pid: str) -> list[str]:
    """Fields of /proc/<pid>/stat after the command name: state, ppid, pgrp ..."""
    return Path("/proc", pid, "stat").read_text().rsplit(")", 1)[1].split()


def _live(match: int, field: int) -> Iterator[int]:
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = _stat_fields(entry.name)
        except (OSError, IndexError):
            continue
        if fields[0] != "Z" and int(fields[field]) == match:
            yield int(entry.name)


def our_children() -> list[int]:
    return list(_live(os.getpid(), 1))


def group_members(pgid: int) -> list[int]:
    return list(_live(pgid, 2))


async def eventually(probe: Callable[[], list[int]], limit: float) -> list[int]:
    """`probe()` once it is not empty, or after `limit` seconds: for what only /proc can
    tell (a child started, killed ones gone), which offers nothing to wait on."""
    for _ in range(int(limit / POLL_SECONDS)):
        if found := probe():
            return found
        await anyio.sleep(POLL_SECONDS)
    return probe()


async def cancelled_once_started(params: SearchParams, ctx: ToolContext) -> tuple[float, int]:
    """Start the search, cancel it once its child runs; seconds from the cancel to the
    call's end, and the child's pid."""
    ended = anyio.Event()
    async with anyio.create_task_group() as group:

        async def call() -> None:
            try:
                await TOOL.run(params, ctx)
            finally:
                ended.set()

        group.start_soon(call)
        children = await eventually(our_children, limit=5.0)
        assert children, "no search process started"
        child = children[0]
        cancelled_at = time.monotonic()
        group.cancel_scope.cancel()
    assert ended.is_set()
    return time.monotonic() - cancelled_at, child


async def gone(pgid: int) -> list[int]:
    """Members of the process group still alive after a short grace (killed processes
    take a moment to leave /proc)."""
    await eventually(lambda: [] if group_members(pgid) else [pgid], limit=2.0)
    return group_members(pgid)


# --- cancel and deadline -----------------------------------------------------------------


async def test_cancel_ends_a_catastrophic_regex_on_the_fallback_at_once(
    root: Path, local_ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_ripgrep, "find_rg", lambda: None)
    (root / "hostile.txt").write_text(HOSTILE_LINE)

    took, child = await cancelled_once_started(SearchParams(grep=CATASTROPHIC), local_ctx)

    assert took < 1.0
    assert await gone(child) == []


async def test_cancel_ends_a_stalled_ripgrep_at_once(
    root: Path, local_ctx: ToolContext, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_rg(tmp_path, monkeypatch, "sleep 60 & wait")  # a grandchild too
    (root / "a.txt").write_text("needle\n")

    took, child = await cancelled_once_started(SearchParams(grep="needle"), local_ctx)

    assert took < 1.0
    assert await gone(child) == []


async def test_ripgrep_answers_a_catastrophic_regex_at_once(
    root: Path, local_ctx: ToolContext
) -> None:
    (root / "hostile.txt").write_text(HOSTILE_LINE)

    with anyio.fail_after(5):
        outcome = await TOOL.run(SearchParams(grep=CATASTROPHIC), local_ctx)

    assert outcome.model_text == "No matching lines found."
    assert our_children() == []


async def test_a_search_past_the_deadline_returns_what_it_found_and_says_so_on_the_fallback(
    root: Path, local_ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_ripgrep, "find_rg", lambda: None)
    monkeypatch.setattr(search, "SEARCH_DEADLINE_SECONDS", 2.0)
    (root / "a.txt").write_text("aaa\n")  # found at once; then z.txt never finishes
    (root / "z.txt").write_text(HOSTILE_LINE)

    with anyio.fail_after(10):
        outcome = await TOOL.run(SearchParams(grep=CATASTROPHIC), local_ctx)

    assert outcome.model_text.splitlines()[1] == "a.txt:1: aaa"
    assert "[the search took longer than 2 s and was stopped" in outcome.model_text
    assert outcome.raw_output is not None and outcome.raw_output["timed_out"] is True
    assert our_children() == []


async def test_a_ripgrep_past_the_deadline_returns_what_it_found_and_says_so(
    root: Path, local_ctx: ToolContext, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found = root / "a.txt"
    match = (
        f'{{"type":"match","data":{{"path":{{"text":"{found}"}},'
        '"lines":{"text":"needle\\n"},"line_number":3}}'
    )
    fake_rg(tmp_path, monkeypatch, f"printf '%s\\n' '{match}'\nexec sleep 60")
    monkeypatch.setattr(search, "SEARCH_DEADLINE_SECONDS", 1.0)

    with anyio.fail_after(10):
        outcome = await TOOL.run(SearchParams(grep="needle"), local_ctx)

    assert outcome.model_text.splitlines()[1] == "a.txt:3: needle"
    assert "[the search took longer than 1 s and was stopped" in outcome.model_text
    assert our_children() == []


async def test_the_search_child_gets_the_turns_clean_environment(
    root: Path, local_ctx: ToolContext, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = tmp_path / "rg-env"
    fake_rg(tmp_path, monkeypatch, f"env > '{seen}'")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-ours")
    ctx = dataclasses.replace(local_ctx, child_env={"CHOSEN": "by-the-turn"})

    await TOOL.run(SearchParams(grep="x"), local_ctx)
    ours = seen.read_text()
    await TOOL.run(SearchParams(grep="x"), ctx)

    assert "sk-ours" not in ours
    assert "CHOSEN=by-the-turn" in seen.read_text()


# --- what it reports ---------------------------------------------------------------------


async def test_file_names_with_spaces_colons_and_newlines_are_reported_exactly(
    backend: str, root: Path, local_ctx: ToolContext
) -> None:
    names = ["with space.txt", "a:1:b.txt", "new\nline.txt"]
    for name in names:
        (root / name).write_text("first\nneedle here\n")

    lines = await TOOL.run(SearchParams(grep="needle"), local_ctx)
    files = await TOOL.run(SearchParams(glob="*.txt"), local_ctx)

    expected = sorted(names)
    assert [(loc.path, loc.line) for loc in lines.locations] == [
        (str(root / name), 2) for name in expected
    ]
    assert [loc.path for loc in files.locations] == [str(root / name) for name in expected]
    for name in names:
        assert f"\n{name}:2: needle here" in lines.model_text
        assert f"\n{name}\n" in files.model_text + "\n"


async def test_a_symlink_out_of_the_project_is_not_followed(
    backend: str, root: Path, local_ctx: ToolContext, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("needle outside\n")
    (root / "linked-dir").symlink_to(outside)
    (root / "linked-file.txt").symlink_to(outside / "secret.txt")
    (root / "inside.txt").write_text("needle inside\n")

    lines = await TOOL.run(SearchParams(grep="needle"), local_ctx)
    files = await TOOL.run(SearchParams(glob="**"), local_ctx)

    assert [loc.path for loc in lines.locations] == [str(root / "inside.txt")]
    assert [loc.path for loc in files.locations] == [str(root / "inside.txt")]
    assert "outside" not in lines.model_text


@pytest.mark.parametrize("glob", ["*.py", "**/*.py"])
async def test_a_glob_does_not_bring_back_files_gitignore_leaves_out(
    backend: str, root: Path, local_ctx: ToolContext, glob: str
) -> None:
    (root / ".gitignore").write_text("debug.py\nbuild/\n")
    (root / "build").mkdir()
    for name in ("kept.py", "debug.py", "build/out.py"):
        (root / name).write_text("needle\n")

    lines = await TOOL.run(SearchParams(grep="needle", glob=glob), local_ctx)
    files = await TOOL.run(SearchParams(glob=glob), local_ctx)

    assert [loc.path for loc in lines.locations] == [str(root / "kept.py")]
    assert [loc.path for loc in files.locations] == [str(root / "kept.py")]


async def test_a_pattern_ripgrep_rejects_is_a_readable_error(
    root: Path, local_ctx: ToolContext
) -> None:
    (root / "a.txt").write_text("ab\n")

    with pytest.raises(ToolFailed) as failure:
        await TOOL.run(SearchParams(grep="(?<=a)b"), local_ctx)

    message = str(failure.value)
    assert message.startswith("grep is not a valid regular expression: regex parse error")
    assert "look-around" in message
    assert our_children() == []


async def test_a_named_pipe_as_the_path_is_refused_rather_than_waited_on(
    backend: str, root: Path, local_ctx: ToolContext
) -> None:
    os.mkfifo(root / "pipe")

    with anyio.fail_after(5), pytest.raises(ToolFailed, match="not a regular file"):
        await TOOL.run(SearchParams(grep="x", path="pipe"), local_ctx)


async def test_a_binary_or_large_file_given_as_the_path_is_not_searched(
    backend: str, root: Path, local_ctx: ToolContext
) -> None:
    (root / "blob.bin").write_bytes(b"needle\0\0")
    (root / "big.txt").write_text("needle\n" + "x" * (_ripgrep.MAX_FILE_BYTES + 1))

    for name in ("blob.bin", "big.txt"):
        outcome = await TOOL.run(SearchParams(grep="needle", path=name), local_ctx)
        assert outcome.model_text == "No matching lines found."


async def test_a_huge_result_stops_the_search_at_max_results(
    backend: str, root: Path, local_ctx: ToolContext
) -> None:
    (root / "many.txt").write_text("needle\n" * 200_000)

    outcome = await TOOL.run(SearchParams(grep="needle", max_results=3), local_ctx)

    assert outcome.model_text.splitlines()[1:4] == [f"many.txt:{n}: needle" for n in (1, 2, 3)]
    assert "there are more" in outcome.model_text
    assert our_children() == []
