"""What a session knows of its project, and the system prompt made of it.

Before every model request the instruction files are looked at again (a `stat` each: an
edit to `AGENTS.md` between turns is in the next request); at the start of every turn the
skills and prompt files are found again (a new skill is offered, a new prompt file becomes
a slash command). The `knowledge` room finds and reads them; this module keeps one
session's view and assembles the prompt in the order the issue of record fixed: our
default prompt (or the editor's `override`, or the config's `system_prompt`), the project's
instructions, the skills, then the editor's `append`.
"""

from __future__ import annotations

import datetime
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio.to_thread

from ..config import AgentConfig, ModelConfig, ProviderConfig
from ..knowledge.instructions import (
    InstructionFile,
    InstructionReader,
    InstructionSettings,
    project_root,
    render_instructions,
)
from ..knowledge.prompt_files import PromptFiles, discover_prompt_files, files_stamp
from ..knowledge.skills import SkillCatalog, discover_skills, render_skills, requested_skills
from ..knowledge.system_prompt import (
    PromptParts,
    assemble,
    default_prompt,
    environment,
    family_of,
)
from ..messages import Message, Notice, Part, TextPart
from ..paths import user_config_path
from .session import Session

log = logging.getLogger(__name__)

SKILLS_SHARE = 0.02
"""Of the model's context window, what the list of skills may take in the system prompt."""


@dataclass(frozen=True, slots=True)
class Loaded:
    """What one request's system prompt was made of (for `/context` and the first notice)."""

    instructions: tuple[InstructionFile, ...]
    skills: SkillCatalog
    prompt_files: PromptFiles
    system_prompt: str


@dataclass(eq=False)
class ProjectView:
    """One session's instruction reader, skills and prompt files."""

    reader: InstructionReader
    skills: SkillCatalog | None = None
    prompt_files: PromptFiles | None = None
    last: Loaded | None = None
    announced: bool = False
    """The session's first turn said what was loaded."""


@dataclass(eq=False)
class ProjectKnowledge:
    """Every session's view of its project, from the config and the agent's environment;
    each session holds its own view (`Session.project`), so it goes with the session."""

    config: AgentConfig
    env: Mapping[str, str]
    instructions_enabled: bool = True
    """False: no instruction files at all (`acp-agent run --no-project-instructions`)."""

    @property
    def user_dir(self) -> Path:
        """Our config directory: the user's AGENTS.md, skills/ and commands/ live there."""
        return user_config_path(self.env).parent

    def view(self, session: Session) -> ProjectView:
        if session.project is None:
            settings = self.config.instructions
            reader = InstructionReader(
                InstructionSettings(
                    enabled=settings.enabled and self.instructions_enabled,
                    budget_bytes=settings.budget,
                    extra_names=tuple(settings.extra_files),
                ),
                self.user_dir,
            )
            session.project = ProjectView(reader)
        return session.project

    def refresh(self, session: Session) -> bool:
        """Find the skills and prompt files again (a prompt arrives); True when the prompt
        files changed (the editor's command list is then announced again)."""
        view = self.view(session)
        root = project_root(session.cwd)
        home = Path(self.env.get("HOME") or Path.home())
        view.skills = discover_skills(session.cwd, root, home=home, user_config_dir=self.user_dir)
        for warning in view.skills.warnings:
            log.warning("%s", warning)
        stamp = files_stamp(session.cwd, root, user_config_dir=self.user_dir)
        if view.prompt_files is not None and view.prompt_files.stamp == stamp:
            return False
        view.prompt_files = discover_prompt_files(session.cwd, root, user_config_dir=self.user_dir)
        for warning in view.prompt_files.warnings:
            log.warning("%s", warning)
        return True

    def prompt_files(self, session: Session) -> PromptFiles:
        return self._found(session)[1]

    def skills(self, session: Session) -> SkillCatalog:
        return self._found(session)[0]

    def _found(self, session: Session) -> tuple[SkillCatalog, PromptFiles]:
        """The skills and prompt files found last; found now when they never were."""
        view = self.view(session)
        if view.skills is None or view.prompt_files is None:
            self.refresh(session)
        assert view.skills is not None and view.prompt_files is not None
        return view.skills, view.prompt_files

    def system_prompt(
        self,
        session: Session,
        tools: Sequence[str],
        provider: ProviderConfig,
        model: ModelConfig,
        count_tokens: Callable[[str], int],
    ) -> str:
        """The system prompt of one model request (instruction files read anew if changed)."""
        view = self.view(session)
        skills = self.skills(session)
        files = tuple(view.reader.read(session.cwd, session.additional_roots))
        editor = session.editor_prompt
        override = editor.text if editor is not None and editor.mode == "override" else None
        parts = PromptParts(
            base=override or self._base(session, tools, provider, model),
            instructions=render_instructions(files),
            skills=render_skills(skills, int(model.context_window * SKILLS_SHARE), count_tokens),
            appended=editor.text if editor is not None and editor.mode == "append" else "",
        )
        prompt = assemble(parts)
        view.last = Loaded(files, skills, self.prompt_files(session), prompt)
        return prompt

    def first_notice(self, session: Session) -> Notice | None:
        """Once per session, after its first system prompt was built: what it was given of
        its project (None when nothing)."""
        view = self.view(session)
        loaded = view.last
        if view.announced or loaded is None:
            return None
        view.announced = True
        files = [f for f in loaded.instructions if f.text]
        skills = loaded.skills.skills
        if not files and not skills:
            return None
        counts = [_count(len(files), "instruction file"), _count(len(skills), "skill")]
        named = ", ".join(_short(f.path) for f in files)
        return Notice(
            "Project context: " + " and ".join(c for c in counts if c),
            f"{named}; /context shows what the model is given" if named else "/context shows them",
        )

    async def with_requested_skills(self, session: Session, message: Message) -> Message:
        """The prompt with the body of each skill it names (`$name`, `/skill:name`): the user
        asked for it, so the model need not read it first."""
        requested = requested_skills(message.text, self.skills(session))
        if not requested:
            return message
        parts: list[Part] = list(message.parts)
        for skill in requested:
            try:
                body = await anyio.to_thread.run_sync(_skill_body, skill.path)
            except OSError as exc:
                log.warning("skill %s: %s cannot be read: %s", skill.name, skill.path, exc)
                continue
            parts.append(
                TextPart(f"[Skill {skill.name} ({skill.path}), asked for by the user:]\n{body}")
            )
        return Message(message.role, parts)

    def _base(
        self, session: Session, tools: Sequence[str], provider: ProviderConfig, model: ModelConfig
    ) -> str:
        today = datetime.date.today()
        if self.config.system_prompt is not None:
            return self.config.system_prompt.format(cwd=session.cwd, today=today)
        return default_prompt(
            environment(session.cwd, session.additional_roots, self.env, today=today),
            tools,
            session.mode,
            family=family_of(provider.type, model.id),
            adjustment=model.prompt_adjustment,
        )


SKILL_BODY_LIMIT = 256 * 1024
"""Bytes of a SKILL.md put into a prompt that asks for it (a longer one is cut, and says so)."""


def _skill_body(path: Path) -> str:
    with path.open("rb") as file:
        data = file.read(SKILL_BODY_LIMIT + 1)
    text = data[:SKILL_BODY_LIMIT].decode("utf-8", errors="replace")
    if len(data) > SKILL_BODY_LIMIT:
        text += f"\n[cut at {SKILL_BODY_LIMIT:,} bytes: read {path} for the rest]"
    return text


def _count(n: int, noun: str) -> str:
    return "" if n == 0 else f"{n} {noun}{'' if n == 1 else 's'}"


def _short(path: Path) -> str:
    """The path with the home directory as `~`."""
    home = os.path.expanduser("~")
    text = str(path)
    return "~" + text[len(home) :] if home != "/" and text.startswith(home + os.sep) else text


def describe_context(
    view: ProjectView, *, system_tokens: int, tools: int, tools_tokens: int, budget: int
) -> str:
    """`/context`: what the last model request's system prompt was made of, and its cost."""
    loaded = view.last
    lines = [
        f"System prompt: {system_tokens:,} tokens. Tools: {tools} offered, "
        f"{tools_tokens:,} tokens of definitions."
    ]
    if loaded is None:
        return lines[0]
    files = loaded.instructions
    used = sum(len(f.text.encode()) for f in files)
    lines.append(
        f"\nInstruction files ({len(files)}, {_size(used)} of {_size(budget)}):"
        if files
        else "\nInstruction files: none (AGENTS.md, CLAUDE.md or GEMINI.md from the project "
        "root down to the working directory, and in the config directory)."
    )
    for file in files:
        state = "" if not file.cut else (", cut to fit" if file.text else ", left out: over budget")
        lines.append(f"- {file.path} ({_size(file.size)}{state})")
    skills = loaded.skills.skills
    lines.append(f"\nSkills ({len(skills)}):" if skills else "\nSkills: none.")
    lines += [f"- {skill.name}: {skill.path}" for skill in skills]
    commands = loaded.prompt_files.commands
    lines.append(f"\nPrompt files ({len(commands)}):" if commands else "\nPrompt files: none.")
    lines += [f"- /{command.name}: {command.path}" for command in commands]
    return "\n".join(lines)


def describe_skills(catalog: SkillCatalog) -> str:
    """`/skills`: every skill in effect, then those a nearer one of the same name hides."""
    if not catalog.skills:
        return (
            "No skills. A skill is a folder with a SKILL.md (front matter: name, description) in "
            ".agents/skills/ or .claude/skills/ of the project, or in ~/.agents/skills/."
        )
    lines = ["Skills (ask for one with $name or /skill:name):"]
    lines += [f"- {s.name}: {s.description}\n  {s.path}" for s in catalog.skills]
    if catalog.shadowed:
        lines.append("\nHidden by a nearer skill of the same name:")
        lines += [f"- {s.name}: {s.path}" for s in catalog.shadowed]
    return "\n".join(lines)


def _size(size: int) -> str:
    return f"{size} B" if size < 1024 else f"{size / 1024:.1f} KiB"
