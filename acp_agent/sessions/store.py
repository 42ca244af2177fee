"""Sessions on disk: one append-only JSON-lines log per session, plus a summary sidecar.

    <state dir>/sessions/<id>.jsonl       the log: a header line, then one record per line
    <state dir>/sessions/<id>.meta.json   the summary `session/list` shows (id, cwd, roots,
                                          title, created and updated times)
    <state dir>/sessions/<id>.lock        the pid of the process writing the log, if any

One writer per session. A process that opens a log to append to it holds an exclusive
`flock` on it for as long as the log is open; the kernel drops it with the descriptor, so
a crash releases it too. Another process's `open_log` or `delete` of that session is
`SessionLocked`, naming the holder by the pid it wrote beside the log; reading (`read`,
`fork`, `list`) takes no lock and works meanwhile. Where there is no `fcntl` (Windows)
logs are not locked, which is logged once.

Crash safety. A record counts once its newline is on disk. `SessionLog.append` hands each
line to the OS in one `write` as it happens, so killing our process (even with SIGKILL)
loses at most the line being written; `sync()` adds an fsync at turn ends, against power
loss. The reader skips a torn last line (no newline) with a warning, and any other line that
does not decode (we lose that record, never the session); `open_log` cuts a torn tail off
before appending, so a new line never glues onto it. The sidecar is rewritten whole, through
a temporary file, fsync and `os.replace`; a missing or broken one is rebuilt from the log.

Listing reads only the sidecars. Session ids come from clients: only `[A-Za-z0-9_-]{1,128}`
names a file, anything else is `SessionNotFound`, so no id walks out of the directory.

Secrets: every line and sidecar passes through a redaction of the secret values (8
characters or more; `redaction.py`, whose source is asked again as lines are written, so a
key stored while the agent runs is covered) before it is written, so an API key pasted into
a prompt or printed by a tool never reaches the disk. Files are the owner's only (0o600,
directories 0o700).
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import logging
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterable
from contextlib import suppress
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Protocol, TypeAlias

import anyio
import anyio.to_thread

from ..paths import default_state_dir as default_state_dir  # where it lived first
from .errors import (
    RecordError,
    SessionCorrupt,
    SessionExists,
    SessionLocked,
    SessionNotFound,
    StoreError,
)
from .records import (
    ArchiveRecord,
    MessageRecord,
    Record,
    SessionHeader,
    TitleRecord,
    decode,
    encode,
    utc_now,
)
from .redaction import MIN_SECRET_LENGTH, REDACTED, Redactor, SecretSource

if sys.platform != "win32":
    import fcntl

log = logging.getLogger(__name__)

APP_NAME: Final = "acp-agent"
SUMMARY_VERSION: Final = 1
_ID: Final = re.compile(r"[A-Za-z0-9_-]{1,128}")
_LOG_SUFFIX: Final = ".jsonl"
_META_SUFFIX: Final = ".meta.json"
_LOCK_SUFFIX: Final = ".lock"
_OWN_TIME: Final = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")
_O_BINARY: Final = getattr(os, "O_BINARY", 0)  # Windows: no newline translation


@dataclass(frozen=True, slots=True)
class SessionSummary:
    """What `session/list` shows of a session, kept in its sidecar."""

    session_id: str
    cwd: str
    additional_roots: tuple[str, ...]
    title: str | None
    created_at: str
    updated_at: str
    """ISO 8601 UTC, as `utc_now()` writes it (so that strings sort as times)."""
    origin: str | None = None
    """The header's: `ORIGIN_RUN` for `acp-agent run`, None for an editor's session."""
    archived: bool = False
    """Hidden from default listings (`session/archive`), from the log's last archive
    record."""


Records: TypeAlias = list[Record]
Summaries: TypeAlias = list[SessionSummary]
SummaryPage: TypeAlias = tuple[list[SessionSummary], str | None]


class SessionStore:
    """The logs and sidecars under `directory / "sessions"`.

    Blocking file I/O: cheap for one session (a create, an open, a delete), a fraction of
    a second for `read` of a very long log or `list` over thousands of sessions; callers
    on an event loop may run those in a worker thread.
    """

    def __init__(self, directory: Path, secrets: Iterable[str] | SecretSource = ()) -> None:
        self.directory = directory
        self.sessions_dir = directory / "sessions"
        self._redactor = Redactor(secrets)

    # --- one session ---------------------------------------------------------------------

    def create(self, header: SessionHeader) -> SessionLog:
        """A new log holding `header`; `SessionExists` if the id is taken."""
        return self._create(header, b"", title=None)

    def open_log(self, session_id: str) -> SessionLog:
        """The existing log of `session_id`, to append to; `SessionNotFound` if none,
        `SessionLocked` if another process has it open."""
        path, _ = self._paths(session_id)
        try:
            fd = os.open(path, os.O_RDWR | os.O_APPEND | _O_BINARY)
        except FileNotFoundError:
            raise SessionNotFound(session_id) from None
        except OSError as exc:
            raise StoreError(f"cannot open {path}: {exc}") from None
        try:
            _hold(fd, self._lock_path(session_id), session_id)  # before cutting its tail
            size = _cut_torn_tail(fd, path)
            summary = self._summary(session_id)
        except BaseException:
            os.close(fd)
            raise
        if summary is None:
            os.close(fd)
            raise SessionCorrupt(f"{path}: the log has no readable header")
        return SessionLog(self, fd, size, summary)

    def amend(
        self,
        session_id: str,
        record: Record,
        *,
        title: str | None = None,
        archived: bool | None = None,
    ) -> SessionSummary:
        """Append one record to a log no session here has open, and write its summary anew
        (`title`, `archived`: None leaves them; the last activity time stays). Blocking,
        cheap; `SessionNotFound`, `SessionLocked` as `open_log`."""
        log_ = self.open_log(session_id)
        try:
            log_.append(record)
            summary = replace(
                log_.summary,
                title=log_.summary.title if title is None else title,
                archived=log_.summary.archived if archived is None else archived,
            )
            _atomic_write(self._meta_path(session_id), self._sidecar(summary))
            return summary
        finally:
            log_.close()

    def read(self, session_id: str) -> Records:
        """Every record of the log, upgraded to the current version; the header first.

        Lines that do not decode are skipped with a warning naming the file and line (a
        torn last line is what a crash leaves). A missing or unreadable header (or one
        naming another session) is `SessionCorrupt`.
        """
        path, data = self._log_bytes(session_id)
        lines = data.split(b"\n")
        tail = lines.pop()  # b"" when the last line is complete
        if not lines:
            raise SessionCorrupt(f"{path}: no complete header line")
        header = _header(lines[0], path, session_id)
        records: Records = [header]
        append = records.append
        for number, line in enumerate(lines[1:], start=2):
            try:
                record = decode(line)
            except RecordError as exc:
                log.warning("%s:%d: skipping a record that does not load: %s", path, number, exc)
                continue
            if type(record) is SessionHeader:
                log.warning("%s:%d: skipping a second header", path, number)
                continue
            append(record)
        if tail:
            log.warning(
                "%s:%d: skipping a torn last record (%d bytes without a newline)",
                path,
                len(lines) + 1,
                len(tail),
            )
        return records

    def fork(self, source_id: str, header: SessionHeader) -> SessionLog:
        """A new log with `header` (its `forked_from` set to `source_id`) followed by every
        complete record of the source; the source is not touched. The title carries over."""
        if header.forked_from not in (None, source_id):
            raise ValueError(
                f"a fork of {source_id!r} cannot name {header.forked_from!r} as its source"
            )
        path, data = self._log_bytes(source_id)
        first = data.find(b"\n")
        if first < 0:
            raise SessionCorrupt(f"{path}: no complete header line")
        _header(data[:first], path, source_id)
        body = data[first + 1 : data.rfind(b"\n") + 1]  # complete lines only
        source = self._summary(source_id)
        title = source.title if source is not None else None
        return self._create(replace(header, forked_from=source_id), body, title=title)

    def delete(self, session_id: str) -> None:
        """Remove the log and its sidecar; `SessionNotFound` if there is no log,
        `SessionLocked` if another process has it open (its appends would be lost)."""
        path, meta = self._paths(session_id)
        try:
            fd = os.open(path, os.O_RDONLY | _O_BINARY)
        except FileNotFoundError:
            raise SessionNotFound(session_id) from None
        except OSError as exc:
            raise StoreError(f"cannot open {path}: {exc}") from None
        try:
            _hold(fd, self._lock_path(session_id), session_id)
            path.unlink()  # the log first: a sidecar alone is ignored, a log alone listed
            for other in (meta, self._lock_path(session_id)):
                with suppress(FileNotFoundError):
                    other.unlink()
        finally:
            os.close(fd)

    def holder(self, session_id: str) -> int | None:
        """The pid of the agent that has the session open (0 if it wrote none), None if no
        process has it (or locks do not work here)."""
        if sys.platform == "win32" or _ID.fullmatch(session_id) is None:
            return None
        try:
            fd = os.open(self._log_path(session_id), os.O_RDONLY | _O_BINARY)
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # shared: never in a writer's way
        except BlockingIOError:
            return _holder(self._lock_path(session_id)) or 0
        except OSError:
            return None
        finally:
            os.close(fd)  # drops our lock with it
        return None

    def prompted(self, session_id: str) -> bool:
        """Whether the session's log holds a message (an editor that opens a session and
        never prompts leaves one without); `SessionNotFound`, `SessionCorrupt` as `read`."""
        return any(isinstance(record, MessageRecord) for record in self.read(session_id))

    def exists(self, session_id: str) -> bool:
        return _ID.fullmatch(session_id) is not None and self._log_path(session_id).is_file()

    # --- all sessions --------------------------------------------------------------------

    def list(
        self,
        cwd: str | None = None,
        cursor: str | None = None,
        page_size: int = 50,
        *,
        shown: Callable[[SessionSummary], bool] | None = None,
    ) -> SummaryPage:
        """One page of summaries, newest `updated_at` first (ties by id), and the cursor of
        the next page (None on the last).

        `cwd` keeps the sessions of exactly that directory (both sides normalised). The
        cursor names the last item shown, so sessions created between two pages do not
        shift the next one. A malformed cursor is a `ValueError`.
        """
        if page_size < 1:
            raise ValueError(f"page size must be at least 1, not {page_size}")
        items = self.summaries()
        if shown is not None:
            items = [s for s in items if shown(s)]
        if cwd is not None:
            wanted = os.path.normpath(cwd)
            items = [s for s in items if os.path.normpath(s.cwd) == wanted]
        if cursor is not None:
            last_time, last_id = _read_cursor(cursor)
            items = [s for s in items if _sorts_after(s, last_time, last_id)]
        page = items[:page_size]
        more = len(items) > page_size
        return page, _make_cursor(page[-1]) if more else None

    def summaries(self) -> Summaries:
        """Every session's summary, newest `updated_at` first, ties by id. Reads the
        sidecars only; a missing or broken one is rebuilt from its log (with a warning)."""
        try:
            with os.scandir(self.sessions_dir) as entries:
                names = {entry.name for entry in entries}
        except FileNotFoundError:
            return []
        found: Summaries = []
        for name in names:
            if not name.endswith(_LOG_SUFFIX):
                continue
            session_id = name[: -len(_LOG_SUFFIX)]
            if _ID.fullmatch(session_id) is None:
                continue
            has_sidecar = session_id + _META_SUFFIX in names
            summary = self._summary(session_id, has_sidecar=has_sidecar)
            if summary is not None:
                found.append(summary)
        found.sort(key=lambda s: s.session_id)
        found.sort(key=lambda s: s.updated_at, reverse=True)
        return found

    # --- inside --------------------------------------------------------------------------

    def _log_path(self, session_id: str) -> Path:
        return self.sessions_dir / (session_id + _LOG_SUFFIX)

    def _lock_path(self, session_id: str) -> Path:
        return self.sessions_dir / (session_id + _LOCK_SUFFIX)

    def _paths(self, session_id: str) -> tuple[Path, Path]:
        if _ID.fullmatch(session_id) is None:
            raise SessionNotFound(session_id)
        return self._log_path(session_id), self.sessions_dir / (session_id + _META_SUFFIX)

    def _log_bytes(self, session_id: str) -> tuple[Path, bytes]:
        """The session's log file and all it holds."""
        path, _ = self._paths(session_id)
        try:
            return path, path.read_bytes()
        except FileNotFoundError:
            raise SessionNotFound(session_id) from None
        except OSError as exc:
            raise SessionCorrupt(f"cannot read {path}: {exc}") from None

    def _line(self, record: Record) -> bytes:
        return (self._redactor.line(encode(record)) + "\n").encode("utf-8")

    def _create(self, header: SessionHeader, body: bytes, *, title: str | None) -> SessionLog:
        if _ID.fullmatch(header.session_id) is None:
            raise ValueError(f"not a valid session id: {header.session_id!r}")
        path, _ = self._paths(header.session_id)
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.sessions_dir.mkdir(mode=0o700, exist_ok=True)
        data = self._line(header) + self._redactor.lines(body)
        flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_EXCL | _O_BINARY
        try:
            fd = os.open(path, flags, 0o600)
        except FileExistsError:
            raise SessionExists(header.session_id) from None
        try:
            _hold(fd, self._lock_path(header.session_id), header.session_id)
            _write_all(fd, data)
            updated = _canonical_time(header.created_at) or utc_now()
            summary = SessionSummary(
                header.session_id, header.cwd, header.additional_roots, title,
                header.created_at, updated, header.origin,
            )  # fmt: skip
            _atomic_write(self._meta_path(header.session_id), self._sidecar(summary))
        except BaseException:
            os.close(fd)
            raise
        return SessionLog(self, fd, len(data), summary)

    def _meta_path(self, session_id: str) -> Path:
        return self.sessions_dir / (session_id + _META_SUFFIX)

    def _sidecar(self, summary: SessionSummary) -> bytes:
        data = {
            "v": SUMMARY_VERSION,
            "kind": "summary",
            "session_id": summary.session_id,
            "cwd": summary.cwd,
            "additional_roots": list(summary.additional_roots),
            "title": summary.title,
            "created_at": summary.created_at,
            "updated_at": summary.updated_at,
        }
        if summary.origin is not None:  # sidecars of editor sessions stay as they were
            data["origin"] = summary.origin
        if summary.archived:  # as the origin: sidecars of other sessions stay as they were
            data["archived"] = True
        text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
        return (self._redactor.line(text) + "\n").encode("utf-8")

    def _summary(self, session_id: str, *, has_sidecar: bool = True) -> SessionSummary | None:
        """The sidecar's summary, or one rebuilt from the log (None if the log's header
        cannot be read either)."""
        meta = self._meta_path(session_id)
        problem = "missing"
        if has_sidecar:
            try:
                return _parse_sidecar(meta.read_bytes(), session_id)
            except FileNotFoundError:
                pass
            except (OSError, ValueError) as exc:  # JSON, UTF-8 and shape errors alike
                problem = f"unreadable ({exc})"
        log.warning("%s: the summary is %s; rebuilding it from the log", meta, problem)
        try:
            records = self.read(session_id)
            mtime = os.stat(self._log_path(session_id)).st_mtime
        except (StoreError, OSError) as exc:
            log.warning("%s: cannot rebuild the summary: %s", meta, exc)
            return None
        header = records[0]
        assert isinstance(header, SessionHeader)
        titles = [r.title for r in records if isinstance(r, TitleRecord)]
        archived = [r.archived for r in records if isinstance(r, ArchiveRecord)]
        summary = SessionSummary(
            session_id,
            header.cwd,
            header.additional_roots,
            titles[-1] if titles else None,
            header.created_at,
            datetime.fromtimestamp(mtime, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            header.origin,
            archived[-1] if archived else False,
        )
        with suppress(OSError):
            _atomic_write(meta, self._sidecar(summary))
        return summary


class LogWriter(Protocol):
    """What writing to an open session log takes: everything but opening and closing it,
    which its one owner does (the session's entry in `live.py`)."""

    @property
    def closed(self) -> bool: ...

    def append(self, record: Record) -> None: ...

    async def sync(self) -> None: ...

    async def update_summary(
        self,
        *,
        title: str | None = None,
        updated_at: str | None = None,
        archived: bool | None = None,
    ) -> SessionSummary: ...


class SessionLog:
    """An open log: appends from one event-loop thread, one line per record."""

    def __init__(self, store: SessionStore, fd: int, size: int, summary: SessionSummary) -> None:
        self._store = store
        self._fd: int | None = fd
        self._size = size
        self._summary = summary
        self._lock = anyio.Lock()

    @property
    def session_id(self) -> str:
        return self._summary.session_id

    @property
    def summary(self) -> SessionSummary:
        """The summary as last written to the sidecar."""
        return self._summary

    @property
    def closed(self) -> bool:
        return self._fd is None

    @property
    def size(self) -> int:
        """Bytes of the log, as written by this process."""
        return self._size

    def append(self, record: Record) -> None:
        """Write one record as one line, handed to the OS at once (no fsync: see `sync`).

        `RecordError` if the record cannot be encoded (nothing is written then); a failed
        write (disk full) is cut back off the file and raised as `StoreError`.
        """
        fd = self._require_open()
        data = self._store._line(record)
        try:
            _write_all(fd, data)
        except OSError as exc:
            with suppress(OSError):
                os.ftruncate(fd, self._size)
            raise StoreError(f"cannot append to session {self.session_id}: {exc}") from None
        self._size += len(data)

    async def sync(self) -> None:
        """fsync the log in a worker thread (at turn ends: against power loss)."""
        fd = os.dup(self._require_open())  # closing the log meanwhile must not close it
        try:
            await anyio.to_thread.run_sync(os.fsync, fd)
        finally:
            os.close(fd)

    async def update_summary(
        self,
        *,
        title: str | None = None,
        updated_at: str | None = None,
        archived: bool | None = None,
    ) -> SessionSummary:
        """Rewrite the sidecar with a new title and archive state (None: unchanged) and
        `updated_at` (None: now), atomically, in a worker thread. Returns the summary
        written."""
        self._require_open()
        if updated_at is None:
            updated = utc_now()
        else:
            canonical = _canonical_time(updated_at)
            if canonical is None:
                raise ValueError(f"not an ISO 8601 time: {updated_at!r}")
            updated = canonical
        async with self._lock:
            summary = replace(
                self._summary,
                title=self._summary.title if title is None else title,
                updated_at=updated,
                archived=self._summary.archived if archived is None else archived,
            )
            data = self._store._sidecar(summary)
            path = self._store._meta_path(summary.session_id)
            await anyio.to_thread.run_sync(_atomic_write, path, data)
            self._summary = summary
        return summary

    def close(self) -> None:
        """Close the log, which lets another process open it."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            with suppress(OSError):  # while the lock is ours: nobody else wrote it
                self._store._lock_path(self.session_id).unlink()
            os.close(fd)

    def _require_open(self) -> int:
        if self._fd is None:
            raise StoreError(f"the log of session {self.session_id} is closed")
        return self._fd


# --- helpers -----------------------------------------------------------------------------------


def _header(line: bytes, path: Path, session_id: str) -> SessionHeader:
    try:
        header = decode(line)
    except RecordError as exc:
        raise SessionCorrupt(f"{path}:1: the header does not load: {exc}") from None
    if not isinstance(header, SessionHeader):
        raise SessionCorrupt(f"{path}:1: the first record is a {header.kind}, not a header")
    if header.session_id != session_id:
        raise SessionCorrupt(f"{path}:1: the header names session {header.session_id!r}")
    return header


def _hold(fd: int, pid_path: Path, session_id: str) -> None:
    """Make this process the log's one writer while `fd` stays open, and write our pid
    beside it; `SessionLocked` naming the other process if it has the log."""
    if sys.platform == "win32":
        _warn_unlocked()
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise SessionLocked(session_id, _holder(pid_path)) from None
    except OSError as exc:  # a file system without locks (some network mounts)
        log.warning("%s: cannot lock the session log (%s): no one-writer guard", pid_path, exc)
        return
    try:
        fd_pid = os.open(pid_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _O_BINARY, 0o600)
        try:
            _write_all(fd_pid, f"{os.getpid()}\n".encode())
        finally:
            os.close(fd_pid)
    except OSError as exc:  # only the holder's name is lost
        log.warning("%s: cannot write our pid: %s", pid_path, exc)


def _holder(pid_path: Path) -> int | None:
    """The pid the process holding a log wrote beside it; None if unknown."""
    try:
        return int(pid_path.read_text(encoding="ascii").strip())
    except (OSError, ValueError):
        return None


@functools.cache
def _warn_unlocked() -> None:
    log.warning("session logs cannot be locked here (no fcntl): two agents could write one")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _cut_torn_tail(fd: int, path: Path) -> int:
    """Cut a last line without its newline off the log; the size that remains."""
    size = os.fstat(fd).st_size
    end = size
    while end > 0:
        start = max(0, end - 65536)
        os.lseek(fd, start, os.SEEK_SET)
        chunk = os.read(fd, end - start)
        newline = chunk.rfind(b"\n")
        if newline >= 0:
            keep = start + newline + 1
            if keep != size:
                log.warning("%s: cutting off a torn last record (%d bytes)", path, size - keep)
                os.ftruncate(fd, keep)
            return keep
        end = start
    raise SessionCorrupt(f"{path}: no complete header line")


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(tmp, path)
    except BaseException:
        with suppress(OSError):
            os.unlink(tmp)
        raise


def _parse_sidecar(data: bytes, session_id: str) -> SessionSummary:
    try:
        return _sidecar_summary(json.loads(data), session_id)
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"malformed summary: {exc!r}") from None


def _sidecar_summary(d: Any, session_id: str) -> SessionSummary:
    if not isinstance(d, dict) or d.get("kind") != "summary":
        raise ValueError("not a session summary")
    if d.get("v") != SUMMARY_VERSION:
        raise ValueError(f"summary format version {d.get('v')!r}, expected {SUMMARY_VERSION}")
    roots = d["additional_roots"]
    title = d.get("title")
    origin = d.get("origin")
    archived = d.get("archived", False)
    updated = _canonical_time(d["updated_at"])
    summary = SessionSummary(
        d["session_id"], d["cwd"], tuple(roots), title, d["created_at"], updated or "", origin,
        archived,
    )  # fmt: skip
    if (
        summary.session_id != session_id
        or type(summary.cwd) is not str
        or type(summary.created_at) is not str
        or not (title is None or type(title) is str)
        or not (origin is None or type(origin) is str)
        or type(archived) is not bool
        or not all(type(root) is str for root in roots)
        or updated is None
    ):
        raise ValueError("wrong field types")
    return summary


def _canonical_time(value: object) -> str | None:
    """An ISO 8601 time as `utc_now()` writes it (naive means UTC); None if not one."""
    if type(value) is not str:
        return None
    if _OWN_TIME.fullmatch(value):
        return value  # our own format: parsing each of a thousand sidecars is wasted time
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _sorts_after(summary: SessionSummary, updated_at: str, session_id: str) -> bool:
    """Whether `summary` comes after the item (`updated_at`, `session_id`) in list order."""
    if summary.updated_at == updated_at:
        return summary.session_id > session_id
    return summary.updated_at < updated_at


def _make_cursor(summary: SessionSummary) -> str:
    raw = json.dumps([summary.updated_at, summary.session_id], separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _read_cursor(cursor: str) -> tuple[str, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        value = json.loads(raw)
    except (binascii.Error, ValueError):
        value = None
    if (
        isinstance(value, list)
        and len(value) == 2
        and all(isinstance(item, str) for item in value)
        and _canonical_time(value[0]) == value[0]
    ):
        return value[0], value[1]
    raise ValueError(f"malformed cursor {cursor[:40]!r}: pass back a nextCursor from session/list")


__all__ = [
    "APP_NAME",
    "MIN_SECRET_LENGTH",
    "REDACTED",
    "LogWriter",
    "SessionLog",
    "SessionStore",
    "SessionSummary",
    "default_state_dir",
]
