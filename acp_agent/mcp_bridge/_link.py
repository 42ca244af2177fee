"""One server's record in a hub: its state, what it offers, and the signals between the hub
and the task that holds its connection. No SDK here: the connection is `live` (a
`LiveServer`, made by `_connection.py`), present only while the server is ready.

Each connection attempt has a number; a report from an attempt that is no longer the
current one (it timed out and a retry started) is ignored.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import anyio

from ._live import LiveServer
from ._stderr import STDERR_LINES
from .model import McpPromptInfo, McpToolInfo, ServerState, ServerStatus
from .specs import McpServerSpec


@dataclass(eq=False)
class Link:
    spec: McpServerSpec
    state: ServerState = "connecting"
    error: str | None = None
    stderr: deque[str] = field(default_factory=lambda: deque(maxlen=STDERR_LINES))
    stderr_done: anyio.Event | None = None
    """Set when a stdio server's stderr ended (it exited): its last lines are all in."""
    live: LiveServer | None = None
    tools: tuple[McpToolInfo, ...] = ()
    prompts: tuple[McpPromptInfo, ...] = ()
    warnings: tuple[str, ...] = ()
    attempt: int = 0
    settled: anyio.Event = field(default_factory=anyio.Event)
    """Set when the current attempt connected or failed."""
    stop: anyio.Event = field(default_factory=anyio.Event)
    """Asks the current attempt's task to close the connection."""
    scope: anyio.CancelScope | None = None
    """The current attempt's task: cancelled when it overran its time."""
    wake: anyio.Event = field(default_factory=anyio.Event)
    """Tells the connection task to look at the refresh flags."""
    refresh_tools: bool = False
    refresh_prompts: bool = False
    lists_read: anyio.Event = field(default_factory=anyio.Event)
    """Set while the tool and prompt lists are as the server last announced them (no
    `list_changed` waits to be read); a call that changed them waits for it."""

    def __post_init__(self) -> None:
        self.lists_read.set()

    @property
    def name(self) -> str:
        return self.spec.name

    def begin(self) -> int:
        """Start a new attempt: returns its number."""
        self.attempt += 1
        self.state, self.error, self.live = "connecting", None, None
        self.settled, self.stop, self.scope = anyio.Event(), anyio.Event(), None
        self.stderr.clear()
        self.stderr_done = None
        return self.attempt

    def current(self, attempt: int) -> bool:
        return attempt == self.attempt and self.state != "closed"

    def ready(self, attempt: int, live: LiveServer) -> bool:
        if not self.current(attempt) or self.state != "connecting":
            return False
        self.state, self.live = "ready", live
        self.settled.set()
        return True

    def fail(self, attempt: int, reason: str) -> bool:
        """Mark the attempt failed (once); False if it was not the current one."""
        if not self.current(attempt) or self.state == "failed":
            return False
        self.state, self.error, self.live = "failed", reason, None
        self.settled.set()
        self.stop.set()
        self.wake.set()
        self.lists_read.set()
        return True

    def close(self) -> None:
        """Closed for good; an attempt still connecting is abandoned (its task cancelled:
        the transport's exit ends a stdio server)."""
        if self.state == "connecting" and self.scope is not None:
            self.scope.cancel()
        self.state, self.live = "closed", None
        self.stop.set()
        self.settled.set()
        self.wake.set()
        self.lists_read.set()

    def poke(self, *, tools: bool = False, prompts: bool = False) -> None:
        self.refresh_tools = self.refresh_tools or tools
        self.refresh_prompts = self.refresh_prompts or prompts
        if self.lists_read.is_set():
            self.lists_read = anyio.Event()
        self.wake.set()

    def lists_refreshed(self) -> None:
        """The lists were read again; set `lists_read` unless another change came meanwhile."""
        if not (self.refresh_tools or self.refresh_prompts):
            self.lists_read.set()

    def status(self) -> ServerStatus:
        ready = self.state == "ready"
        return ServerStatus(
            name=self.name,
            transport=self.spec.transport,
            where=self.spec.describe(),
            state=self.state,
            error=self.error,
            stderr=tuple(self.stderr),
            tools=tuple(tool.qualified_name for tool in self.tools) if ready else (),
            prompts=tuple(prompt.command for prompt in self.prompts) if ready else (),
            warnings=self.warnings,
        )
