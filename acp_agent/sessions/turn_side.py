"""What a session's prompts need and its answer does not: the turn runner (with the project's
knowledge and the subagents) and the slash commands.

`manager.py` imports this module in a worker thread once the first session has answered
(with the built-in tools: tens of ms of imports that `session/new` need not wait for), and
builds the parts on the event loop when the first prompt or command announcement needs them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from anyio.abc import TaskGroup

from ..config import NO_INSTRUCTIONS_ENV_VAR, AgentConfig
from ..providers.pool import ProviderPool
from ..tools import Tool
from .channel import EditorLink
from .choices import Choices
from .commands import SlashCommands
from .lifecycle import Lifecycle
from .live import LiveSessions
from .project import ProjectKnowledge
from .servers import McpServers
from .subagents import Subagents
from .turns import TurnRunner


@dataclass(frozen=True, slots=True)
class TurnSide:
    runner: TurnRunner
    commands: SlashCommands


def build_turn_side(
    config: AgentConfig,
    link: EditorLink,
    providers: ProviderPool,
    servers: McpServers,
    tools: Mapping[str, Tool[Any]],
    *,
    live: LiveSessions,
    choices: Choices,
    lifecycle: Lifecycle,
    env: Mapping[str, str],
    background: TaskGroup | None,
) -> TurnSide:
    subagents = Subagents(config, link)
    subagents.attach(lifecycle)
    runner = TurnRunner(
        config,
        link,
        providers,
        servers,
        tools,
        env=env,
        background=background,
        project=ProjectKnowledge(
            config, env, instructions_enabled=env.get(NO_INSTRUCTIONS_ENV_VAR) != "1"
        ),
        subagents=subagents,
    )
    return TurnSide(runner, SlashCommands(config, link, live, servers, choices, runner))
