from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from pydantic import ValidationError
from tool_fakes import make_context

from acp_agent.tools import ToolContext, ToolFailed, _ripgrep
from acp_agent.tools._filelist import glob_regex, is_ignored, list_files, parse_gitignore
from acp_agent.tools.search import MAX_LINE_CHARS, Search, SearchParams

pytestmark = pytest.mark.anyio

TOOL = Search()


@pytest.fixture(params=["ripgrep", "fallback"], autouse=True)
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test runs on ripgrep and on the Python fallback used when `rg` is missing."""
    if request.param == "fallback":
        monkeypatch.setattr(_ripgrep, "find_rg", lambda: None)
    else:
        assert _ripgrep.find_rg() is not None, "the ripgrep wheel should be installed"
    return str(request.param)


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def listed(text: str) -> list[str]:
    """The result lines of a search answer (no header, no notices)."""
    return [line for line in text.splitlines()[1:] if not line.startswith("[")]


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


async def test_a_glob_without_a_slash_matches_names_at_any_depth(
    root: Path, local_ctx: ToolContext
) -> None:
    write(root, {"a.py": "", "pkg/b.py": "", "pkg/deep/c.py": "", "pkg/d.txt": ""})

    outcome = await TOOL.run(SearchParams(glob="*.py"), local_ctx)

    assert listed(outcome.model_text) == ["a.py", "pkg/b.py", "pkg/deep/c.py"]
    assert outcome.model_text.startswith(f"3 files (paths relative to {root}):")


async def test_a_glob_with_a_slash_matches_paths_from_the_root(
    root: Path, local_ctx: ToolContext
) -> None:
    write(root, {"src/a.ts": "", "src/x/b.tsx": "", "lib/c.ts": "", "src/d.js": ""})

    outcome = await TOOL.run(SearchParams(glob="src/**/*.{ts,tsx}"), local_ctx)

    assert listed(outcome.model_text) == ["src/a.ts", "src/x/b.tsx"]


async def test_grep_lists_matching_lines_with_numbers(root: Path, local_ctx: ToolContext) -> None:
    write(root, {"a.py": "import os\ndef main():\n    pass\n", "b.md": "def main\n"})

    outcome = await TOOL.run(SearchParams(grep=r"def \w+", glob="*.py"), local_ctx)

    assert listed(outcome.model_text) == ["a.py:2: def main():"]
    assert outcome.model_text.startswith("1 matching line in 1 file")


async def test_grep_can_ignore_case(root: Path, local_ctx: ToolContext) -> None:
    write(root, {"a.txt": "Hello\nhello\nHELLO\nbye\n"})

    sensitive = await TOOL.run(SearchParams(grep="hello"), local_ctx)
    insensitive = await TOOL.run(SearchParams(grep="hello", ignore_case=True), local_ctx)

    assert len(listed(sensitive.model_text)) == 1
    assert len(listed(insensitive.model_text)) == 3


async def test_output_is_bounded_with_a_notice_that_there_are_more(
    root: Path, local_ctx: ToolContext
) -> None:
    write(root, {f"f{n:02}.txt": "needle\n" * 3 for n in range(20)})

    files = await TOOL.run(SearchParams(glob="*.txt", max_results=5), local_ctx)
    lines = await TOOL.run(SearchParams(grep="needle", max_results=7), local_ctx)
    exact = await TOOL.run(SearchParams(grep="needle", max_results=60), local_ctx)

    assert listed(files.model_text) == [f"f{n:02}.txt" for n in range(5)]
    assert "[showing the first 5 files; there are more: narrow the search" in files.model_text
    assert listed(lines.model_text)[-1] == "f02.txt:1: needle"
    assert "[showing the first 7 matching lines in 3 files; there are more:" in lines.model_text
    assert len(listed(exact.model_text)) == 60
    assert "there are more" not in exact.model_text


async def test_long_lines_are_clipped(root: Path, local_ctx: ToolContext) -> None:
    write(root, {"min.js": "x" * 5000 + "needle" + "y" * 5000 + "\n"})

    outcome = await TOOL.run(SearchParams(grep="needle"), local_ctx)

    (line,) = listed(outcome.model_text)
    assert line.endswith(" [...]")
    assert len(line) < MAX_LINE_CHARS + 30


async def test_binary_files_are_skipped_by_grep(root: Path, local_ctx: ToolContext) -> None:
    (root / "blob.bin").write_bytes(b"needle\0\0\0")
    write(root, {"text.txt": "needle\n"})

    outcome = await TOOL.run(SearchParams(grep="needle"), local_ctx)

    assert listed(outcome.model_text) == ["text.txt:1: needle"]


async def test_an_invalid_regex_is_an_error_the_model_can_fix(local_ctx: ToolContext) -> None:
    with pytest.raises(ToolFailed, match="not a valid regular expression") as failure:
        await TOOL.run(SearchParams(grep="(unclosed"), local_ctx)

    assert "regex parse error" in str(failure.value)  # what is wrong, in the engine's words


def test_a_search_needs_a_glob_or_a_grep() -> None:
    with pytest.raises(ValidationError, match="give glob, grep or both"):
        SearchParams()


async def test_nothing_found_says_so(root: Path, local_ctx: ToolContext) -> None:
    outcome = await TOOL.run(SearchParams(glob="*.rs"), local_ctx)

    assert outcome.model_text == "No files found."


async def test_additional_roots_are_searched_once_each(root: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    write(root, {"a.txt": "needle\n", "nested/b.txt": "needle\n"})
    write(other, {"c.txt": "needle\n"})
    ctx = make_context(root, None, extra_roots=(other, root / "nested"))

    outcome = await TOOL.run(SearchParams(grep="needle"), ctx)

    assert listed(outcome.model_text) == [
        "a.txt:1: needle",
        "nested/b.txt:1: needle",
        f"{other}/c.txt:1: needle",
    ]


async def test_a_path_narrows_the_search(root: Path, local_ctx: ToolContext) -> None:
    write(root, {"a/x.txt": "needle\n", "b/y.txt": "needle\n"})

    outcome = await TOOL.run(SearchParams(grep="needle", path="b"), local_ctx)
    one_file = await TOOL.run(SearchParams(grep="needle", path="a/x.txt"), local_ctx)

    assert listed(outcome.model_text) == ["b/y.txt:1: needle"]
    assert listed(one_file.model_text) == ["a/x.txt:1: needle"]


@needs_git
async def test_in_a_git_repository_gitignore_is_honoured_and_untracked_files_count(
    root: Path, local_ctx: ToolContext
) -> None:
    git(root, "init", "-q")
    write(
        root,
        {
            ".gitignore": "build/\n*.log\n",
            "tracked.py": "needle\n",
            "untracked.py": "needle\n",
            "debug.log": "needle\n",
            "build/out.py": "needle\n",
            "node_modules/pkg/index.js": "needle\n",
        },
    )
    git(root, "add", "tracked.py", ".gitignore")

    outcome = await TOOL.run(SearchParams(grep="needle"), local_ctx)

    assert listed(outcome.model_text) == ["tracked.py:1: needle", "untracked.py:1: needle"]


async def test_outside_git_a_gitignore_walk_skips_ignored_files(
    root: Path, local_ctx: ToolContext
) -> None:
    write(
        root,
        {
            ".gitignore": "*.log\n!keep.log\n/dist\ncache/\n",
            "a.txt": "",
            "keep.log": "",
            "drop.log": "",
            "dist/bundle.txt": "",
            "sub/dist/real.txt": "",
            "sub/cache/c.txt": "",
            "sub/.gitignore": "local.txt\n",
            "sub/local.txt": "",
            "local.txt": "",
            ".venv/lib.txt": "",
            ".git/config.txt": "",
        },
    )

    outcome = await TOOL.run(SearchParams(glob="*"), local_ctx)

    assert listed(outcome.model_text) == [
        ".gitignore",
        "a.txt",
        "keep.log",
        "local.txt",
        "sub/.gitignore",
        "sub/dist/real.txt",
    ]


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("*.py", "a.py", True),
        ("*.py", "dir/a.py", False),
        ("**/*.py", "a.py", True),
        ("**/*.py", "x/y/a.py", True),
        ("src/**", "src/a/b", True),
        ("a/**/b", "a/b", True),
        ("a/**/b", "a/x/y/b", True),
        ("?.txt", "ab.txt", False),
        ("[ab].txt", "b.txt", True),
        ("[!ab].txt", "b.txt", False),
        ("*.{js,ts}", "x.ts", True),
        ("a+b(c).txt", "a+b(c).txt", True),
    ],
)
def test_glob_patterns(pattern: str, path: str, matches: bool) -> None:
    assert (glob_regex(pattern).fullmatch(path) is not None) is matches


def test_gitignore_rules_follow_git_semantics() -> None:
    rules = parse_gitignore("# comment\n\n*.o\n!important.o\n/top\nlogs/\ndoc/*.md\n\\#hash\n")

    assert is_ignored("x/y.o", False, rules)
    assert not is_ignored("x/important.o", False, rules)
    assert is_ignored("top", True, rules)
    assert not is_ignored("sub/top", True, rules)
    assert is_ignored("a/logs", True, rules)
    assert not is_ignored("a/logs", False, rules)
    assert is_ignored("doc/a.md", False, rules)
    assert not is_ignored("doc/sub/a.md", False, rules)
    assert is_ignored("#hash", False, rules)


def test_a_nested_gitignore_applies_below_its_directory_only() -> None:
    rules = parse_gitignore("/gen\n", base="pkg")

    assert is_ignored("pkg/gen", True, rules)
    assert not is_ignored("gen", True, rules)


def test_listing_outside_git_skips_the_always_skipped_directories(tmp_path: Path) -> None:
    write(tmp_path, {"a.txt": "", "node_modules/b.txt": "", ".venv/c.txt": ""})

    assert [p.name for p in list_files(tmp_path)] == ["a.txt"]


async def test_the_finished_search_reports_how_much_it_found_as_raw_output(
    root: Path, local_ctx: ToolContext
) -> None:
    write(root, {"a.py": "x = 1\nx = 2\n", "b.py": "y = 1\n"})

    grep = await TOOL.run(SearchParams(grep="x =", max_results=1), local_ctx)
    files = await TOOL.run(SearchParams(glob="*.py"), local_ctx)

    assert grep.raw_output == {
        "listed": 1,
        "unit": "matching line",
        "more": True,
        "timed_out": False,
    }
    assert files.raw_output == {"listed": 2, "unit": "file", "more": False, "timed_out": False}
