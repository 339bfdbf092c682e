"""Redis commands and replies as data, shared by the sans-IO plans and the code that
runs them (:mod:`delayline.redis.connection`). Pure: no I/O."""

from __future__ import annotations

from typing import Any

#: One Redis command: its name and arguments, as ``execute_command`` takes them.
Command = tuple[Any, ...]


def as_text(value: bytes | str) -> str:
    """A reply as text, whether the connection decodes replies or not."""
    return value.decode() if isinstance(value, bytes) else value
