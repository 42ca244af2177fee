"""How fast `job_output` answers on a live background job.

Starts, in a temporary workspace (deleted afterwards), a local background job through the
shell tool (`Shell().run` with `background: true`, in-process, over a local editor, with a
task group standing in for the connection's), then times `JobOutput().run` with
`wait_seconds` 0, min / median / max over the calls, for two jobs:

- `ticking`: a line every 10 ms, so each read returns a few new lines;
- `flooding`: `yes`, as fast as the pipe takes it, so each read has the whole buffer to
  decode and cut (8 KiB head, 64 KiB ring) for the model.

    uv run python benchmarks/jobs.py               # 50 calls each
    uv run python benchmarks/jobs.py --calls 200

Standard library only (plus the project).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import tempfile
import time
from pathlib import Path

import anyio

from acp_agent.tools import ToolContext
from acp_agent.tools.jobs import JobIdParams, JobKill, JobOutput, JobOutputParams
from acp_agent.tools.local import LocalEditor
from acp_agent.tools.shell import Shell, ShellParams

JOBS = {
    "ticking": "while true; do echo tick $(date +%s%N); sleep 0.01; done",
    "flooding": "yes 'a line of output from a busy job'",
}


async def time_reads(root: Path, command: str, calls: int) -> tuple[list[float], int]:
    """Milliseconds per `job_output` call, and the bytes the calls returned."""
    base = ToolContext(session_id="bench", cwd=root, roots=(root,), editor=LocalEditor())
    async with anyio.create_task_group() as group:
        ctx = dataclasses.replace(base, background=group)
        started = await Shell().run(ShellParams(command=command, background=True), ctx)
        assert started.raw_output is not None
        job_id = started.raw_output["job_id"]
        reader = JobOutput()
        await reader.run(JobOutputParams(job_id=job_id, wait_seconds=5), ctx)  # it is live
        times, returned = [], 0
        for _ in range(calls):
            await anyio.sleep(0.005)  # let output arrive between reads, as between turns
            begin = time.perf_counter()
            outcome = await reader.run(JobOutputParams(job_id=job_id), ctx)
            times.append((time.perf_counter() - begin) * 1000)
            assert outcome.raw_output is not None
            returned += outcome.raw_output["new_bytes"]
        await JobKill().run(JobIdParams(job_id=job_id), ctx)
    return times, returned


async def report(root: Path, calls: int) -> None:
    print(f"job_output latency over {calls} calls on a live job (wait_seconds 0):")
    for name, command in JOBS.items():
        times, returned = await time_reads(root, command, calls)
        print(
            f"  {name:9} min {min(times):6.3f} ms   median {statistics.median(times):6.3f} "
            f"ms   max {max(times):6.3f} ms   ({returned // calls:,} new bytes per call)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=50)
    calls = parser.parse_args().calls
    with tempfile.TemporaryDirectory() as workspace:
        anyio.run(report, Path(os.path.realpath(workspace)), calls)


if __name__ == "__main__":
    main()
