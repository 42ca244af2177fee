"""A recording tap between an ACP client and the agent, for clients that keep no record of
the frames they exchange (acpx): the client starts `python frame_tap.py COMMAND [ARGS...]`
as its agent.

The tap starts COMMAND and relays the client's stdin to it and its stdout back, byte for
byte as they come; COMMAND's stderr is the tap's own (inherited). Each direction is copied
to a file of the directory `FRAME_TAP_DIR` names: `<pid>.from-client.jsonl` and
`<pid>.from-agent.jsonl` (pid: the tap's), and once the agent has exited and its stdout has
been relayed to the end, `<pid>.exit` holds its exit status. SIGTERM, SIGINT and SIGHUP go on
to the agent; the tap ends as the agent did.

Stdlib only, and `FRAME_TAP_DIR` is taken out of the agent's environment: the agent runs
as it would without the tap.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

RECORD_DIR_VARIABLE = "FRAME_TAP_DIR"
FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
CHUNK = 65536


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def relay(source: int, target: int, copy: int) -> None:
    """`source` to `target` as the bytes come, each chunk copied to `copy` first, until
    `source` ends; then `target` is closed, as the source's writer closed its end. A reader
    that went away closes `source`, so its writer learns it too (EPIPE)."""
    try:
        while chunk := os.read(source, CHUNK):
            write_all(copy, chunk)
            write_all(target, chunk)
    except BrokenPipeError:
        os.close(source)
        return
    os.close(target)


def record_file(path: Path) -> int:
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o600)


def end_as(status: int) -> int:
    """Exit as the agent did: with its code, or killed by the same signal."""
    if status < 0:
        signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
        return 128 - status
    return status


def main() -> int:
    record = Path(os.environ[RECORD_DIR_VARIABLE])
    pid = os.getpid()
    agent_env = {k: v for k, v in os.environ.items() if k != RECORD_DIR_VARIABLE}
    agent_stdin, to_agent = os.pipe()
    from_agent, agent_stdout = os.pipe()
    agent = subprocess.Popen(sys.argv[1:], stdin=agent_stdin, stdout=agent_stdout, env=agent_env)
    os.close(agent_stdin)
    os.close(agent_stdout)
    for number in FORWARDED_SIGNALS:
        signal.signal(number, lambda received, _frame: agent.send_signal(received))
    client_copy = record_file(record / f"{pid}.from-client.jsonl")
    agent_copy = record_file(record / f"{pid}.from-agent.jsonl")
    # The client's side is a daemon: it may still be waiting for input when the agent ends.
    threading.Thread(target=relay, args=(0, to_agent, client_copy), daemon=True).start()
    replies = threading.Thread(target=relay, args=(from_agent, 1, agent_copy))
    replies.start()
    replies.join()
    status = agent.wait()
    (record / f"{pid}.exit").write_text(str(status), encoding="utf-8")
    return end_as(status)


if __name__ == "__main__":
    sys.exit(main())
