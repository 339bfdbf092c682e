"""How the scheduler stores the schedules of one wheel key: the one encoding of a list
of :class:`~delayline.schedules.runs.Armed` (pure).

A key holds every schedule whose address hashes to it: one, but for a chance
collision. The value is JSON, a line per schedule, each with its definition as
:meth:`~delayline.schedules.spec.Schedule.to_json` writes it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from delayline.schedules.runs import Armed
from delayline.schedules.spec import Schedule
from delayline.validation import Limits

#: The state's format version.
STATE_VERSION = 1
#: Limits a stored definition is read back with: it passed the producer's when it was
#: put, and a scheduler started later with smaller ones must still read it.
STORED = Limits(max_body_bytes=2**32, max_headers_bytes=2**32, max_delay_ms=2**62)


def encode(schedules: Sequence[Armed]) -> bytes:
    """The stored value of a key's schedules (empty: none)."""
    return b"\n".join(
        json.dumps(
            {
                "v": STATE_VERSION,
                "definition": armed.schedule.to_json(),
                "version": armed.version,
                "next_run_ms": armed.next_run_ms,
                "handed_until_ms": armed.handed_until_ms,
                "runs": armed.runs,
                "skipped": armed.skipped,
                "counted_until_ms": armed.counted_until_ms,
            },
            separators=(",", ":"),
        ).encode()
        for armed in schedules
    )


def decode(value: bytes) -> list[Armed]:
    """The inverse of :func:`encode`. Raises ValueError for a value it did not write."""
    return [decode_line(line) for line in value.splitlines()]


def addresses(value: bytes) -> Iterator[tuple[tuple[str, str], bytes]]:
    """Each schedule's ``(topic, name)`` in a stored value, with its line for
    :func:`decode_line`: a listing picks its schedules by address before it decodes
    and checks their definitions. Raises ValueError for a value :func:`encode` did not
    write."""
    for line in value.splitlines():
        definition = json.loads(_fields(line)["definition"])
        yield (definition["topic"], definition["name"]), line


def decode_line(line: bytes) -> Armed:
    """One schedule of a stored value (a line of it). Raises ValueError for a line
    :func:`encode` did not write."""
    data = _fields(line)
    return Armed(
        schedule=Schedule.from_json(data["definition"], STORED),
        version=data["version"],
        next_run_ms=data["next_run_ms"],
        handed_until_ms=data["handed_until_ms"],
        runs=data["runs"],
        skipped=data["skipped"],
        counted_until_ms=data["counted_until_ms"],
    )


def _fields(line: bytes) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(line)
    if data.get("v") != STATE_VERSION:
        raise ValueError(f"a schedule's state has format {data.get('v')!r}, not 1")
    return data
