"""Messages written one per JSON line, as ``delayline send-many`` reads them (pure).

Each line is an object of :meth:`delayline.Client.send`'s arguments: ``topic``,
``body`` (text) or ``body_b64``, at most one of ``delay`` (ms, or a duration
such as ``"30m"``), ``deliver_at`` (epoch ms, or text that
:func:`delayline.moments.parse_moment_ms` reads: RFC 3339 or epoch ms) and
``level``, and
optional ``key`` and ``headers``. Blank lines are skipped.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable, Iterator
from typing import Any

from delayline.errors import ValidationError
from delayline.model import SEND_ARGUMENTS
from delayline.moments import parse_moment_ms
from delayline.timing import parse_duration_ms

#: The keys a line may have: send's arguments, and the body as base64.
LINE_KEYS = SEND_ARGUMENTS | {"body_b64"}


def send_arguments(line: str) -> dict[str, Any]:
    """The ``send`` arguments of one line. Raises ValidationError for anything else."""
    try:
        item = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValidationError("line", "json", f"not JSON: {exc.msg}") from None
    if not isinstance(item, dict):
        raise ValidationError("line", "type", "each line must be a JSON object")
    unknown = sorted(set(item) - LINE_KEYS)
    if unknown:
        raise ValidationError(unknown[0], "unknown", f"unknown key {unknown[0]!r}")
    if "body_b64" in item:
        if "body" in item:
            raise ValidationError("body", "exclusive", "give body or body_b64, not both")
        try:
            item["body"] = base64.b64decode(str(item.pop("body_b64")), validate=True)
        except (binascii.Error, ValueError):
            raise ValidationError("body_b64", "base64", "body_b64 is not valid base64") from None
    if isinstance(item.get("delay"), str):
        item["delay"] = parse_duration_ms(item["delay"])
    if isinstance(item.get("deliver_at"), str):
        item["deliver_at"] = parse_moment_ms(item["deliver_at"], "deliver_at")
    return item


def numbered_arguments(lines: Iterable[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number from 1, send arguments) of each non-blank line. Raises
    ValidationError naming the line number of the first bad one."""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield number, send_arguments(line)
        except ValidationError as exc:
            raise ValidationError(exc.field, exc.rule, f"line {number}: {exc.message}") from exc
