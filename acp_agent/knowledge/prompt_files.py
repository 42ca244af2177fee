"""Prompt files: markdown files that become slash commands (`/review` runs `review.md`).

Where they are found, nearest first (a name found twice is taken from the nearer place; the
farther file is listed as shadowed, and /help shows both):

1. the cwd's `.agents/commands/`, then its `.claude/commands/` (when the cwd is not the
   project root);
2. the project root's `.agents/commands/`, then its `.claude/commands/`;
3. the user's: our config directory's `commands/`.

A command's name is its file name without `.md`; a file in a subfolder is `folder:name`. A
name must be one slash-command word (`[A-Za-z0-9][A-Za-z0-9_:-]*`); other files are skipped
with a warning, as are unreadable, non-UTF-8 and oversized (over 256 KiB) files, and project
files whose symlinks lead outside the project. Hidden files and folders are ignored.

Front matter is optional: `description` and `argument-hint` are shown to the editor; without
a description, the body's first non-empty line stands in (heading marks dropped, at most 80
characters). `expand` fills `$ARGUMENTS` and `$1`…`$9` in the body.

`stamp` records (path, mtime, size) of every file read; `files_stamp` makes the same walk with
only stat calls, so a session can tell cheaply when to discover (and announce) again.
"""

from __future__ import annotations

import os
import re
import shlex
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from acp_agent.knowledge._front_matter import read_document
from acp_agent.knowledge._places import (
    Place,
    escapes,
    list_directory,
    nearest_wins,
    printable,
    project_places,
    real_path,
)

COMMAND_DIRECTORIES = (Path(".agents", "commands"), Path(".claude", "commands"))
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_:-]*")
MAX_PROMPT_FILE_BYTES = 256 * 1024
"""A larger prompt would fill most context windows on its own: it is a mistake, not a prompt."""
MAX_FOLDER_DEPTH = 4
"""Subfolder levels below a commands directory that are looked in (`a:b:c:d:name`)."""
FALLBACK_DESCRIPTION = 80
"""Characters of the first line used as a description when the front matter has none."""

Stamp = tuple[tuple[str, int, int], ...]


@dataclass(frozen=True, slots=True)
class PromptFile:
    name: str
    description: str
    argument_hint: str | None
    body: str  # the markdown after the front matter
    path: Path
    scope: Literal["project", "user"]


@dataclass(frozen=True, slots=True)
class PromptFiles:
    commands: tuple[PromptFile, ...]  # in effect, sorted by name
    shadowed: tuple[PromptFile, ...]  # files a nearer one of the same name hides (user by project)
    warnings: tuple[str, ...]
    stamp: Stamp  # (path, mtime_ns, size) of every file read: compare two to know files changed

    def find(self, name: str) -> PromptFile | None:
        return next((command for command in self.commands if command.name == name), None)


def discover_prompt_files(
    cwd: Path, project_root: Path, *, user_config_dir: Path | None
) -> PromptFiles:
    warnings: list[str] = []
    candidates = list(_candidates(cwd, project_root, user_config_dir, warnings))
    found: list[PromptFile] = []  # nearest first
    seen: set[tuple[str, int, int]] = set()  # (name, device, inode): one file reached twice
    for candidate in candidates:
        name = ":".join(candidate.name_parts)
        if NAME_PATTERN.fullmatch(name) is None:
            warnings.append(
                f"{candidate.path}: skipped: {name!r} is not a command name (letters, digits, "
                "'_', '-'; subfolders add 'folder:')"
            )
            continue
        identity = (name, candidate.stat.st_dev, candidate.stat.st_ino)
        if identity in seen:  # `.claude/commands` linked to `.agents/commands`
            continue
        seen.add(identity)
        command = _read_command(name, candidate, warnings)
        if command is not None:
            found.append(command)
    in_effect, shadowed = nearest_wins(found, lambda command: command.name)
    return PromptFiles(
        commands=in_effect,
        shadowed=shadowed,
        warnings=tuple(warnings),
        stamp=_stamp(candidates),
    )


def files_stamp(cwd: Path, project_root: Path, *, user_config_dir: Path | None) -> Stamp:
    """Only stat calls: the stamp discover would give, to tell cheaply whether to discover
    again."""
    return _stamp(_candidates(cwd, project_root, user_config_dir, warnings=[]))


# --- Finding the files ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Candidate:
    """A markdown file found in a place, before it is read."""

    name_parts: tuple[str, ...]  # the folders below the place, then the file name without .md
    path: Path
    scope: Literal["project", "user"]
    stat: os.stat_result  # of the file a read opens (symlinks followed)


def _places(cwd: Path, project_root: Path, user_config_dir: Path | None) -> list[Place]:
    places = project_places(cwd, project_root, COMMAND_DIRECTORIES, every_level=False)
    if user_config_dir is not None:
        places.append(Place(user_config_dir / "commands", "user", None))
    return places


def _candidates(
    cwd: Path, project_root: Path, user_config_dir: Path | None, warnings: list[str]
) -> Iterator[_Candidate]:
    """Every markdown file of every place, nearest place first, in name order within one.
    Shared by discovery and `files_stamp`, so both see exactly the same files."""
    for place in _places(cwd, project_root, user_config_dir):
        try:
            real = real_path(place.directory)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as error:
            warnings.append(f"{place.directory}: skipped: {error.strerror or error}")
            continue
        if escapes(real, place):
            warnings.append(f"{place.directory}: skipped: it leads outside the project, to {real}")
            continue
        yield from _walk(place, place.directory, (), above=frozenset(), warnings=warnings)


def _walk(
    place: Place,
    directory: Path,
    folders: tuple[str, ...],
    *,
    above: frozenset[tuple[int, int]],
    warnings: list[str],
) -> Iterator[_Candidate]:
    """The markdown files in `directory` and its subfolders; `above` holds the (device, inode)
    of the folders it lies in, so that a symlink back up to one of them ends the walk."""
    try:
        directory_stat = os.stat(directory)
    except OSError as error:
        warnings.append(f"{directory}: skipped: {error.strerror or error}")
        return
    identity = (directory_stat.st_dev, directory_stat.st_ino)
    if identity in above:
        warnings.append(f"{directory}: skipped: it leads back to a folder it is in (a loop)")
        return
    above |= {identity}
    for entry in list_directory(directory, warnings):
        path = Path(entry.path)
        if not entry.name.lower().endswith(".md") and not entry.is_dir():
            continue  # not a prompt file: README.txt, scripts, images
        try:
            entry_stat = entry.stat()  # follows symlinks
        except OSError as error:  # a broken symlink, a loop
            warnings.append(f"{path}: skipped: {error.strerror or error}")
            continue
        is_folder = stat.S_ISDIR(entry_stat.st_mode)
        if not printable(entry.name):
            warnings.append(f"{path!r}: skipped: its name has control characters")
            continue
        if entry.is_symlink() and not _stays_inside(path, place, warnings):
            continue
        if is_folder:
            if len(folders) == MAX_FOLDER_DEPTH:
                warnings.append(f"{path}: skipped: more than {MAX_FOLDER_DEPTH} folders deep")
                continue
            yield from _walk(place, path, (*folders, entry.name), above=above, warnings=warnings)
        elif stat.S_ISREG(entry_stat.st_mode):
            yield _Candidate((*folders, entry.name[:-3]), path, place.scope, entry_stat)
        else:
            warnings.append(f"{path}: skipped: it is not a regular file")


def _stays_inside(path: Path, place: Place, warnings: list[str]) -> bool:
    try:
        real = real_path(path)
    except OSError as error:
        warnings.append(f"{path}: skipped: {error.strerror or error}")
        return False
    if escapes(real, place):
        warnings.append(f"{path}: skipped: it leads outside the project, to {real}")
        return False
    return True


def _stamp(candidates: Iterable[_Candidate]) -> Stamp:
    return tuple(
        (str(candidate.path), candidate.stat.st_mtime_ns, candidate.stat.st_size)
        for candidate in candidates
    )


# --- Reading one file ----------------------------------------------------------------------


def _read_command(name: str, candidate: _Candidate, warnings: list[str]) -> PromptFile | None:
    path = candidate.path
    document = read_document(path, body_limit=MAX_PROMPT_FILE_BYTES)
    if document.problem is not None:
        warnings.append(f"{path}: skipped: {document.problem}")
        return None
    fields = document.fields or {}
    description = _text(fields.get("description"))
    if description is None:
        if fields.get("description") is not None:
            warnings.append(f"{path}: its `description` is not text; its first line is used")
        description = _first_line(document.body)
    argument_hint = _argument_hint(fields.get("argument-hint"))
    if argument_hint is None and fields.get("argument-hint") not in (None, ""):
        warnings.append(f"{path}: its `argument-hint` is not text; it is left out")
    return PromptFile(name, description, argument_hint, document.body, path, candidate.scope)


def _text(value: Any) -> str | None:
    """A front matter value as one line of text, or None when it is no (non-empty) text."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return None
    text = " ".join(str(value).split())
    return text or None


def _argument_hint(value: Any) -> str | None:
    """`argument-hint: <file> [focus]` as written. The common `argument-hint: [message]` is a
    YAML list; it is shown as written, brackets and all."""
    if isinstance(value, list) and value:
        words = [_text(item) for item in value]
        if all(word is not None for word in words):
            return " ".join(f"[{word}]" for word in words)
        return None
    return _text(value)


def _first_line(body: str) -> str:
    """The body's first non-empty line, without heading marks, at most 80 characters."""
    line = next((line.strip() for line in body.splitlines() if line.strip()), "")
    line = line.lstrip("#").strip()
    if len(line) <= FALLBACK_DESCRIPTION:
        return line
    return line[: FALLBACK_DESCRIPTION - 1].rstrip() + "…"


# --- Filling in the arguments --------------------------------------------------------------

_PLACEHOLDER = re.compile(r"\$\$|\$ARGUMENTS(?![A-Za-z0-9_])|\$([1-9])")


def expand(command: PromptFile, arguments: str) -> str:
    """The body with $ARGUMENTS replaced by `arguments` and $1..$9 by its words (shell-like
    split with shlex, falling back to whitespace split on unbalanced quotes; missing ones
    become ""); `$$` stays a literal `$`. If the body has no placeholder and arguments are
    given, they are appended after a blank line."""
    arguments = arguments.strip()
    words = _words(arguments)
    placeholders = 0

    def fill(match: re.Match[str]) -> str:
        nonlocal placeholders
        if match[0] == "$$":
            return "$"
        placeholders += 1
        if match[1] is None:
            return arguments
        index = int(match[1]) - 1
        return words[index] if index < len(words) else ""

    expanded = _PLACEHOLDER.sub(fill, command.body)
    if placeholders or not arguments:
        return expanded
    return f"{expanded.rstrip()}\n\n{arguments}" if expanded.strip() else arguments


def _words(arguments: str) -> list[str]:
    try:
        return shlex.split(arguments)
    except ValueError:  # an unbalanced quote: "don't" is a word, not an error
        return arguments.split()
