"""Heavy modules (a vendor SDK) imported off the event loop.

An import of the `openai` or `anthropic` SDK takes a second or more; run on the event loop
it would stall every session's stream for that long. `start` begins one in a daemon thread
(while a request is on its way), `finish` waits for it from a worker thread; Python's
import lock makes the two, and any number of callers, import the module once.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
import threading

import anyio.to_thread


def start(name: str) -> None:
    """Begin importing `name` in the background, unless it is imported already."""
    if not _imported(name):
        threading.Thread(target=_import, args=(name,), name=f"import {name}", daemon=True).start()


async def finish(name: str) -> None:
    """Return once `name` is imported, importing it in a worker thread if need be."""
    if not _imported(name):
        await anyio.to_thread.run_sync(importlib.import_module, name)


def _imported(name: str) -> bool:
    module = sys.modules.get(name)
    # A module another thread is still executing is in sys.modules already.
    return module is not None and not getattr(module.__spec__, "_initializing", False)


def _import(name: str) -> None:
    # A failure is not lost: `finish` imports the module again and raises it where it matters.
    with contextlib.suppress(Exception):
        importlib.import_module(name)
