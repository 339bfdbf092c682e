"""Times given as text: the one parser behind the CLI, the HTTP API and send-many's lines.

Three forms, and nothing else:

- **RFC 3339** (section 5.6 ``date-time``): ``2026-12-01T09:00:00Z``,
  ``2026-12-01T14:30:00.250+05:30``. Seconds and an offset (``Z`` or ``+hh:mm``/
  ``-hh:mm``) are required; the separator may be ``T``, ``t`` or a space and the
  UTC mark ``Z`` or ``z``, as the RFC allows. Any number of fraction digits; a
  fraction finer than a millisecond rounds up, so a message is never early. A
  leap second (``23:59:60`` UTC on a month's last day) means the midnight that
  follows it, the first instant epoch ms can name after it. ISO 8601's other
  forms (week dates ``2026-W50-1``, ordinal dates ``2026-335``, no seconds, no
  offset) are refused.
- **Epoch ms**: ASCII digits only, ``1796115600000``.
- **A duration from now** (``90s``, ``2h``, ``1h30m``, as
  :func:`delayline.timing.parse_duration_ms` reads them), only where the caller
  passes ``now_ms``: a window's ``from`` and ``to``. A due time (``deliver_at``,
  ``--at``) is absolute; its relative twin is ``delay``.

Surrounding whitespace is ignored. Every refusal is a ValidationError naming the
field, whose message shows a valid example.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from delayline.errors import ValidationError, quoted
from delayline.timing import EPOCH, LAST_MS, in_range_ms, parse_duration_ms

_RFC3339 = re.compile(
    r"(?P<date>[0-9]{4}-[0-9]{2}-[0-9]{2})[Tt ]"
    r"(?P<hour>[0-9]{2}):(?P<minute>[0-9]{2}):(?P<second>[0-9]{2})(?:\.(?P<fraction>[0-9]+))?"
    r"(?:(?P<utc>[Zz])|(?P<sign>[+-])(?P<offset_hours>[0-9]{2}):(?P<offset_minutes>[0-9]{2}))?"
)
EPOCH_MS = re.compile(r"[0-9]+")
_DAY_MS = 86_400_000
#: The examples an error shows.
_ABSOLUTE = "RFC 3339 (2026-12-01T09:00:00Z) or epoch ms (1796115600000)"
_RELATIVE = "RFC 3339 (2026-12-01T09:00:00Z), epoch ms (1796115600000) or a duration from now (2h)"


def parse_moment_ms(text: str, field: str, *, now_ms: int | None = None) -> int:
    """Epoch ms of ``text``: RFC 3339 or epoch ms; also a duration after ``now_ms``
    (epoch ms) when it is given. See the module's docstring for the forms.

    Raises ValidationError naming ``field``: rule ``timezone`` for a date-time
    without an offset, ``range`` for a time after 9999-12-31T23:59:59.999Z, and
    ``rfc3339`` for anything else.
    """
    forms = _ABSOLUTE if now_ms is None else _RELATIVE
    stripped = text.strip()
    if EPOCH_MS.fullmatch(stripped):
        # Cut before int(): a long run of digits would cost time, then raise.
        digits = stripped.lstrip("0") or "0"
        return in_range_ms(LAST_MS + 1 if len(digits) > len(str(LAST_MS)) else int(digits), field)
    if now_ms is not None:
        try:
            return in_range_ms(now_ms + parse_duration_ms(stripped), field)
        except ValidationError:
            pass  # not a duration: one of the absolute forms, or nothing
    parts = _RFC3339.fullmatch(stripped)
    if parts is None:
        raise ValidationError(field, "rfc3339", f"{field} {quoted(text)} is not {forms}")
    if parts["utc"] is None and parts["sign"] is None:
        raise ValidationError(
            field,
            "timezone",
            f"{field} {quoted(text)} has no timezone offset; add Z or +hh:mm "
            "(2026-12-01T09:00:00Z)",
        )
    try:
        epoch_ms = _rfc3339_ms(parts)
    except (ValueError, OverflowError):  # no such day, hour, minute, second or offset
        raise ValidationError(
            field, "rfc3339", f"{field} {quoted(text)} is not a valid time; give {forms}"
        ) from None
    return in_range_ms(epoch_ms, field)


def _rfc3339_ms(parts: re.Match[str]) -> int:
    """Epoch ms of a matched RFC 3339 date-time. Raises ValueError for a date or time
    that does not exist."""
    second = int(parts["second"])
    if second > 60:
        raise ValueError(second)
    # A day and a time with :60 read as :59; the leap second is added back below.
    local = datetime.fromisoformat(parts["date"]).replace(
        hour=int(parts["hour"]), minute=int(parts["minute"]), second=min(second, 59), tzinfo=UTC
    )
    offset_minutes = 0
    if parts["sign"] is not None:
        hours, minutes = int(parts["offset_hours"]), int(parts["offset_minutes"])
        if hours > 23 or minutes > 59:
            raise ValueError(parts["offset_hours"], parts["offset_minutes"])
        offset_minutes = (hours * 60 + minutes) * (-1 if parts["sign"] == "-" else 1)
    epoch_ms = (local - EPOCH) // timedelta(milliseconds=1) - offset_minutes * 60_000
    if second == 60:
        # Epoch ms has no name for the leap second: its end, the next midnight (UTC),
        # is the first instant after it, so a message is never early.
        midnight_ms = epoch_ms + 1_000
        if midnight_ms % _DAY_MS or (
            midnight_ms <= LAST_MS and (EPOCH + timedelta(milliseconds=midnight_ms)).day != 1
        ):
            raise ValueError("a leap second ends a month, at 23:59:60 UTC")
        return midnight_ms
    fraction = parts["fraction"] or ""
    # Round up, by the digits alone: the fraction may be thousands of digits long.
    fraction_ms = int(fraction[:3].ljust(3, "0")) + (1 if fraction[3:].strip("0") else 0)
    return epoch_ms + fraction_ms
