"""Every session's life, behind one facade: the `SessionManager` the agent talks to.

It builds the parts and hands each ACP method to the one that does it:

lifecycle.py  new, load, resume, fork, close, delete, list (and the live sessions' limit)
queue.py      a prompt's place in its session's queue, its turn run there, cancels
choices.py    the model, mode and thought level
commands.py   the slash commands (a table of ours, then the MCP servers' prompts)

A turn itself is the `TurnRunner`'s (`turns.py`); it and the slash commands are the turn
side (`turn_side.py`), built after the first session's answer, for its first prompt. Each
session's log is owned by its entry in `live.py`, and the parts write to it through that
entry.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from anyio.abc import TaskGroup

from ..config import AgentConfig
from ..providers.pool import ProviderPool
from ..providers.usage import Encoder
from ..tools import Tool, builtin_tools
from .channel import EditorLink
from .choices import MODE, MODEL, THOUGHT_LEVEL, THOUGHT_LEVELS, Choices
from .errors import ChoiceError, UnknownSession
from .lifecycle import CLOSE_SECONDS, INTERRUPTED_RESULT, Lifecycle, Where
from .live import LiveSessions
from .outcomes import PromptOutcome
from .prepared import Prepared, PreparedMapping
from .queue import PromptQueue
from .servers import McpServers
from .session import Session
from .store import SessionStore

if TYPE_CHECKING:
    from .turn_side import TurnSide


class SessionManager:
    """One facade over the parts, so the agent (and `cli.py`, which builds it) holds one
    object and each part stays out of the others' way; most methods are a part's own."""

    def __init__(
        self,
        config: AgentConfig,
        link: EditorLink,
        providers: ProviderPool,
        store: SessionStore,
        *,
        env: Mapping[str, str],
        load_encoder: Callable[[], Encoder | None] | None = None,
        background: TaskGroup | None = None,
        tools: Mapping[str, Tool[Any]] | None = None,
    ) -> None:
        """`load_encoder`: gives the tokenizer that counts tokens (none: estimates)."""
        self._providers = providers
        self._background = background
        # Built after the first session's answer, for its first prompt (`prepared.py`).
        self._tools: Prepared[Mapping[str, Tool[Any]]] = (
            Prepared.of(dict(tools))
            if tools is not None
            # ask_user only where the editor can show its form.
            else Prepared(
                functools.partial(builtin_tools, ask_user="form" in link.elicitation_modes)
            )
        )
        self._encoder = Prepared(load_encoder or _no_encoder)
        # The turn runner and the slash commands: their modules import in a worker thread
        # after the first session's answer too, and they are built on the loop when the
        # first prompt (or the commands' announcement) needs them (`_turn_side`).
        self._turn_modules = Prepared(_import_turn_side)
        self._side: TurnSide | None = None
        self._config, self._link, self._env = config, link, env
        live = LiveSessions(config.max_live_sessions)
        self._live = live
        self._servers = McpServers(config, link, env, background, self.announce_commands)
        self._choices = Choices(config, providers)
        self._lifecycle = Lifecycle(
            config,
            link,
            store,
            live,
            self._servers,
            self._choices,
            self._announce,
            encoder=self._encoder.get,
        )
        self._queue = PromptQueue(live, self._lifecycle, self._servers, self._prepared_turn_side)
        # The methods that are one part's, as they are.
        self.new = self._lifecycle.new
        self.fork = self._lifecycle.fork
        # A load is a resume that shows the user the conversation first.
        self.load = functools.partial(self._lifecycle.reopen, replay_history=True)
        self.resume = functools.partial(self._lifecycle.reopen, replay_history=False)
        self.summaries = self._lifecycle.summaries
        self.set_title = self._lifecycle.set_title
        self.archive = self._lifecycle.archive
        self.unarchive = self._lifecycle.unarchive
        self.status = self._lifecycle.status
        self.close = self._lifecycle.close
        self.delete = self._lifecycle.delete
        self.queue_prompt = self._queue.take_place
        # `inserted`: see `turns.Inserted` (not called for a slash command). A `place`
        # handed in is the caller's to release once the prompt has ended.
        self.prompt = self._queue.prompt
        self.cancel = self._queue.cancel
        self.cancel_all = self._queue.cancel_all
        self.settled = self._servers.settled
        self.thought_level = self._choices.thought_level
        self.speed = self._choices.speed

    def get(self, session_id: str) -> Session:
        """The live session (one let go is not live: `UnknownSession`)."""
        return self._lifecycle.get(session_id).session

    @property
    def providers(self) -> ProviderPool:
        return self._providers

    def live_sessions(self) -> list[Session]:
        """The sessions open now (not the parked ones: they are opened again from the store,
        and choose their model then)."""
        return [entry.session for entry in self._live]

    async def choose(self, session_id: str, option: str, value: str) -> Session:
        """Set one of the session's choices; it applies from the next model request (model,
        thought level) or tool call (mode), also in a running turn."""
        entry = await self._lifecycle.use(session_id)
        self._choices.choose(entry, option, value)
        return entry.session

    async def _prepared_turn_side(self) -> TurnSide:
        """What a prompt (or slash command) waits for: the tools, the token encoder and the
        turn side, prepared after the first session's answer (`announce_commands`)."""
        await self._tools.ready()
        await self._encoder.ready()
        return await self._turn_side()

    async def _turn_side(self) -> TurnSide:
        await self._turn_modules.ready()
        if self._side is None:
            from .turn_side import build_turn_side  # imported by `_turn_modules` already

            self._side = build_turn_side(
                self._config,
                self._link,
                self._providers,
                self._servers,
                PreparedMapping(self._tools),
                live=self._live,
                choices=self._choices,
                lifecycle=self._lifecycle,
                env=self._env,
                background=self._background,
            )
        return self._side

    async def _announce(self, session: Session) -> None:
        await (await self._turn_side()).commands.announce(session)

    async def announce_commands(self, session_id: str) -> None:
        """Tell the editor the session's commands, then what its servers did meanwhile
        (also the servers' callback: it exists before the commands do); a session's answer
        is out by then, so what its first prompt needs is prepared from here on."""
        self._tools.start(self._background)
        self._encoder.start(self._background)
        self._turn_modules.start(self._background)
        await (await self._turn_side()).commands.announce_commands(session_id)

    async def aclose(self) -> None:
        self._queue.cancel_all()
        await self._lifecycle.aclose()
        await self._providers.aclose()


def _no_encoder() -> None:
    return None  # token counts are estimates


def _import_turn_side() -> None:
    importlib.import_module(".turn_side", __package__)


__all__ = [
    "CLOSE_SECONDS",
    "INTERRUPTED_RESULT",
    "MODE",
    "MODEL",
    "THOUGHT_LEVEL",
    "THOUGHT_LEVELS",
    "ChoiceError",
    "PromptOutcome",
    "SessionManager",
    "UnknownSession",
    "Where",
]
