"""Sessions: per-session state and the running turn (in memory for now)."""

from .session import Session

__all__ = ["Session"]
