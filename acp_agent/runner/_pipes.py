"""When stdout's reader goes away (`acp-agent run ... | head -n 2`): end quietly.

A Unix tool whose reader closed the pipe is killed by SIGPIPE, and the shell reports
128 + 13 = 141 for it (what `set -o pipefail` scripts see for `yes | head -1`'s writer).
Python ignores SIGPIPE and raises `BrokenPipeError` instead; we end the same way, with that
status and no traceback: 0 would hide that the output was cut short, and 1 would read as a
failure of our own. stdout is pointed at /dev/null first, so the writes still under way and
the interpreter's last flush at exit succeed unseen (Python's documented recipe, see the
`signal` module's "Note on SIGPIPE").
"""

from __future__ import annotations

import os
import sys
from contextlib import suppress

EXIT_CLOSED_PIPE = 141
"""128 + SIGPIPE: what a shell reports for a writer whose reader closed the pipe."""


def discard_stdout() -> None:
    """Send whatever is still written to stdout (buffered or not) to /dev/null."""
    with suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        finally:
            os.close(devnull)
