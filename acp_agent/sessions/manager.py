"""Every session's life, behind one facade: the `SessionManager` the agent talks to.

It builds the parts and hands each ACP method to the one that does it:

lifecycle.py  new, load, resume, fork, close, delete, list (and the live sessions' limit)
queue.py      a prompt's place in its session's queue, its turn run there, cancels
choices.py    the model, mode and thought level
commands.py   the slash commands (a table of ours, then the MCP servers' prompts)

A turn itself is the `TurnRunner`'s (`turns.py`); each session's log is owned by its
entry in `live.py`, and the parts write to it through that entry.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from anyio.abc import TaskGroup

from ..config import NO_INSTRUCTIONS_ENV_VAR, AgentConfig
from ..providers.pool import ProviderPool
from ..providers.usage import Encoder
from ..tools import Tool, builtin_tools
from .channel import EditorLink
from .choices import MODE, MODEL, THOUGHT_LEVEL, THOUGHT_LEVELS, Choices
from .commands import PromptOutcome, SlashCommands
from .errors import ChoiceError, UnknownSession
from .lifecycle import CLOSE_SECONDS, INTERRUPTED_RESULT, Lifecycle, Where
from .live import LiveSessions
from .prepared import Prepared, PreparedMapping
from .project import ProjectKnowledge
from .queue import PromptQueue
from .servers import McpServers
from .session import Session
from .store import SessionStore
from .subagents import Subagents
from .turns import TurnRunner


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
        live = LiveSessions(config.max_live_sessions)
        self._live = live
        self._servers = McpServers(config, link, env, background, self.announce_commands)
        subagents = Subagents(config, link)
        runner = TurnRunner(
            config,
            link,
            providers,
            self._servers,
            PreparedMapping(self._tools),
            env=env,
            background=background,
            project=ProjectKnowledge(
                config, env, instructions_enabled=env.get(NO_INSTRUCTIONS_ENV_VAR) != "1"
            ),
            subagents=subagents,
        )
        self._choices = Choices(config, runner)
        self._commands = SlashCommands(config, link, live, self._servers, self._choices, runner)
        self._lifecycle = Lifecycle(
            config,
            link,
            store,
            live,
            self._servers,
            self._choices,
            self._commands.announce,
            encoder=self._encoder.get,
        )
        subagents.attach(self._lifecycle)
        self._queue = PromptQueue(
            live, self._lifecycle, self._servers, self._commands, runner, self._prepared
        )
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
        self.thought_level = self._choices.thought_level
        self.speed = self._choices.speed
        self.commands = self._commands.commands

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

    async def _prepared(self) -> None:
        """What a prompt (or slash command) waits for: the tools and the token encoder, built
        after the first session's answer (`announce_commands`)."""
        await self._tools.ready()
        await self._encoder.ready()

    async def announce_commands(self, session_id: str) -> None:
        """Tell the editor the session's commands, then what its servers did meanwhile
        (also the servers' callback: it exists before the commands do); a session's answer
        is out by then, so what its first prompt needs is built from here on."""
        await self._commands.announce_commands(session_id)
        self._tools.start(self._background)
        self._encoder.start(self._background)

    async def aclose(self) -> None:
        self._queue.cancel_all()
        await self._lifecycle.aclose()
        await self._providers.aclose()


def _no_encoder() -> None:
    return None  # token counts are estimates


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
