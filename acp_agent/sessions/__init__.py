"""Sessions: each session's whole life.

session.py     Session: cwd, roots, choices, history, permissions, usage, prompt queue
manager.py     SessionManager: the one facade over the four parts below
lifecycle.py   new, load, resume, fork, close, delete, list
queue.py       a prompt's place in its session's queue, its turn run there, cancels
choices.py     the model, mode and thought level
commands.py    the slash commands: a table of ours, then the MCP servers' prompts
live.py        the live sessions, bounded: idle ones let go and opened again on use; each
               entry owns its session's log (the others write through `Live.writer`)
turns.py       TurnRunner: one prompt turn built, recorded and ended
compaction.py  the context summarised when it fills up
servers.py     the session's MCP servers; mcp_tools.py adapts their tools
store.py       the append-only log per session, one writer (records.py: what a line holds,
               codec.py: how, derived from the dataclasses; redaction.py: the secrets cut
               out of it)
recorder.py    what a turn does, written as it happens; restore.py reads it back
channel.py     what a session needs from the editor (implemented by protocol/)
"""

from .session import Session

__all__ = ["Session"]
