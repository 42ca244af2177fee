"""Slash commands: what the user may type as `/name argument` instead of a prompt.

Ours are one table (`Command`: name, description, argument hint, handler), from which
the editor's command list (`available_commands_update`) and `/help` are built; the
session's MCP servers add their prompts after ours. A command of ours is no model call
(but `/compact`, which runs in the session's queue); it is logged as the user typed it,
and answered with a reply of ours, so a loaded session shows both again. An MCP prompt
is a turn, in its place in the queue from the start.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..config import AgentConfig
from ..knowledge.prompt_files import PromptFile, expand
from ..messages import (
    CommandInfo,
    CommandsChanged,
    Message,
    MessageChunk,
    TextPart,
    TurnStopReason,
    UserMessageChunk,
)
from ..tools.permissions import MODES
from .channel import EditorLink
from .choices import MODE, MODEL, THOUGHT_LEVEL, THOUGHT_LEVELS, Choices
from .errors import ChoiceError
from .live import Live, LiveSessions
from .outcomes import PromptOutcome
from .project import describe_context, describe_skills
from .records import EventRecord
from .servers import McpError, McpServers, PromptUsageError
from .session import QueuePlace, Session
from .turns import TurnRunner

if TYPE_CHECKING:
    # The plain data of MCP prompts loads with the first server (it is ~15 classes).
    from ..mcp_bridge import McpPromptInfo

log = logging.getLogger(__name__)


Handler = Callable[[Live, str, QueuePlace], Awaitable[PromptOutcome]]
"""Runs a command: the session, the argument typed, the prompt's place in the queue."""


@dataclass(frozen=True, slots=True)
class Command:
    name: str
    description: str
    hint: str | None
    run: Handler

    @property
    def info(self) -> CommandInfo:
        return CommandInfo(self.name, self.description, self.hint)


@dataclass(eq=False)
class SlashCommands:
    """Every session's slash commands: ours, then its MCP servers' prompts."""

    config: AgentConfig
    link: EditorLink
    live: LiveSessions
    servers: McpServers
    choices: Choices
    """What `/model` and `/mode` switch."""
    runner: TurnRunner
    """Runs `/compact` and the turns of MCP prompts."""
    _ours: dict[str, Command] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._ours = {
            command.name: command
            for command in (
                Command(
                    "model",
                    "Switch the model (no argument: list the models)",
                    "provider/model",
                    self._model,
                ),
                Command(
                    "mode",
                    "Switch what the agent may do without asking (no argument: list the modes)",
                    " | ".join(mode.id for mode in MODES),
                    self._mode,
                ),
                Command(
                    "think",
                    "Set how much the model thinks before it answers (no argument: list the "
                    "levels)",
                    " | ".join(THOUGHT_LEVELS),
                    self._think,
                ),
                Command("mcp", "Show the MCP servers, their state and tools", None, self._mcp),
                Command(
                    "jobs",
                    "List the background jobs: state, age, output size and command",
                    None,
                    self._jobs,
                ),
                Command(
                    "context",
                    "Show what the model is given: instructions, skills, prompt files, tokens",
                    None,
                    self._context,
                ),
                Command("skills", "List the Agent Skills the model may use", None, self._skills),
                Command(
                    "compact",
                    "Summarise the older turns to free context (optionally: what to keep in focus)",
                    "focus (optional)",
                    self._compact,
                ),
                Command("help", "List the commands", None, self._help),
            )
        }

    def commands(self, session_id: str) -> tuple[CommandInfo, ...]:
        """What the user may type as `/name argument`: ours, the prompt files', then the MCP
        servers' prompts."""
        files = tuple(
            CommandInfo(f.name, f.description, f.argument_hint)
            for f in self._prompt_files(session_id)
        )
        prompts = tuple(
            CommandInfo(
                info.command,
                info.description or info.title or f"MCP prompt {info.name} of {info.server}",
                " ".join(a.name for a in info.arguments) or None,
            )
            for info in self.servers.prompts(session_id)
        )
        return tuple(command.info for command in self._ours.values()) + files + prompts

    def _prompt_files(self, session_id: str) -> tuple[PromptFile, ...]:
        """The session's prompt files whose names are not ours (ours win, with a warning)."""
        entry = self.live.get(session_id)
        if entry is None:
            return ()
        found = self.runner.project.prompt_files(entry.session).commands
        for hidden in (f for f in found if f.name in self._ours):
            log.warning("prompt file %s: /%s is a command of ours", hidden.path, hidden.name)
        return tuple(f for f in found if f.name not in self._ours)

    async def announce_commands(self, session_id: str) -> None:
        """Tell the editor the session's commands (once it knows the session, and when the
        servers' prompts change), then what its servers did meanwhile."""
        entry = self.live.get(session_id)
        if entry is not None:
            await self.announce(entry.session)

    async def announce(self, session: Session) -> None:
        commands = self.commands(session.id)
        channel = self.link.channel(session.id)
        if commands != session.commands_shown:
            session.commands_shown = commands
            await channel.emit(CommandsChanged(commands))
        notices, session.pending_notices = session.pending_notices, []
        for notice in notices:
            await channel.emit(notice)
        await self.servers.announce(session.id)

    async def run(
        self, entry: Live, name: str, argument: str, place: QueuePlace
    ) -> PromptOutcome | None:
        """Run a slash command; None when `name` is none of ours (the text goes to the model)."""
        command = self._ours.get(name)
        if command is not None:
            # Not for the model, but shown again when the session is loaded.
            typed = TextPart(f"/{name} {argument}".rstrip())
            entry.writer.append(EventRecord(UserMessageChunk(typed, _new_id())))
            return await command.run(entry, argument, place)
        session = entry.session
        prompt_file = next((f for f in self._prompt_files(session.id) if f.name == name), None)
        if prompt_file is not None:
            text = expand(prompt_file, argument)
            return PromptOutcome(
                await session.run_turn(
                    lambda: self.runner.run(
                        session, entry.writer, Message("user", [TextPart(text)])
                    ),
                    place,
                )
            )
        prompt = next((p for p in self.servers.prompts(session.id) if p.command == name), None)
        if prompt is None:
            return None
        # In its place in the queue from the start: a later prompt or a cancel read after
        # it cannot overtake it while its messages are fetched.
        return PromptOutcome(
            await session.run_turn(lambda: self._prompt_turn(entry, prompt, argument), place)
        )

    # --- ours ----------------------------------------------------------------------------

    async def _model(self, entry: Live, argument: str, place: QueuePlace) -> PromptOutcome:
        """`/model` lists the models, `/model provider/model` switches; no model call. An
        unknown model is answered with the list, as a reply: the prompt did not fail."""
        listed = _marked(
            (choice, choice == entry.session.model_choice)
            for choice, _, _ in self.config.model_choices()
        )
        listing = f"Models:\n{listed}\n\nSwitch with /model provider/model."
        return await self._switch(
            entry, MODEL, argument, listing, lambda: f"Model set to {argument}."
        )

    async def _mode(self, entry: Live, argument: str, place: QueuePlace) -> PromptOutcome:
        """`/mode` lists the modes, `/mode id` switches (from the next tool call, also in a
        running turn); an unknown mode is answered with the list."""
        session = entry.session
        listed = _marked(
            (f"{mode.id}: {mode.description}", mode.id == session.mode) for mode in MODES
        )
        listing = f"Modes:\n{listed}\n\nSwitch with /mode id."

        def confirmation() -> str:
            name = next(mode.name for mode in MODES if mode.id == session.mode)
            return f"Mode set to {name} ({session.mode})."

        return await self._switch(entry, MODE, argument, listing, confirmation)

    async def _switch(
        self, entry: Live, option: str, value: str, listing: str, confirmation: Callable[[], str]
    ) -> PromptOutcome:
        """Set the session's `option` to the `value` typed and reply `confirmation()`. Without
        a value, or for one not offered, the user is answered with `listing` (a reply: the
        prompt did not fail)."""
        if not value:
            return await self._reply(entry, listing)
        try:
            self.choices.choose(entry, option, value)
        except ChoiceError:
            return await self._reply(
                entry, f"There is no {option.replace('_', ' ')} {value!r}.\n\n{listing}"
            )
        await self._reply(entry, confirmation())
        return PromptOutcome("end_turn", choices_changed=True, mode_changed=option == MODE)

    async def _think(self, entry: Live, argument: str, place: QueuePlace) -> PromptOutcome:
        """`/think` lists the thought levels, `/think level` sets it (from the next model
        request): for clients with no config-option picker (Toad)."""
        session = entry.session
        current = self.choices.thought_level(session)
        if current is None:
            return await self._reply(
                entry, f"{session.model_choice} does not reason: it has no thought levels."
            )
        listed = _marked((level, level == current) for level in THOUGHT_LEVELS)
        listing = f"Thought levels:\n{listed}\n\nSet one with /think level."
        return await self._switch(
            entry, THOUGHT_LEVEL, argument, listing, lambda: f"Thought level set to {argument}."
        )

    async def _mcp(self, entry: Live, argument: str, place: QueuePlace) -> PromptOutcome:
        return await self._reply(entry, self.servers.describe(entry.session.id))

    async def _jobs(self, entry: Live, argument: str, place: QueuePlace) -> PromptOutcome:
        return await self._reply(entry, entry.session.tool_state.jobs.describe())

    async def _compact(self, entry: Live, focus: str, place: QueuePlace) -> PromptOutcome:
        """`/compact [focus]`, in the session's queue: the older turns summarised now."""

        async def compact() -> TurnStopReason:
            if not await self.runner.compact(entry.session, entry.writer, focus):
                await self._reply(entry, "Nothing to compact: no turns since the last summary.")
            return "end_turn"

        return PromptOutcome(await entry.session.run_turn(compact, place))

    async def _help(self, entry: Live, argument: str, place: QueuePlace) -> PromptOutcome:
        lines = [
            f"- /{c.name}{f' {_usage(c.hint)}' if c.hint else ''}: {c.description}"
            for c in self.commands(entry.session.id)
        ]
        shadowed = self.runner.project.prompt_files(entry.session).shadowed
        lines += [
            f"- /{f.name} from {f.path}: hidden by the project's command of that name"
            for f in shadowed
        ]
        return await self._reply(entry, "Commands:\n" + "\n".join(lines))

    async def _context(self, entry: Live, argument: str, place: QueuePlace) -> PromptOutcome:
        session = entry.session
        setup = await self.runner.model_setup(session)  # builds this request's system prompt
        offered = self.runner.offered_tools(session)
        count = session.usage.counter.count_text
        tools_tokens = count(json.dumps([tool.spec().parameters for tool in offered.values()]))
        report = describe_context(
            self.runner.project.view(session),
            system_tokens=count(setup.settings.system_prompt),
            tools=len(offered),
            tools_tokens=tools_tokens,
            budget=self.config.instructions.budget,
        )
        return await self._reply(entry, report)

    async def _skills(self, entry: Live, argument: str, place: QueuePlace) -> PromptOutcome:
        catalog = self.runner.project.skills(entry.session)
        return await self._reply(entry, describe_skills(catalog))

    # --- MCP prompts ---------------------------------------------------------------------

    async def _prompt_turn(
        self, entry: Live, prompt: McpPromptInfo, argument: str
    ) -> TurnStopReason:
        """An MCP prompt, in its place in the queue: its messages are fetched when its turn
        comes; the last user message is the prompt, what comes before it joins the history
        first."""
        session = entry.session
        try:
            messages = await self.servers.prompt_messages(session.id, prompt, argument)
        except (PromptUsageError, McpError) as exc:
            await self._reply(entry, f"/{prompt.command}: {exc}")
            return "end_turn"
        *earlier, last = messages or (Message("user", [TextPart("(the prompt was empty)")]),)
        if last.role != "user":
            earlier, last = [*earlier, last], Message("user", [TextPart("Go on.")])
        for message in earlier:
            entry.keep(message)
        return await self.runner.run(session, entry.writer, last)

    async def _reply(self, entry: Live, text: str) -> PromptOutcome:
        """An answer of ours (not the model's), kept for the session's replay."""
        reply = MessageChunk(text, _new_id())
        entry.writer.append(EventRecord(reply))
        await self.link.channel(entry.session.id).emit(reply)
        return PromptOutcome("end_turn")


def _marked(rows: Iterable[tuple[str, bool]]) -> str:
    """A bulleted list of what may be chosen, the current one marked."""
    return "\n".join(f"- {row}{'  (current)' if current else ''}" for row, current in rows)


def slash_command(message: Message) -> tuple[str, str] | None:
    """(name, argument) of a prompt that is one `/name argument` line of text; None for any
    other prompt."""
    text = message.text.strip()
    if len(message.parts) != 1 or not text.startswith("/") or "\n" in text:
        return None
    name, _, argument = text[1:].partition(" ")
    return (name, argument.strip()) if name else None


def _usage(hint: str) -> str:
    """An argument hint as `/help` shows it after the name: `focus (optional)`, which the
    editor shows in the input box, becomes `[focus]`."""
    optional = hint.removesuffix(" (optional)")
    return f"[{optional}]" if optional != hint else hint


def _new_id() -> str:
    return uuid.uuid4().hex
