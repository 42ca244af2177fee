"""Secret values cut out of every line the session store writes.

The secrets come from a source consulted as each line is written, not once at start-up:
a key stored with `acp-agent login` while the agent runs is a secret from then on. The
source that reads them (`child_env.agent_secrets`, which reads the credentials file and
the keyring) is too slow to run for every line, so `changing_with` calls it again only
when the credentials file changed. A secret once seen stays one for the life of the
process: a key the user logged out of is still their key.

Values shorter than `MIN_SECRET_LENGTH` are ignored (they would redact ordinary words).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Final, TypeAlias

log = logging.getLogger(__name__)

REDACTED: Final = "[redacted]"
MIN_SECRET_LENGTH: Final = 8

SecretSource: TypeAlias = Callable[[], Iterable[str]]
"""The secrets as they are now."""


class Redactor:
    """Replaces secret values in a JSON line, keeping the line valid JSON."""

    def __init__(self, secrets: Iterable[str] | SecretSource) -> None:
        self._source = secrets if callable(secrets) else None
        self._secrets: list[str] = []
        self._needles: list[str] = []
        self._failing = False
        self._learn(() if callable(secrets) else secrets)

    def line(self, line: str) -> str:
        self._refresh()
        if not any(needle in line for needle in self._needles):
            return line
        try:
            clean = json.dumps(
                self._walk(json.loads(line)), ensure_ascii=False, separators=(",", ":")
            )
        except ValueError:
            clean = line
        for needle in self._needles:  # what is left (in a number, say) goes, valid or not
            clean = clean.replace(needle, REDACTED)
        return clean

    def lines(self, data: bytes) -> bytes:
        """Each complete line of `data` (JSON lines, every one ending in a newline)."""
        self._refresh()
        if not self._needles:
            return data
        return b"".join(
            (self.line(line.decode("utf-8", "replace")) + "\n").encode("utf-8")
            for line in data.split(b"\n")[:-1]
        )

    def _refresh(self) -> None:
        if self._source is None:
            return
        try:
            current = self._source()
        except Exception as exc:  # a broken credentials file must not stop a line being written
            if not self._failing:
                log.warning("the secrets to redact could not be read (%s): using those known", exc)
            self._failing = True
            return
        self._failing = False
        self._learn(current)

    def _learn(self, secrets: Iterable[str]) -> None:
        known = set(self._secrets)
        new = {s for s in secrets if len(s) >= MIN_SECRET_LENGTH and s not in known}
        if not new:
            return
        # longest first, so a secret containing another is replaced whole
        self._secrets = sorted(known | new, key=len, reverse=True)
        # how each appears inside a JSON string (quotes, backslashes, controls escaped)
        self._needles = [json.dumps(s, ensure_ascii=False)[1:-1] for s in self._secrets]

    def _walk(self, value: Any) -> Any:
        if isinstance(value, str):
            for secret in self._secrets:
                value = value.replace(secret, REDACTED)
            return value
        if isinstance(value, dict):
            return {self._walk(k): self._walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._walk(item) for item in value]
        return value


def changing_with(path: Path, compute: SecretSource) -> SecretSource:
    """`compute` as a source called again only when `path` was written, replaced or
    removed since the last call (one `stat` per line written)."""
    seen: tuple[int, int, int] | None = None
    cached: list[str] = []

    def secrets() -> list[str]:
        nonlocal seen, cached
        try:
            info = os.stat(path)
            stamp = (info.st_ino, info.st_mtime_ns, info.st_size)
        except OSError:
            stamp = (0, 0, 0)
        if stamp != seen:
            cached, seen = list(compute()), stamp
        return cached

    return secrets


__all__ = ["MIN_SECRET_LENGTH", "REDACTED", "Redactor", "SecretSource", "changing_with"]
