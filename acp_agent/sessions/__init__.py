"""Sessions: each session's whole life.

session.py     Session: cwd, roots, choices, history, permissions, usage, prompt queue
manager.py     SessionManager: new, load, resume, fork, close, delete, list; commands
live.py        the live sessions, bounded: idle ones let go and opened again on use
turns.py       TurnRunner: one prompt turn built, recorded and ended
compaction.py  the context summarised when it fills up
servers.py     the session's MCP servers; mcp_tools.py adapts their tools
store.py       the append-only log per session, one writer (records.py: what a line holds;
               redaction.py: the secrets cut out of it)
recorder.py    what a turn does, written as it happens; restore.py reads it back
channel.py     what a session needs from the editor (implemented by protocol/)
"""

from .session import Session

__all__ = ["Session"]
