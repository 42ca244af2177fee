"""What re-reading the instruction files costs per turn (the reader runs before every model
request).

Builds, in a temporary directory (deleted afterwards), a repository whose working directory
lies 20 folders deep, each of the 20 folders on the way (the root included) holding an
`AGENTS.md` of about 1 KB, and a user config directory with its own `AGENTS.md`. Then times
`InstructionReader.read`, min / median / max over the runs, in microseconds:

- cold: a new reader, as for the first turn of a session;
- warm: the same reader again, nothing changed (stat calls only);
- one changed: the same reader after one file in the middle of the chain was rewritten;
- render: `render_instructions` of the result (done once per turn as well).

    uv run python benchmarks/instructions.py             # 50 runs
    uv run python benchmarks/instructions.py --runs 200

Standard library only (plus the project).
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from acp_agent.knowledge.instructions import (
    InstructionReader,
    InstructionSettings,
    render_instructions,
)

FOLDERS = 20


def build_tree(base: Path) -> tuple[Path, Path, Path]:
    """The user config dir, the cwd, and the file that the "changed" runs rewrite."""
    user_dir = base / "config" / "acp-agent"
    user_dir.mkdir(parents=True)
    (user_dir / "AGENTS.md").write_text(rules("user"))
    folder = base / "repo"
    (folder / ".git").mkdir(parents=True)
    chain = [folder]
    for depth in range(1, FOLDERS):
        folder = folder / f"level{depth:02}"
        chain.append(folder)
    chain[-1].mkdir(parents=True)
    for depth, directory in enumerate(chain):
        (directory / "AGENTS.md").write_text(rules(f"level {depth}"))
    return user_dir, chain[-1], chain[FOLDERS // 2] / "AGENTS.md"


def rules(where: str) -> str:
    return "".join(f"- rule {n} for {where}: keep functions small and named.\n" for n in range(20))


def timed(
    runs: int, action: Callable[[], object], before: Callable[[], object] = lambda: None
) -> list[float]:
    times = []
    for _ in range(runs):
        before()
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return times


def report(label: str, times: list[float]) -> None:
    micro = [t * 1e6 for t in times]
    print(
        f"{label:<12} min {min(micro):9.1f}  median {statistics.median(micro):9.1f}"
        f"  max {max(micro):9.1f}  µs"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    settings = InstructionSettings()

    with tempfile.TemporaryDirectory() as scratch:
        user_dir, cwd, changing = build_tree(Path(scratch))
        reader = InstructionReader(settings, user_dir)
        edits = itertools.count()

        def edit_one() -> None:
            changing.write_text(rules(f"edit {next(edits)}"))

        files = reader.read(cwd)
        print(
            f"{len(files)} files, {sum(f.size for f in files):,} bytes,"
            f" {len(render_instructions(files)):,} characters rendered; {args.runs} runs"
        )
        # A new reader each time: the first turn of a session (the OS has the files cached).
        report("cold", timed(args.runs, lambda: InstructionReader(settings, user_dir).read(cwd)))
        report("warm", timed(args.runs, lambda: reader.read(cwd)))
        report("one changed", timed(args.runs, lambda: reader.read(cwd), before=edit_one))
        report("render", timed(args.runs, lambda: render_instructions(files)))


if __name__ == "__main__":
    main()
