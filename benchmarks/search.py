"""How fast the search tool answers over a large tree, against ripgrep run by hand.

Builds, in a temporary directory (deleted afterwards), 50,000 small files in nested
directories (50 top-level, 20 below each, 50 files in each), one file in 100 holding a line
`needle_<n> = compute(...)`. Then times, min / median / max over the runs:

- the tool (`Search().run`, in-process, with a real `ToolContext` over a local editor) for
  a literal (`needle_7`) and a regex (`needle_\\d+ = compute`), with max_results 1000 so
  the whole answer is read;
- `rg` run directly with the arguments the tool gives it;
- with `--fallback`, the same searches on the Python fallback (as when `rg` is missing).

    uv run python benchmarks/search.py               # 5 runs
    uv run python benchmarks/search.py --runs 9 --fallback

Standard library only (plus the project).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import anyio

from acp_agent.tools import ToolContext, _ripgrep
from acp_agent.tools.local import LocalEditor
from acp_agent.tools.search import Search, SearchParams

TOP, MIDDLE, FILES = 50, 20, 50
SEARCHES = {"literal": "needle_7", "regex": r"needle_\d+ = compute"}


def build_tree(root: Path) -> None:
    body = "".join(f"line {i}: nothing to see here, value = {i * 7}\n" for i in range(20))
    count = 0
    for top in range(TOP):
        for middle in range(MIDDLE):
            directory = root / f"pkg{top:02}" / f"mod{middle:02}"
            directory.mkdir(parents=True)
            for n in range(FILES):
                hit = f"needle_{count} = compute({count})\n" if count % 100 == 0 else ""
                (directory / f"file{n:02}.py").write_text(body + hit)
                count += 1


def timed(runs: int, action: Callable[[], object]) -> list[float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return times


def report(label: str, times: list[float]) -> None:
    print(
        f"{label:34} min {min(times):7.3f} s   median {statistics.median(times):7.3f} s"
        f"   max {max(times):7.3f} s"
    )


def tool_search(root: Path, pattern: str) -> str:
    ctx = ToolContext(session_id="bench", cwd=root, roots=(root,), editor=LocalEditor())
    params = SearchParams(grep=pattern, max_results=1000)
    outcome = anyio.run(Search().run, params, ctx)
    return outcome.model_text


def rg_directly(root: Path, pattern: str) -> None:
    request = _ripgrep.SearchRequest(root, pattern, ignore_case=False, name_glob=None)
    subprocess.run(_ripgrep.command_for(request), stdout=subprocess.DEVNULL, check=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--fallback", action="store_true", help="also time the Python fallback")
    args = parser.parse_args()
    if _ripgrep.find_rg() is None:
        raise SystemExit("rg not found: install the project (the ripgrep wheel ships it)")
    with tempfile.TemporaryDirectory(prefix="search-bench-") as directory:
        root = Path(os.path.realpath(directory))
        start = time.perf_counter()
        build_tree(root)
        print(f"tree: {TOP * MIDDLE * FILES} files in {time.perf_counter() - start:.1f} s\n")
        for name, pattern in SEARCHES.items():
            first = tool_search(root, pattern).splitlines()[0]
            print(f"{name} {pattern!r}: {first.split(' (')[0]}")
            report("  tool (ripgrep)", timed(args.runs, lambda p=pattern: tool_search(root, p)))
            report("  rg directly", timed(args.runs, lambda p=pattern: rg_directly(root, p)))
            if args.fallback:
                real = _ripgrep.find_rg
                _ripgrep.find_rg = lambda: None  # type: ignore[assignment]
                try:
                    fallback = timed(args.runs, lambda p=pattern: tool_search(root, p))
                finally:
                    _ripgrep.find_rg = real  # type: ignore[assignment]
                report("  tool (Python fallback)", fallback)


if __name__ == "__main__":
    main()
