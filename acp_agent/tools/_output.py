"""A stream's head and tail: the first bytes and the last, whatever its length (a command's
output, shown to the model and kept for a background job)."""

from __future__ import annotations


class OutputCapture:
    """Keeps the first `head` and the last `tail` bytes of a stream of any length."""

    def __init__(self, head: int, tail: int) -> None:
        self._head_limit = head
        self._tail_limit = tail
        self._head = bytearray()
        self._tail = bytearray()
        self.total = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = self._head_limit - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        if data:
            self._tail += data
            del self._tail[: max(0, len(self._tail) - self._tail_limit)]

    @property
    def omitted(self) -> int:
        return self.total - len(self._head) - len(self._tail)

    def text(self) -> str:
        head = self._head.decode("utf-8", errors="replace")
        tail = self._tail.decode("utf-8", errors="replace")
        if not self.omitted:
            return head + tail
        return f"{head}\n[... {self.omitted} bytes omitted ...]\n{tail}"
