"""Sessions: each session's whole life.

session.py     Session: cwd, roots, choices, history, permissions, usage, prompt queue
manager.py     SessionManager: new, load, resume, fork, close, delete, list; commands
turns.py       TurnRunner: one prompt turn built, recorded and ended
compaction.py  the context summarised when it fills up
servers.py     the session's MCP servers; mcp_tools.py adapts their tools
store.py       the append-only log per session (records.py: what a line holds)
recorder.py    what a turn does, written as it happens; restore.py reads it back
channel.py     what a session needs from the editor (implemented by protocol/)
"""

from .session import Session

__all__ = ["Session"]
