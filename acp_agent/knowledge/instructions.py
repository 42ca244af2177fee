"""Instruction files: what the user and the project tell the model (`AGENTS.md`).

Which files, far to near (a later file wins on conflict, and the prompt says so):

1. the user's own, in the config directory the caller names (`$XDG_CONFIG_HOME/acp-agent`,
   else `~/.config/acp-agent`);
2. each additional root's (ACP `additionalDirectories`) own files, in the order given;
3. the project's: every folder from the project root (the nearest folder at or above the
   cwd holding `.git`, a directory or, in a worktree, a file; else the cwd) down to the cwd.

In each folder: the files named in `extra_names` (in the configured order), then the
folder's `AGENTS.md`, or where there is none `CLAUDE.md`, else `GEMINI.md`: the first of
them that is a readable file inside the roots, so a broken `AGENTS.md` lets the next stand
in. `AGENTS.md` comes last in its folder, so it has the last word there and is kept first.
A file reached twice (the cwd is also an additional root, a symlink, a hard link) counts
once, at its nearest place. A blank file holds its folder's place but is not shown.

Roots, as read_file checks them: a file whose real path (symlinks resolved) lies outside the
project root, the cwd, the additional roots and the user config directory is not read.

Budget: `budget_bytes` of file text (bytes on disk; labels and notes are not counted),
handed out from the nearest file outward. The file that does not fit whole is cut at its
last line break within what is left (a single line too long for it: at a character
boundary); every file farther out is left out (`text == ""`). Both stay in the list with
`cut=True`, so the prompt can say what is missing. No file is read past `budget_bytes`
(and one byte more, to tell whether a line or a character ends there).

Cost: the reader runs before every model request. It keeps what it read keyed by each
file's (mtime_ns, ctime_ns, size, inode, device), so a turn where nothing changed costs a
few `stat` calls; a changed, new or deleted file is noticed on the next call.

Bad input never raises: a file that cannot be read (permission denied, symlink loop, not a
regular file such as a FIFO, outside the roots) is skipped, undecodable bytes are replaced;
each is logged once as a warning while it lasts, and nothing else is lost.
"""

from __future__ import annotations

import functools
import logging
import os
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

logger = logging.getLogger(__name__)

STAND_IN_NAMES = ("AGENTS.md", "CLAUDE.md", "GEMINI.md")
"""A folder's main instruction file: the first of these it has."""

_READ_CHUNK = 64 * 1024
_BOM = b"\xef\xbb\xbf"
# Reading a FIFO or a device named AGENTS.md must not block the turn: open without waiting,
# then refuse anything but a regular file.
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)

Scope = Literal["user", "project", "additional"]
_Stamp = tuple[int, int, int, int, int]
"""(mtime_ns, ctime_ns, size, inode, device): ctime catches a chmod, device a remount."""


@dataclass(frozen=True, slots=True)
class InstructionSettings:
    enabled: bool = True
    budget_bytes: int = 32 * 1024
    extra_names: tuple[str, ...] = ()
    """Other files read in every folder of the chain as well (e.g. ".rules", "CONVENTIONS.md")."""


@dataclass(frozen=True, slots=True)
class InstructionFile:
    path: Path
    """Absolute, as found (not resolved)."""
    text: str
    """What the model gets (cut when over budget)."""
    size: int
    """Bytes on disk."""
    cut: bool
    """Shortened (or left out: text == "") to fit the budget."""
    scope: Scope


def project_root(cwd: Path) -> Path:
    """The nearest folder at or above cwd holding `.git` (a directory or a file, as in a
    worktree), else cwd."""
    return Path(_project_chain(os.path.abspath(cwd))[0])


@dataclass(frozen=True, slots=True)
class _Seen:
    """One file as last looked at: what identifies its version, where it really lives, and
    what of it was read (None: not yet, as when it lies outside the roots)."""

    stamp: _Stamp
    real_path: str
    head: bytes | None = None
    """The file's first `budget_bytes + 1` bytes at most."""
    size: int = 0
    failure: str | None = None
    """Why this version could not be read; it is not retried until it changes."""


@dataclass(frozen=True, slots=True)
class _Found:
    path: str
    scope: Scope
    seen: _Seen


@dataclass(frozen=True, slots=True)
class _Fitted:
    """The last answer, given again while the same versions of the same files are found,
    so a warm turn decodes and allocates nothing."""

    found: tuple[tuple[str, Scope, _Stamp], ...]
    files: tuple[InstructionFile, ...]
    warnings: frozenset[str]


@dataclass(slots=True)
class _Turn:
    """What one `read` call met: the paths looked at (the rest leave the cache) and the
    warnings that hold now."""

    roots: tuple[str, ...]
    visited: set[str] = field(default_factory=set)
    warnings: set[str] = field(default_factory=set)


class InstructionReader:
    """Finds and reads one session's instruction files; keeps what it read, keyed by each
    file's (mtime_ns, size, inode), so a turn re-reads only files that changed or appeared
    (and notices deleted ones)."""

    def __init__(self, settings: InstructionSettings, user_config_dir: Path | None) -> None:
        self._settings = settings
        self._budget = max(settings.budget_bytes, 0)
        self._user_dir = os.path.abspath(user_config_dir) if user_config_dir else None
        self._extra_names = _usable_names(settings.extra_names)
        self._cache: dict[str, _Seen] = {}
        self._real_roots: dict[str, tuple[tuple[int, int] | None, str]] = {}
        self._fitted: _Fitted | None = None
        self._warned: set[str] = set()

    def read(self, cwd: Path, additional_roots: Sequence[Path] = ()) -> list[InstructionFile]:
        """Ordered far to near: the user's file, each additional root's own file, then
        project root down to cwd. Empty when settings.enabled is False."""
        if not self._settings.enabled:
            return []
        here = os.path.abspath(cwd)
        chain = _project_chain(here)
        extra = [os.path.abspath(folder) for folder in additional_roots]
        roots = [chain[0], here, *extra, *([self._user_dir] if self._user_dir else [])]
        turn = _Turn(roots=tuple(self._real_folder(root) for root in dict.fromkeys(roots)))

        found: list[_Found] = []
        if self._user_dir:
            found += self._folder_files(self._user_dir, "user", turn)
        in_chain = set(chain)
        for folder in dict.fromkeys(extra):  # a folder of the chain is read there, once
            if folder not in in_chain:
                found += self._folder_files(folder, "additional", turn)
        for folder in chain:
            found += self._folder_files(folder, "project", turn)

        files = self._fit(_nearest_once(found), turn)
        self._end_turn(turn)
        return files

    def _real_folder(self, folder: str) -> str:
        """A root's real path, with a trailing separator so that `/repo` does not hold
        `/repo-other`. Resolved again only when the folder is no longer the same directory
        (one `stat` instead of one `lstat` per path component on every turn)."""
        try:
            info = os.stat(folder)
            identity: tuple[int, int] | None = (info.st_dev, info.st_ino)
        except (OSError, ValueError):
            identity = None
        known = self._real_roots.get(folder)
        if known is None or known[0] != identity or identity is None:
            known = (identity, os.path.join(os.path.realpath(folder), ""))
            self._real_roots[folder] = known
        return known[1]

    def _folder_files(self, folder: str, scope: Scope, turn: _Turn) -> Iterator[_Found]:
        # The user's own files may lead anywhere (a dotfiles checkout is the usual place).
        anywhere = scope == "user"
        extra, stand_ins = _candidates(folder, self._extra_names)
        for path in extra:
            seen = self._look(path, turn, anywhere=anywhere)
            if seen is not None:
                yield _Found(path, scope, seen)
        for path in stand_ins:
            seen = self._look(path, turn, anywhere=anywhere)
            if seen is not None:
                yield _Found(path, scope, seen)
                return

    def _look(self, path: str, turn: _Turn, *, anywhere: bool = False) -> _Seen | None:
        """The file at `path` if it is a readable regular file inside the roots: from the
        cache when its stamp is unchanged (one `stat`), else resolved and read again."""
        turn.visited.add(path)
        try:
            info = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            return None  # the usual case: this folder has no such file
        except (OSError, ValueError) as error:
            turn.warnings.add(f"instruction file {path} skipped: {_reason(error)}")
            return None
        if not stat.S_ISREG(info.st_mode):
            turn.warnings.add(f"instruction file {path} skipped: not a regular file")
            return None
        seen = self._cache.get(path)
        if seen is None or seen.stamp != _stamp(info):
            try:
                real = os.path.realpath(path, strict=True)
            except (OSError, ValueError) as error:  # a symlink loop is an OSError (ELOOP)
                turn.warnings.add(f"instruction file {path} skipped: {_reason(error)}")
                return None
            seen = _Seen(stamp=_stamp(info), real_path=real)
        # Checked on every call, not cached: the roots may differ from the last turn.
        if not anywhere and not _inside(seen.real_path, turn.roots):
            turn.warnings.add(
                f"instruction file {path} skipped: it leads to {seen.real_path}, outside"
                " the project, the session's roots and the user config directory"
            )
            self._cache[path] = seen
            return None
        if seen.head is None and seen.failure is None:
            # One byte past the budget tells whether the budget ends on a line or a character.
            seen = _read_head(seen, self._budget + 1)
        self._cache[path] = seen
        if seen.failure is not None:
            turn.warnings.add(f"instruction file {path} skipped: {seen.failure}")
            return None
        return seen

    def _fit(self, found: list[_Found], turn: _Turn) -> list[InstructionFile]:
        """Hands out the budget from the nearest file outward; see the module docstring."""
        key = tuple((item.path, item.scope, item.seen.stamp) for item in found)
        if self._fitted is None or self._fitted.found != key:
            warnings: set[str] = set()
            files = tuple(self._allot(found, warnings))
            self._fitted = _Fitted(key, files, frozenset(warnings))
        turn.warnings |= self._fitted.warnings
        return list(self._fitted.files)

    def _allot(self, found: list[_Found], warnings: set[str]) -> list[InstructionFile]:
        left = self._budget
        fitted: list[InstructionFile] = []
        for item in reversed(found):
            head, size = item.seen.head or b"", item.seen.size
            if size == len(head) and _is_blank(head):
                continue
            whole = size == len(head) and size <= left
            kept = head if whole else _cut(head, left)
            left = left - size if whole else 0
            text = _decode(kept, item.path, warnings)
            fitted.append(InstructionFile(Path(item.path), text, size, not whole, item.scope))
        fitted.reverse()
        return fitted

    def _end_turn(self, turn: _Turn) -> None:
        # Forget files no longer on the way (a deleted file, another cwd) so the cache stays
        # the size of one chain; log each warning once while its cause lasts.
        for path in self._cache.keys() - turn.visited:
            del self._cache[path]
        for warning in sorted(turn.warnings - self._warned):
            logger.warning(warning)
        self._warned = turn.warnings


def render_instructions(files: Sequence[InstructionFile]) -> str:
    """The system prompt section: "" when there are none; else a short heading that says
    files nearer the working directory take precedence on conflict, then each file as a
    labelled block (its absolute path, then its text), and for a cut file a visible note
    saying how much of it was left out and that the model may read the rest with
    read_file."""
    if not files:
        return ""
    blocks = [
        "# Instruction files\n\n"
        "Instructions the user and the project keep in files, farthest first: the user's own,"
        " additional directories, then the project from its root down to the working"
        " directory. Where they conflict, the later file (nearer the working directory)"
        " takes precedence."
    ]
    blocks += [_render_file(file) for file in files]
    return "\n\n".join(blocks) + "\n"


def _render_file(file: InstructionFile) -> str:
    label = f'<instructions path="{file.path}">'
    if file.cut and not file.text:
        note = (
            f"[not included: over the instruction budget ({file.size:,} bytes);"
            " read it with read_file if it matters here]"
        )
        return f"{label}\n{note}\n</instructions>"
    body = file.text.rstrip("\n")
    if file.cut:
        left_out = file.size - len(file.text.encode())
        body += (
            f"\n\n[cut to fit the instruction budget: {max(left_out, 0):,} of"
            f" {file.size:,} bytes left out; read the rest with read_file]"
        )
    return f"{label}\n{body}\n</instructions>"


def _project_chain(cwd: str) -> list[str]:
    """The folders from the project root down to `cwd` (an absolute path); only `cwd` when
    no folder at or above it holds `.git`."""
    folders = []
    folder = cwd
    while True:
        folders.append(folder)
        if os.path.lexists(os.path.join(folder, ".git")):  # False when it cannot be checked
            folders.reverse()
            return folders
        parent = os.path.dirname(folder)
        if parent == folder:
            return [cwd]
        folder = parent


@functools.lru_cache(maxsize=1024)
def _candidates(folder: str, extra_names: tuple[str, ...]) -> tuple[tuple[str, ...], ...]:
    """The paths a folder's files may have: the extra names', then the stand-ins'."""
    return (
        tuple(os.path.join(folder, name) for name in extra_names),
        tuple(os.path.join(folder, name) for name in STAND_IN_NAMES),
    )


def _inside(real_path: str, roots: tuple[str, ...]) -> bool:
    return real_path.startswith(roots)


def _nearest_once(found: list[_Found]) -> list[_Found]:
    """Each file once (by inode: symlinks and hard links too), at its nearest place."""
    kept: list[_Found] = []
    seen: set[tuple[int, int]] = set()
    for item in reversed(found):
        identity = (item.seen.stamp[3], item.seen.stamp[4])
        if identity not in seen:
            seen.add(identity)
            kept.append(item)
    kept.reverse()
    return kept


def _read_head(seen: _Seen, limit: int) -> _Seen:
    """The first `limit` bytes of the file (its real path: the one the roots check passed),
    never more, so a 10 MB file costs what can be used."""
    try:
        fd = os.open(seen.real_path, _OPEN_FLAGS)
    except OSError as error:
        return replace(seen, failure=_reason(error))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return replace(seen, failure="not a regular file")
        chunks: list[bytes] = []
        wanted = limit
        while wanted > 0:
            chunk = os.read(fd, min(wanted, _READ_CHUNK))
            if not chunk:
                break
            chunks.append(chunk)
            wanted -= len(chunk)
    except OSError as error:
        return replace(seen, failure=_reason(error))
    finally:
        os.close(fd)
    head = b"".join(chunks)
    # The file may have changed since `stat`: what was read belongs to the version fstat saw.
    size = len(head) if wanted > 0 else max(info.st_size, len(head))
    return replace(seen, stamp=_stamp(info), head=head, size=size)


def _cut(head: bytes, allowance: int) -> bytes:
    """The longest start of `head` within `allowance` bytes ending at a line break; when no
    whole line fits, ending at a character boundary."""
    if allowance <= 0:
        return b""
    line_end = head.rfind(b"\n", 0, allowance)
    if line_end >= 0:
        return head[: line_end + 1]
    end = allowance
    # Step back over UTF-8 continuation bytes (10xxxxxx) to the start of a character.
    while 0 < end < len(head) and head[end] & 0xC0 == 0x80:
        end -= 1
    return head[:end]


def _decode(data: bytes, path: str, warnings: set[str]) -> str:
    data = data.removeprefix(_BOM)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        warnings.add(f"instruction file {path} is not valid UTF-8: bad bytes replaced")
        return data.decode("utf-8", errors="replace")


def _is_blank(data: bytes) -> bool:
    return not data.removeprefix(_BOM).strip()


def _stamp(info: os.stat_result) -> _Stamp:
    return (info.st_mtime_ns, info.st_ctime_ns, info.st_size, info.st_ino, info.st_dev)


def _reason(error: BaseException) -> str:
    if isinstance(error, OSError) and error.strerror:
        return error.strerror.lower()
    return str(error) or type(error).__name__


def _usable_names(names: Sequence[str]) -> tuple[str, ...]:
    """The configured extra names that stay inside their folder: a plain name or a path
    below it (".github/copilot-instructions.md"); absolute paths and ".." are ignored."""
    usable: list[str] = []
    for name in names:
        parts = name.replace("\\", "/").split("/")
        if not name or "\0" in name or os.path.isabs(name) or ".." in parts:
            logger.warning("instruction file name %r ignored: not a name inside a folder", name)
        elif name not in usable:
            usable.append(name)
    return tuple(usable)
