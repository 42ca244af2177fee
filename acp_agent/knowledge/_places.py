"""Where skills and prompt files are looked for, and the checks every found file passes.

Places are walked as real paths (symlinks followed), so a path we report is the file a
read opens. A project place holds files from a repository the user may not have written:
whatever a symlink there leads to must stay inside the project, or `.agents/skills/x` could
point the model at `~/.ssh`. The user's own places (home, config directory) may link
anywhere: the user put the links there.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypeVar

Scope = Literal["project", "user"]
Found = TypeVar("Found")

MAX_ENTRIES_PER_DIRECTORY = 1000
"""Entries read from one directory; a repository with more skill folders than this is hostile
or broken, and listing them all would stall the session's start."""


@dataclass(frozen=True, slots=True)
class Place:
    """A directory to look in, nearest first in a list of them."""

    directory: Path
    scope: Scope
    confined_to: Path | None  # a real path every file found must resolve inside; None: anywhere


def project_places(
    cwd: Path, project_root: Path, subdirectories: Sequence[Path], *, every_level: bool
) -> list[Place]:
    """`subdirectories` (`.agents/skills` and the like) of each project directory, nearest
    first, in their order within one directory."""
    return [
        Place(directory.directory / subdirectory, "project", directory.confined_to)
        for directory in _project_directories(cwd, project_root, every_level=every_level)
        for subdirectory in subdirectories
    ]


def _project_directories(cwd: Path, project_root: Path, *, every_level: bool) -> list[Place]:
    """The project's directories themselves, nearest first: the cwd, then (`every_level`)
    each parent up to the project root, else the project root alone. A cwd outside the
    project root is its own project: it and the root are looked in, each confined to itself."""
    real_cwd, real_root = real_or_absolute(cwd), real_or_absolute(project_root)
    if not real_cwd.is_relative_to(real_root):
        places = [Place(real_cwd, "project", real_cwd), Place(real_root, "project", real_root)]
        return places if real_cwd != real_root else places[:1]
    directories = [real_cwd]
    if every_level:
        directories += [parent for parent in real_cwd.parents if parent.is_relative_to(real_root)]
    elif real_cwd != real_root:
        directories.append(real_root)
    return [Place(directory, "project", real_root) for directory in directories]


def real_or_absolute(path: Path) -> Path:
    """`path` with its symlinks followed, or as an absolute path when that fails."""
    try:
        return Path(os.path.realpath(path, strict=True))
    except (OSError, ValueError):
        return Path(os.path.abspath(path))


def real_path(path: Path) -> Path:
    """`path` with every symlink followed; OSError when it does not exist or cannot be
    followed (a loop: errno ELOOP; no permission: EACCES)."""
    try:
        return Path(os.path.realpath(path, strict=True))
    except ValueError as error:  # a NUL byte in the name
        raise OSError(str(error)) from None


def escapes(real: Path, place: Place) -> bool:
    """Whether a file found in `place`, resolved to `real`, lies outside where it must stay."""
    return place.confined_to is not None and not real.is_relative_to(place.confined_to)


def list_directory(directory: Path, warnings: list[str]) -> Iterator[os.DirEntry[str]]:
    """The visible entries of `directory`, sorted by name; nothing when it does not exist,
    a warning when it cannot be read or holds too many entries."""
    try:
        with os.scandir(directory) as scan:
            entries: list[os.DirEntry[str]] = []
            for entry in scan:
                if entry.name.startswith("."):  # hidden: editor swap files, .DS_Store
                    continue
                if len(entries) == MAX_ENTRIES_PER_DIRECTORY:
                    warnings.append(
                        f"{directory}: more than {MAX_ENTRIES_PER_DIRECTORY} entries; "
                        "only the first ones (by name, of those read) are used"
                    )
                    break
                entries.append(entry)
    except (FileNotFoundError, NotADirectoryError):
        return
    except OSError as error:
        warnings.append(f"{directory}: skipped: it cannot be read ({error.strerror or error})")
        return
    yield from sorted(entries, key=lambda entry: entry.name)


def printable(name: str) -> bool:
    """Whether a file or folder name can stand on one line of a prompt (no control characters,
    which would let a repository's file names start lines of their own)."""
    return name.isprintable()


def nearest_wins(
    found: list[Found], name: Callable[[Found], str]
) -> tuple[tuple[Found, ...], tuple[Found, ...]]:
    """Split `found` (nearest first) into those in effect, sorted by name, and the farther ones
    of a name already taken (shadowed), nearest first."""
    in_effect: dict[str, Found] = {}
    shadowed: list[Found] = []
    for item in found:
        if name(item) in in_effect:
            shadowed.append(item)
        else:
            in_effect[name(item)] = item
    return tuple(sorted(in_effect.values(), key=name)), tuple(shadowed)
