"""Keep the processes we start out of our memory and our environment (issue item 3).

Every child we start runs as the same user as we do: the agent's local shell, MCP stdio
servers, the terminals of the headless runner (`acp-agent run`, itself the parent of the
agent server). `child_environment` keeps our keys out of a child's own environment, but
on Linux a same-user process may still read ours: `cat /proc/$PPID/environ` shows the
environment we were started with, keys included, and `/proc/<pid>/mem` our memory.

`forbid_inspection`, called first thing in every acp-agent process (`cli.main`), makes the
process non-dumpable (`prctl(PR_SET_DUMPABLE, 0)`). The kernel then gives its /proc files
to root and refuses same-user processes `environ`, `mem`, `maps`, `fd/` and `ptrace`
attach (debuggers and `py-spy` need root). What follows from it:

- children are dumpable again once they exec, so the tools they run work as before;
- we write no core dumps;
- we still read our own `status`, `stat`, `maps`, `cmdline`, `exe` and `fd/`, but no longer
  our own `environ`, `mem`, `io` or `auxv` (files only root may open now). Nothing here
  reads them: the environment is `os.environ`;
- `cmdline` stays readable by anyone, as always: no key is ever on our command line.

The interpreter runs a few dozen milliseconds before `main`; no child of ours exists then.
Removing the keys from `os.environ` as well would not help: the kernel's copy of the
initial environment is what /proc shows, and the cloud SDKs (boto3 for Bedrock,
google-auth for Vertex) read their credentials from `os.environ` when a provider is
created, possibly long after start-up (`/model`).

Other platforms get nothing. macOS has no /proc, but `ps eww <pid>` shows the environment
of any process of the same user (the kernel's `KERN_PROCARGS2`), and `PT_DENY_ATTACH` would
stop debuggers only, not that, while killing the agent if one is attached: there, as on
Windows, a command the model runs can read keys passed to us in environment variables.
"""

from __future__ import annotations

import ctypes
import os
import sys

PR_SET_DUMPABLE = 4
"""From <linux/prctl.h>."""


def forbid_inspection() -> str | None:
    """Make this process non-dumpable on Linux; None if done, else why not, for the debug
    log (logging is not configured yet when this runs).

    Never raises: a failure (a seccomp filter refusing prctl, a libc without it) leaves the
    process as it was, less protected and still working.
    """
    if not sys.platform.startswith("linux"):
        return f"not on {sys.platform}: same-user processes may read our environment"
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0:
            return None
        failure = f"prctl(PR_SET_DUMPABLE, 0) failed: {os.strerror(ctypes.get_errno())}"
    except (OSError, AttributeError) as exc:  # no libc to load, or no prctl in it
        failure = f"prctl unavailable: {exc}"
    return f"{failure}; same-user processes can read our environment through /proc"


__all__ = ["forbid_inspection"]
