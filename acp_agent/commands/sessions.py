"""`acp-agent sessions`: the stored sessions, listed, shown, deleted and pruned.

    acp-agent sessions list [--cwd DIR] [--json]
    acp-agent sessions show ID
    acp-agent sessions delete ID...
    acp-agent sessions prune [--older-than 30d] [--keep N] [--origin run|editor] [--dry-run]

The store is the one the agent writes (the config's `state_dir`); a session open in a live
agent is never deleted or pruned, and says so. `prune` with no rule applies the config's
`session_retention_days`, as the agent does when it starts. Exit 0: done; 1: something
asked for could not be done (an unknown id, a session open elsewhere); 2: bad usage or a
bad config.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, TextIO

from ._common import EXIT_FAILED, EXIT_OK, EXIT_USAGE

if TYPE_CHECKING:
    from ..sessions.records import Record
    from ..sessions.store import SessionStore, SessionSummary
    from ._common import Subcommands

RESULT_LINES = 3
"""Of a tool's result, the lines `show` prints (the log keeps it all)."""


class CommandFailed(Exception):
    """One line for stderr, and exit 1."""


class BadConfig(Exception):
    """The config's errors, one per line, and exit 2 (as `models` does)."""


# --- the command line ------------------------------------------------------------------------


def add_sessions_commands(commands: Subcommands, common: Sequence[argparse.ArgumentParser]) -> None:
    sessions = commands.add_parser(
        "sessions",
        parents=list(common),
        help="list, show, delete or prune the stored sessions",
        description="The sessions the agent stored (editor sessions and `acp-agent run` "
        "runs). A session open in a running agent is never deleted.",
    )
    actions = sessions.add_subparsers(dest="sessions_command", metavar="ACTION", required=True)
    listing = actions.add_parser(
        "list", parents=list(common), help="the stored sessions, most recently active first"
    )
    # Not `dest="cwd"`: that name is `run`'s, which the top-level parser also reads.
    listing.add_argument(
        "--cwd", dest="directory", metavar="DIR", help="only the sessions of this directory"
    )
    listing.add_argument("--json", action="store_true", help="print JSON instead of a table")
    show = actions.add_parser(
        "show", parents=list(common), help="print a session's conversation as text"
    )
    show.add_argument("session_id", metavar="ID")
    delete = actions.add_parser("delete", parents=list(common), help="remove stored sessions")
    delete.add_argument("session_ids", nargs="+", metavar="ID")
    prune = actions.add_parser(
        "prune",
        parents=list(common),
        help="remove old sessions (default: session_retention_days of the config)",
        description="Remove the sessions inactive for longer than --older-than that are not "
        "among the --keep most recent, and never-prompted leftovers. With neither rule: "
        "the config's session_retention_days.",
    )
    prune.add_argument("--older-than", metavar="AGE", help="e.g. 30d, 12h, 2w, 90m")
    prune.add_argument("--keep", type=_count, metavar="N", help="keep the N most recent")
    prune.add_argument(
        "--origin", choices=("run", "editor"), help="only `acp-agent run` runs, or editors'"
    )
    prune.add_argument("--dry-run", action="store_true", help="say what would go; remove none")


def sessions_command(args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = sys.stdout if out is None else out
    from ..sessions.errors import StoreError

    try:
        store, retention = _open_store(getattr(args, "config", None))
        match args.sessions_command:
            case "list":
                return _list(store, args, out)
            case "show":
                return _show(store, args.session_id, out)
            case "delete":
                return _delete(store, args.session_ids, out)
            case _:
                return _prune(store, args, retention, out)
    except CommandFailed as exc:
        print(f"acp-agent sessions: {exc}", file=sys.stderr, flush=True)
        return EXIT_FAILED
    except BadConfig as exc:
        print(f"acp-agent: {exc}", file=sys.stderr, flush=True)
        return EXIT_USAGE
    except StoreError as exc:
        print(f"acp-agent sessions: {exc}", file=sys.stderr, flush=True)
        return EXIT_FAILED


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"not a count of sessions: {text!r}")
    return value


def _open_store(config_option: str | None) -> tuple[SessionStore, int]:
    """The store the agent writes, and the config's retention in days."""
    from .. import paths
    from ..config import ConfigError, load_config
    from ..sessions.store import SessionStore

    try:
        config = load_config(config_option, os.environ)
    except ConfigError as exc:
        raise BadConfig(str(exc)) from None
    return SessionStore(paths.state_dir(config.state_dir)), config.session_retention_days


# --- list ------------------------------------------------------------------------------------


def _list(store: SessionStore, args: argparse.Namespace, out: TextIO) -> int:
    summaries = store.summaries()
    if args.directory is not None:
        wanted = os.path.normpath(os.path.abspath(args.directory))
        summaries = [s for s in summaries if os.path.normpath(s.cwd) == wanted]
    rows = [(s, store.holder(s.session_id)) for s in summaries]
    if args.json:
        json.dump([_as_json(s, holder) for s, holder in rows], out, indent=2, ensure_ascii=False)
        out.write("\n")
        return EXIT_OK
    if not rows:
        where = f" in {args.directory}" if args.directory is not None else ""
        print(f"No stored sessions{where} ({store.sessions_dir}).", file=out)
        return EXIT_OK
    width = max(len(s.session_id) for s, _ in rows)
    print(f"{'ID':<{width}}  {'UPDATED':<16}  {'ORIGIN':<7}  TITLE (CWD)", file=out)
    for summary, holder in rows:
        title = summary.title or "(untitled)"
        origin = _origin(summary) + ("*" if holder is not None else "")
        print(
            f"{summary.session_id:<{width}}  {_local(summary.updated_at):<16}  "
            f"{origin:<7}  {title} ({summary.cwd})",
            file=out,
        )
    if any(holder is not None for _, holder in rows):
        print("* open in a running agent", file=out)
    return EXIT_OK


def _as_json(summary: SessionSummary, holder: int | None) -> dict[str, Any]:
    return {
        "sessionId": summary.session_id,
        "title": summary.title,
        "cwd": summary.cwd,
        "additionalDirectories": list(summary.additional_roots),
        "createdAt": summary.created_at,
        "updatedAt": summary.updated_at,
        "origin": _origin(summary),
        "open": holder is not None,
    }


def _origin(summary: SessionSummary) -> str:
    from ..sessions.records import ORIGIN_RUN

    return "run" if summary.origin == ORIGIN_RUN else "editor"


def _local(stamp: str) -> str:
    """A stored UTC time in the user's time zone, to the minute."""
    try:
        moment = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return stamp
    return moment.astimezone().strftime("%Y-%m-%d %H:%M")


# --- show ------------------------------------------------------------------------------------


def _show(store: SessionStore, session_id: str, out: TextIO) -> int:
    from ..sessions.errors import SessionNotFound

    try:
        records = store.read(session_id)
    except SessionNotFound:
        raise CommandFailed(_unknown(store, session_id)) from None
    for line in transcript(records):
        print(line, file=out)
    return EXIT_OK


def transcript(records: Sequence[Record]) -> list[str]:
    """The conversation as plain lines: a heading, then `user:`, `assistant:`, `tool:`."""
    from ..sessions.records import (
        MessageRecord,
        SessionHeader,
        TitleRecord,
        TurnEndRecord,
    )

    header = records[0]
    assert isinstance(header, SessionHeader)
    titles = [r.title for r in records if isinstance(r, TitleRecord)]
    origin = "acp-agent run" if header.origin == "run" else "editor"
    lines = [
        f"session {header.session_id}: {titles[-1] if titles else '(untitled)'}",
        f"  {origin} in {header.cwd}, started {_local(header.created_at)}",
    ]
    for record in records[1:]:
        match record:
            case MessageRecord(message=message):
                lines.extend(_message_lines(message))
            case TurnEndRecord(stop_reason=reason) if reason != "end_turn":
                lines.append(f"  (the turn ended: {reason.replace('_', ' ')})")
    return lines


def _message_lines(message: Any) -> list[str]:
    from ..messages import (
        DocumentPart,
        ImagePart,
        ResourceLinkPart,
        TextPart,
        ToolCallPart,
        ToolResultPart,
    )

    lines: list[str] = []
    text = "".join(p.text for p in message.parts if isinstance(p, TextPart)).strip()
    if text and message.role in ("user", "assistant"):
        lines.append("")
        lines.append(f"{message.role}: {_indented(text)}")
    for part in message.parts:
        match part:
            case ResourceLinkPart(uri=uri):
                lines.append(f"  [mention: {uri}]")
            case ImagePart() | DocumentPart():
                lines.append(f"  [{type(part).__name__.removesuffix('Part').lower()}]")
            case ToolCallPart(name=name, arguments=arguments):
                shown = json.dumps(arguments, ensure_ascii=False)
                lines.append(f"tool call: {name} {shown[:200]}")
            case ToolResultPart(is_error=failed):
                lines.append(f"  {'failed' if failed else 'result'}: {_first_lines(part.text)}")
    return lines


def _indented(text: str) -> str:
    return text.replace("\n", "\n  ")


def _first_lines(text: str) -> str:
    kept = text.strip().splitlines()
    shown = _indented("\n".join(kept[:RESULT_LINES])) or "(empty)"
    more = len(kept) - RESULT_LINES
    return shown + (f"\n    ... {more} more lines" if more > 0 else "")


def _unknown(store: SessionStore, session_id: str) -> str:
    return f"no stored session {session_id!r} in {store.sessions_dir} (see `sessions list`)"


# --- delete and prune ------------------------------------------------------------------------


def _delete(store: SessionStore, session_ids: Sequence[str], out: TextIO) -> int:
    from ..sessions.errors import SessionLocked, SessionNotFound

    failed = 0
    for session_id in session_ids:
        try:
            store.delete(session_id)
        except SessionNotFound:
            print(f"acp-agent sessions: {_unknown(store, session_id)}", file=sys.stderr)
            failed += 1
        except SessionLocked as exc:
            print(f"acp-agent sessions: not deleted: {exc}", file=sys.stderr)
            failed += 1
        else:
            print(f"Deleted {session_id}.", file=out)
    return EXIT_FAILED if failed else EXIT_OK


def _prune(store: SessionStore, args: argparse.Namespace, retention: int, out: TextIO) -> int:
    from ..sessions.retention import PrunePlan, due, parse_duration, prune

    try:
        older = parse_duration(args.older_than) if args.older_than is not None else None
    except ValueError as exc:
        print(f"acp-agent sessions prune: --older-than: {exc}", file=sys.stderr)
        return EXIT_USAGE
    rule = f"inactive over {args.older_than}" if older is not None else ""
    if older is None and args.keep is None:
        if retention == 0:
            print("session_retention_days is 0: sessions are kept forever.", file=out)
        else:
            older, rule = timedelta(days=retention), f"inactive over {retention} days"
    if args.keep is not None:
        rule = " and ".join(filter(None, [rule, f"not among the {args.keep} most recent"]))
    plan = PrunePlan(older_than=older, keep=args.keep, origin=args.origin)
    if args.dry_run:
        # `is not None`: `--older-than 0s` and `--keep 0` are rules too (both falsy).
        has_rule = older is not None or args.keep is not None
        going = due(store.summaries(), plan, datetime.now(UTC)) if has_rule else []
        for summary in going:
            print(f"Would delete {summary.session_id} ({summary.title or 'untitled'})", file=out)
        print(f"{_sessions(len(going))} {rule or 'due'}; none deleted (--dry-run).", file=out)
        return EXIT_OK
    report = prune(store, plan)
    for summary in report.removed:
        print(f"Deleted {summary.session_id} ({summary.title or 'untitled'})", file=out)
    for summary in report.locked:
        print(
            f"acp-agent sessions: kept {summary.session_id}: open in a running agent",
            file=sys.stderr,
        )
    what = f" ({rule}, or never prompted)" if rule else " (never prompted)"
    print(f"Deleted {_sessions(len(report.removed))}{what}.", file=out)
    return EXIT_OK


def _sessions(count: int) -> str:
    return f"{count} session" if count == 1 else f"{count} sessions"


__all__ = ["add_sessions_commands", "sessions_command", "transcript"]
