"""How fast the session store reads a long session back and lists many sessions.

Builds, in a temporary directory, through the store's own writer:

- one session of 1,000 realistic turns: each a user prompt (record and replayed chunk), a
  merged thought and reply, an assistant message with thinking (signed), text and a tool
  call, the tool call's started / in-progress / completed events (a diff or a file excerpt),
  the tool result message, a final reply, usage records and the turn's end;
- 1,000 small sessions (a header, one short turn, a title, a sidecar).

Then times `SessionStore.read()` of the long log and `SessionStore.list()` (first page of
50, and a walk of every page) over the 1,000 sessions, median / min / max over the runs.
Targets (issue 8, measured end to end elsewhere): a load that replays a 1,000-turn session
answers within 1 s, so `read()` must take a small part of it; `session/list` over 1,000
sessions within 200 ms.

    uv run python benchmarks/store.py                 # 7 runs
    uv run python benchmarks/store.py --runs 15 --check

Standard library only (plus the project).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from acp_agent.messages import (
    DiffContent,
    Location,
    Message,
    MessageChunk,
    TextPart,
    ThinkingPart,
    ThoughtChunk,
    ToolCallPart,
    ToolCallStarted,
    ToolCallUpdated,
    ToolResultPart,
    UsageUpdated,
    UserMessageChunk,
)
from acp_agent.sessions.records import (
    EventRecord,
    MessageRecord,
    Record,
    SessionHeader,
    TitleRecord,
    TurnEndRecord,
    UsageRecord,
    utc_now,
)
from acp_agent.sessions.store import SessionStore

TARGET_READ_S = 0.5
"""`read()` of the 1,000-turn log: half the 1 s load budget (replay to the client is the rest)."""
TARGET_LIST_S = 0.2
SECRETS = ("sk-benchmark-secret-value-0123456789",)  # redaction on, as in real use

PROSE = (
    "The function reads the configuration once at start-up and caches it; the bug is that "
    "the cache key ignores the profile name, so switching profiles returns stale values. "
)
CODE = "".join(f"    line_{i} = compute(value_{i}, options)  # step {i}\n" for i in range(40))


def turn(n: int) -> list[Record]:
    """The records one turn writes, as the session manager will write them."""
    user_id, reply_id, final_id, call_id = f"u{n}", f"a{n}", f"f{n}", f"call_{n}"
    prompt = f"Turn {n}: please look at src/module_{n % 50}.py and fix the caching bug. " * 2
    thought = PROSE * 2
    reply = f"I'll read src/module_{n % 50}.py first. " + PROSE
    path = f"/home/dev/project/src/module_{n % 50}.py"
    edit = n % 2 == 1
    arguments = (
        {"path": path, "old": CODE[:400], "new": CODE[:400].replace("step", "stage")}
        if edit
        else {"path": path, "offset": 1, "limit": 40}
    )
    content = (
        (DiffContent(path, CODE[:400], CODE[:400].replace("step", "stage")),)
        if edit
        else (TextPart(CODE),)
    )
    final = "Done: the cache key now includes the profile name. " + PROSE
    return [
        MessageRecord(Message("user", [TextPart(prompt)]), user_id),
        EventRecord(UserMessageChunk(TextPart(prompt), user_id)),
        EventRecord(ThoughtChunk(thought, reply_id)),
        EventRecord(MessageChunk(reply, reply_id)),
        MessageRecord(
            Message(
                "assistant",
                [
                    ThinkingPart(thought, {"signature": "EqQBCkgIARABGAIiQ" * 12}),
                    TextPart(reply),
                    ToolCallPart(call_id, "edit_file" if edit else "read_file", arguments),
                ],
            ),
            reply_id,
        ),
        EventRecord(
            ToolCallStarted(
                call_id,
                f"{'Edit' if edit else 'Read'} {path}",
                "edit" if edit else "read",
                raw_input=arguments,
                locations=(Location(path, 1),),
            )
        ),
        EventRecord(ToolCallUpdated(call_id, status="in_progress")),
        EventRecord(ToolCallUpdated(call_id, status="completed", content=content)),
        UsageRecord(cost_usd=0.002 * n, used=2_000 + 40 * n, estimated=False),
        MessageRecord(
            Message("tool", [ToolResultPart(call_id, (TextPart(CODE if not edit else "ok"),))])
        ),
        EventRecord(MessageChunk(final, final_id)),
        MessageRecord(Message("assistant", [TextPart(final)]), final_id),
        UsageRecord(cost_usd=0.002 * n + 0.001, used=2_100 + 40 * n, estimated=False),
        EventRecord(UsageUpdated(2_100 + 40 * n, 200_000, 0.002 * n + 0.001)),
        TurnEndRecord("end_turn", utc_now()),
    ]


def build(directory: Path, turns: int, sessions: int) -> tuple[SessionStore, float]:
    store = SessionStore(directory / "long", secrets=SECRETS)
    started = time.perf_counter()
    log = store.create(SessionHeader("long", "/home/dev/project", (), utc_now()))
    for n in range(turns):
        for record in turn(n):
            log.append(record)
    log.close()
    write_s = time.perf_counter() - started

    many = SessionStore(directory / "many", secrets=SECRETS)
    for n in range(sessions):
        log = many.create(
            SessionHeader(f"session-{n:05d}", f"/home/dev/project-{n % 10}", (), utc_now())
        )
        for record in turn(n)[:4]:
            log.append(record)
        log.append(TitleRecord(f"Session {n}"))
        log.close()
    return store, write_s


def timed(call: Callable[[], object], runs: int) -> list[float]:
    call()  # warm the page cache and the interpreter
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return times


def walk_pages(store: SessionStore) -> int:
    count, cursor = 0, None
    while True:
        page, cursor = store.list(cursor=cursor, page_size=50)
        count += len(page)
        if cursor is None:
            return count


def report(name: str, times: list[float], target: float | None) -> bool:
    median = statistics.median(times)
    verdict = "" if target is None else ("  ok" if median <= target else "  MISSED")
    limit = "" if target is None else f"  (target <= {target * 1000:g} ms)"
    print(
        f"{name:<34} median {median * 1000:8.1f} ms   min {min(times) * 1000:8.1f}   "
        f"max {max(times) * 1000:8.1f}{limit}{verdict}"
    )
    return target is None or median <= target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="measured runs (default 7)")
    parser.add_argument("--turns", type=int, default=1_000)
    parser.add_argument("--sessions", type=int, default=1_000)
    parser.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")

    with tempfile.TemporaryDirectory(prefix="acp-store-bench-") as workdir:
        directory = Path(workdir)
        store, write_s = build(directory, args.turns, args.sessions)
        many = SessionStore(directory / "many", secrets=SECRETS)
        records = store.read("long")
        log_bytes = (store.sessions_dir / "long.jsonl").stat().st_size
        many_files = list(many.sessions_dir.iterdir())
        sidecars = [p for p in many_files if p.name.endswith(".meta.json")]
        assert walk_pages(many) == args.sessions

        print(f"python {sys.version.split()[0]}, {args.runs} runs after one warm-up")
        print(
            f"long session: {args.turns} turns, {len(records)} records, "
            f"{log_bytes / 1e6:.2f} MB ({log_bytes / len(records):.0f} B/record); "
            f"written in {write_s * 1000:.0f} ms ({write_s / len(records) * 1e6:.1f} us/append)"
        )
        print(
            f"many sessions: {args.sessions} logs of "
            f"{sum(p.stat().st_size for p in many_files if p.suffix == '.jsonl') / 1e6:.2f} MB, "
            f"{len(sidecars)} sidecars of "
            f"{sum(p.stat().st_size for p in sidecars) / len(sidecars):.0f} B each"
        )
        met = [
            report(f"read() {args.turns}-turn log", timed(lambda: store.read("long"), args.runs),
                   TARGET_READ_S),
            report(f"list() first page of {args.sessions}", timed(many.list, args.runs),
                   TARGET_LIST_S),
            report(f"list() every page of {args.sessions}",
                   timed(lambda: walk_pages(many), args.runs), None),
            report(f"list(cwd=...) of {args.sessions}",
                   timed(lambda: many.list(cwd="/home/dev/project-3"), args.runs), TARGET_LIST_S),
        ]  # fmt: skip
    return 1 if args.check and not all(met) else 0


if __name__ == "__main__":
    sys.exit(main())
