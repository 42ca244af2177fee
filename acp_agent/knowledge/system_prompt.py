"""The built-in system prompt, the environment it describes, and the order in which the
parts of the final system prompt are put together.

Rules the prompt keeps:

- It names only the tools that are offered. The caller passes the tool names the model
  actually gets (MCP tools included, after the permission mode dropped what it drops);
  each built-in tool offered gets its line of guidance, in `TOOL_GUIDANCE` order, and any
  other tool one shared line. General advice names no tool, so it holds whatever is offered.
- It says what the session's permission mode means for the model (the ids are those of
  `acp_agent.tools.permissions.MODES`; a test keeps the two in step), and that a refused call
  is not retried as it was.
- It ends with the environment: OS, the user's shell, working directory, other roots, git
  branch, today's date. The prompt changes with the mode and the day: the caller rebuilds it
  when either changes.
- Model families get a short section of their own (`FAMILY_ADJUSTMENTS`); a per-model
  `adjustment` from the config replaces it, and an empty one removes it.
- With every tool offered, the prompt stays under 2,000 tokens (o200k_base), in each mode and
  for each family: a test counts.

`environment()` runs no subprocess: it finds `.git` upward from the working directory (a
directory, or a `gitdir:` file as in worktrees and submodules) and reads the branch from the
HEAD file, as git does. A `.git` that is found always makes a repository; when its HEAD
cannot be read (unreadable, too big, not UTF-8, garbage, a symlink loop) the branch is
unknown and a warning is logged. Nothing here raises on a bad file.
"""

from __future__ import annotations

import errno
import logging
import os
import platform
import re
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Literal, TypeAlias

log = logging.getLogger(__name__)

ModelFamily: TypeAlias = Literal["anthropic", "openai", "other"]

DEFAULT_SHELL = "/bin/sh"
MAX_GIT_FILE_BYTES = 4096
"""A HEAD or `.git` file is one short line; anything longer is not one."""
MAX_BRANCH_CHARS = 200

# --- the prompt text -----------------------------------------------------------------------

PROMPT_TEMPLATE = """\
You are a coding agent working in the user's editor. You help with software engineering: \
answering questions about code, fixing bugs, adding features, refactoring, reviewing. You act \
through tools; the user sees every call you make and its result.

# How to work
- Understand before you change: find the relevant code and read it. Never guess file names, \
APIs or behaviour you can check.
- Follow the project's conventions (style, structure, libraries) and its instructions \
(`AGENTS.md` and the like, given after this prompt when present). Use a library only after \
checking that the project already depends on it.
- Make small, focused changes and verify each one. Leave code the task does not need alone: \
no drive-by reformatting or renaming.
- When the project has tests, type checks or linters (see its README, Makefile, package or CI \
files), run the relevant ones after a change and fix what you broke. If you cannot run them, \
say which commands should be run.
- Never claim a result you did not see. When a command fails or a file is not what you \
expected, say so and adapt.
- Do not commit, push, publish or delete work unless the user asked for it. Never print or \
copy secrets (keys, tokens, `.env` values).
- If the request is ambiguous in a way that matters, ask; otherwise choose sensibly and say \
what you chose.

# Tools
{tools}

# Permission mode: {mode_name}
{mode_meaning}
Never retry a tool call that was refused (by the mode or by the user) as it was: change your \
approach, or ask the user how to go on.

# Reporting
- Be direct and brief; the reader is a developer. Use Markdown; cite code as `path:line`.
- Answer a question with an answer, not with changes.
- When you finish a task, say what you changed and why, how you verified it (or that you \
could not), and what is left open or risky. Do not repeat whole files back.

# Environment
{environment}
"""

TOOL_GUIDANCE: Mapping[str, str] = {
    "read_file": (
        "`read_file` reads a file as the editor has it (unsaved changes included), with line "
        "numbers; page through long files with `line` and `limit`. Read a file before you "
        "edit it, with enough context around the change."
    ),
    "search": (
        "`search` finds files by name (`glob`) and lines by regular expression (`grep`), "
        "skipping ignored files. Search instead of guessing where something is defined or "
        "used; narrow the pattern or path when results are capped."
    ),
    "edit_file": (
        "`edit_file` replaces exact text: `old_text` must match the file once, whitespace "
        "included (add surrounding lines to make it unique); pass `edits` for several changes "
        "to one file. Prefer it to rewriting a whole file. If the text no longer matches, "
        "read the file again: the user may be editing it too."
    ),
    "write_file": (
        "`write_file` creates a file or replaces all of its content. Read an existing file "
        "before you overwrite it."
    ),
    "shell": (
        "`shell` runs a command line with `bash -c` and returns its output and exit code: "
        "use it for builds, tests, linters, git and other programs, not to read, find or "
        "change files when another tool does that. Each call starts a fresh shell (use `cwd` "
        "rather than `cd`). Commands get no input: never start interactive programs, and pass "
        "non-interactive flags. Start servers, watchers and other commands that run on with "
        "`background: true`: they become jobs. Raise `timeout_seconds` for slow builds."
    ),
    "job_output": (
        "`job_output` reads a background job's output since your last read and, once it has "
        "ended, its exit status; pass `wait_seconds` to wait for more instead of calling again "
        "at once. You are told when a job you started ends."
    ),
    "job_kill": (
        "`job_kill` stops a background job and every process it started; stop the jobs you "
        "no longer need."
    ),
    "plan": (
        "`plan` shows your to-do list in the editor. For work of three steps or more, write "
        "the plan first; send the whole list on each update, keep one step in_progress, and "
        "mark each step completed as soon as it is done. Skip it for simple tasks."
    ),
    "agent": (
        "`agent` hands a self-contained task (research across many files, an independent "
        "change, a review) to a subagent that starts fresh: put everything it needs in "
        "`prompt`, and check what it reports. Several calls in one reply run at once."
    ),
    "web_fetch": (
        "`web_fetch` reads a web page or file (http/https) as Markdown or text: documentation, "
        "issues, API references the task needs. When a page is cut, read on with `offset`. "
        "It runs no JavaScript and cannot log in."
    ),
    "ask_user": (
        "`ask_user` puts a question to the user as a form. Use it only when you cannot go on "
        "without their decision or knowledge, and ask everything you need at once."
    ),
}
"""What each built-in tool is for and how to use it well, in the order the model sees them."""

OTHER_TOOLS_GUIDANCE = (
    "Other tools come from the user's MCP servers: use them as their descriptions say."
)


@dataclass(frozen=True, slots=True)
class ModeGuidance:
    name: str
    meaning: str


MODE_GUIDANCE: Mapping[str, ModeGuidance] = {
    "ask": ModeGuidance(
        "Ask",
        "File changes and commands wait for the user's approval; reads and searches run at "
        "once. Anything outside the workspace roots asks first, reads included. Make each "
        "call one the user can judge at a glance.",
    ),
    "accept-edits": ModeGuidance(
        "Accept edits",
        "File changes inside the workspace roots run without asking; commands, and anything "
        "outside the roots, wait for the user's approval. The user reviews your edits "
        "afterwards: keep them focused.",
    ),
    "bypass": ModeGuidance(
        "Bypass permissions",
        "Nothing asks: edits and commands run at once, outside the workspace too. That trust "
        "makes you responsible: nothing destructive (deleting files, `git reset --hard`, "
        "force-pushing, dropping data) unless the user asked for exactly that.",
    ),
    "read-only": ModeGuidance(
        "Read only",
        "You cannot change files or run commands here: only read and search. Investigate and "
        "answer; for a change, say exactly what you would do (which files, which edits, which "
        "commands), so the user can apply it or switch modes. Reads outside the workspace "
        "roots ask first.",
    ),
}
"""What each permission mode (`acp_agent.tools.permissions.MODES`) means for the model."""

UNKNOWN_MODE_MEANING = "Some tool calls may wait for the user's approval, or be refused."

FAMILY_ADJUSTMENTS: Mapping[ModelFamily, str] = {
    "anthropic": (
        "- Act rather than apologise or ask for confirmation you do not need.\n"
        "- Make independent calls (several reads or searches) in parallel.\n"
        "- Do only what was asked: no extra features, files or abstractions."
    ),
    "openai": (
        "- Keep going until the task is done before ending your turn; do not stop to ask "
        "about obvious next steps.\n"
        "- Change files with targeted edits, not by rewriting them whole.\n"
        "- Keep final answers concise."
    ),
    "other": (
        "- Call one tool at a time and wait for its result.\n"
        "- Tool arguments are JSON that match the tool's schema exactly: the names given, no "
        "extra fields, no comments. If a call fails, read the error and fix the arguments.\n"
        "- Do not describe a tool call in text: make it."
    ),
}
"""Small corrections for what each model family tends to get wrong."""

ADJUSTMENT_HEADING = "# Notes for this model"

# --- the environment -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Environment:
    os: str
    """e.g. "Linux 6.1.0-18-amd64 (x86_64)"."""
    shell: str
    """The user's shell, from $SHELL, else "/bin/sh" (the shell tool always runs bash)."""
    cwd: Path
    roots: tuple[Path, ...]
    """Additional workspace roots; the cwd is not repeated."""
    git_branch: str | None
    """None: not a git repository, or its HEAD could not be read (see `is_git`);
    "(detached at 1a2b3c4)" for a detached HEAD."""
    is_git: bool
    today: date


def environment(
    cwd: Path, roots: Sequence[Path], env: Mapping[str, str], *, today: date | None = None
) -> Environment:
    """Read without subprocesses: .git found upward (a directory, or a `gitdir:` file as in
    worktrees), the branch from its HEAD file."""
    is_git, branch = _git_state(cwd)
    return Environment(
        os=_os_description(),
        shell=env.get("SHELL") or DEFAULT_SHELL,
        cwd=cwd,
        roots=tuple(dict.fromkeys(root for root in roots if root != cwd)),
        git_branch=branch,
        is_git=is_git,
        today=today or date.today(),
    )


def _os_description() -> str:
    system = platform.system() or "Unknown OS"
    if system == "Darwin":  # the kernel's version means nothing to a user; macOS's does
        system, release = "macOS", platform.mac_ver()[0]
    else:
        release = platform.release()
    machine = platform.machine()
    described = f"{system} {release}".strip()
    return f"{described} ({machine})" if machine else described


def _git_state(cwd: Path) -> tuple[bool, str | None]:
    """(is a git repository, its branch or None when unknown)."""
    dot_git = _find_dot_git(cwd)
    if dot_git is None:
        return False, None
    git_dir = _git_dir(dot_git)
    if git_dir is None:
        return True, None
    head = _read_small_file(git_dir / "HEAD")
    return True, (None if head is None else _branch_from_head(head, git_dir / "HEAD"))


def _find_dot_git(cwd: Path) -> Path | None:
    """The nearest `.git` at or above `cwd`, on the physical path as git walks it."""
    try:
        start = cwd.resolve()
    except (OSError, RuntimeError, ValueError) as exc:  # a loop, a NUL: walk what was given
        log.warning("cannot resolve %s: %s", cwd, exc)
        start = cwd
    for directory in (start, *start.parents):
        candidate = directory / ".git"
        try:
            os.lstat(candidate)
        except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
            if getattr(exc, "errno", None) not in (errno.ENOENT, errno.ENOTDIR):
                log.warning("cannot look at %s: %s", candidate, exc)
            continue
        return candidate
    return None


def _git_dir(dot_git: Path) -> Path | None:
    """The repository's git directory: `.git` itself, or where its `gitdir:` line points."""
    try:
        mode = dot_git.stat().st_mode
    except OSError as exc:  # a dangling symlink, a loop, no permission
        log.warning("git repository at %s: cannot read %s: %s", dot_git.parent, dot_git, exc)
        return None
    if stat.S_ISDIR(mode):
        return dot_git
    text = _read_small_file(dot_git)
    if text is None:
        return None
    first_line = text.partition("\n")[0].strip()
    if not first_line.startswith("gitdir:"):
        log.warning("git repository at %s: %s has no gitdir: line", dot_git.parent, dot_git)
        return None
    # A relative gitdir is relative to the directory holding the `.git` file.
    return dot_git.parent / first_line.removeprefix("gitdir:").strip()


def _read_small_file(path: Path) -> str | None:
    """A short regular file's text; None, with a warning, for anything else."""
    # O_NONBLOCK: opening a FIFO planted as HEAD must not hang; fstat then turns it away.
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except (OSError, ValueError) as exc:  # ValueError: a NUL in a `gitdir:` path
        log.warning("cannot read %s: %s", path, exc)
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            log.warning("cannot read %s: not a regular file", path)
            return None
        data = os.read(fd, MAX_GIT_FILE_BYTES + 1)
    except OSError as exc:
        log.warning("cannot read %s: %s", path, exc)
        return None
    finally:
        os.close(fd)
    if len(data) > MAX_GIT_FILE_BYTES:
        log.warning("ignoring %s: longer than %d bytes", path, MAX_GIT_FILE_BYTES)
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        log.warning("ignoring %s: not UTF-8", path)
        return None


_OBJECT_ID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")  # SHA-1 or SHA-256 repositories
# Git refuses ref names with spaces, control characters and a few symbols; so do we, so a
# crafted HEAD cannot smuggle text into the prompt.
_REF_NAME = re.compile(r"[^\s\x00-\x1f\x7f~^:?*\[\\]+")


def _branch_from_head(head: str, path: Path) -> str | None:
    line = head.partition("\n")[0].strip()
    if _OBJECT_ID.fullmatch(line):
        return f"(detached at {line[:7]})"
    ref = line.removeprefix("ref:").strip() if line.startswith("ref:") else ""
    branch = ref.removeprefix("refs/heads/")
    if branch and len(branch) <= MAX_BRANCH_CHARS and _REF_NAME.fullmatch(branch):
        return branch
    log.warning("ignoring %s: not a branch or commit: %.80r", path, line)
    return None


# --- the prompt ----------------------------------------------------------------------------


def default_prompt(
    env: Environment,
    tools: Sequence[str],
    mode: str,
    *,
    family: ModelFamily = "other",
    adjustment: str | None = None,
) -> str:
    """The built-in prompt: role, how to work with each offered tool, the current permission
    mode's meaning, how to report, the environment. `adjustment` (from the config, per model)
    is appended as its own short section, replacing the family's built-in adjustment."""
    guidance = _mode(mode)
    prompt = PROMPT_TEMPLATE.format(
        tools=_tools_section(tools),
        mode_name=guidance.name,
        mode_meaning=guidance.meaning,
        environment=_environment_section(env),
    )
    notes = FAMILY_ADJUSTMENTS.get(family, "") if adjustment is None else adjustment.strip()
    if notes:
        prompt += f"\n{ADJUSTMENT_HEADING}\n{notes}\n"
    return prompt


def _tools_section(tools: Sequence[str]) -> str:
    offered = set(tools)
    lines = [f"- {text}" for name, text in TOOL_GUIDANCE.items() if name in offered]
    if offered - TOOL_GUIDANCE.keys():
        lines.append(f"- {OTHER_TOOLS_GUIDANCE}")
    return "\n".join(lines) if lines else "- No tools are offered: answer from the conversation."


def _mode(mode: str) -> ModeGuidance:
    guidance = MODE_GUIDANCE.get(mode)
    if guidance is None:
        log.warning("no guidance for permission mode %r", mode)
        return ModeGuidance(mode, UNKNOWN_MODE_MEANING)
    return guidance


def _environment_section(env: Environment) -> str:
    lines = [
        f"- OS: {env.os}",
        f"- User's shell: {env.shell}",
        f"- Working directory: {env.cwd}",
    ]
    if env.roots:
        lines.append("- Other workspace roots: " + ", ".join(str(root) for root in env.roots))
    lines.append(f"- Git: {_git_description(env)}")
    lines.append(f"- Today: {env.today.isoformat()} ({env.today:%A})")
    return "\n".join(lines)


def _git_description(env: Environment) -> str:
    if not env.is_git:
        return "not a git repository"
    if env.git_branch is None:
        return "a repository (branch unknown)"
    if env.git_branch.startswith("(detached"):
        return f"a repository, HEAD {env.git_branch.strip('()')}"
    return f"a repository, on branch {env.git_branch}"


# --- model families ------------------------------------------------------------------------

_ANTHROPIC_PROVIDERS = frozenset({"anthropic", "anthropic-bedrock", "anthropic-vertex"})
_OPENAI_PROVIDERS = frozenset({"openai", "azure-openai"})
# OpenAI's model names, as words of a model id: gpt-4o, gpt4, chatgpt-4o-latest, o3, o4-mini,
# codex-mini. Not "gptq", which names a quantisation of open models (Llama-2-7B-GPTQ).
_OPENAI_WORD = re.compile(r"(chat)?gpt(\d\w*)?|o[1-9]|codex")


def family_of(provider_type: str, model_id: str) -> ModelFamily:
    """The family a model belongs to: by provider type, else (an OpenAI-compatible server, a
    plugin) by the model id, as `claude-…`, `anthropic/claude-…`, `gpt-…`, `openai/o3`."""
    if provider_type in _ANTHROPIC_PROVIDERS:
        return "anthropic"
    if provider_type in _OPENAI_PROVIDERS:
        return "openai"
    model = model_id.lower()
    if "claude" in model:
        return "anthropic"
    if any(_OPENAI_WORD.fullmatch(word) for word in re.split(r"[^a-z0-9]+", model)):
        return "openai"
    return "other"


# --- the whole system prompt ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PromptParts:
    base: str
    """default_prompt(...), or the editor's `override` text, or the config's system_prompt."""
    instructions: str = ""
    """Rendered project instructions (may be "")."""
    skills: str = ""
    """Rendered skills section (may be "")."""
    appended: str = ""
    """The editor's `append` text (may be "")."""


def assemble(parts: PromptParts) -> str:
    """base, then instructions, then skills, then appended, separated by blank lines; empty
    parts left out."""
    texts = (parts.base, parts.instructions, parts.skills, parts.appended)
    return "\n\n".join(trimmed for text in texts if (trimmed := _trimmed(text)))


def _trimmed(text: str) -> str:
    """Without blank lines around it, so parts are joined by exactly one blank line; the
    first line keeps its indentation (it may be code)."""
    return _LEADING_BLANK_LINES.sub("", text.rstrip())


_LEADING_BLANK_LINES = re.compile(r"\A(?:[ \t]*\n)+")
