"""A recurring schedule's definition: what it sends, when, and what it does with runs
it missed; its validation, and its one JSON encoding (pure).

A schedule is named, and its name is unique within its topic: ``(topic, name)``
is its address, and a definition put again under it replaces the old one. Its
runs follow one recurrence (:mod:`delayline.schedules.recurrence`), cut to
``[start_ms, end_ms]`` and to ``max_runs`` runs. A run is *missed* when the
scheduler reaches it only after its time: delayline was down for longer than the
horizon, or the schedule was paused. The catch-up policy says what becomes of
missed runs:

- ``skip``: none is sent; the schedule goes on with its next run;
- ``latest`` (the default, as NATS and Celery beat do): the latest missed run is
  sent at once, the others are not;
- ``all``: each missed run within ``window_ms`` of the moment they are caught
  up is sent at once, in order, at most ``max_runs`` of them (the latest ones).

Runs not sent are counted as skipped.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from delayline.errors import DecodeError, ValidationError, quoted
from delayline.schedules.recurrence import (
    Cron,
    Every,
    Recurrence,
    parse_cron,
    parse_every,
    parse_times,
)
from delayline.timing import format_duration, format_time
from delayline.validation import (
    Limits,
    validate_body,
    validate_headers,
    validate_key,
    validate_topic,
)

#: The definition format this code writes and reads.
SPEC_VERSION = 1

SKIP = "skip"
LATEST = "latest"
ALL = "all"
#: The catch-up policies, by name.
CATCH_UP_POLICIES = (SKIP, LATEST, ALL)
#: How far back ``all`` reaches by default (ms): an hour.
CATCH_UP_WINDOW_MS = 3_600_000
#: How many missed runs ``all`` sends at most by default.
CATCH_UP_MAX_RUNS = 100
#: The most missed runs ``all`` may be told to send.
CATCH_UP_MAX_RUNS_LIMIT = 10_000

_NAME_PATTERN = re.compile(r"[A-Za-z0-9._:-]{1,200}")


@dataclass(frozen=True)
class CatchUp:
    """What becomes of missed runs: ``policy`` is one of CATCH_UP_POLICIES;
    ``window_ms`` and ``max_runs`` bound ``all``."""

    policy: str = LATEST
    window_ms: int = CATCH_UP_WINDOW_MS
    max_runs: int = CATCH_UP_MAX_RUNS

    @classmethod
    def create(
        cls, policy: object = LATEST, window_ms: object = None, max_runs: object = None
    ) -> CatchUp:
        """A checked policy. Raises ValidationError (field ``catch_up``)."""
        if policy not in CATCH_UP_POLICIES:
            raise ValidationError(
                "catch_up",
                "policy",
                f"catch_up must be one of {', '.join(CATCH_UP_POLICIES)}; got {quoted(policy)}",
            )
        window = CATCH_UP_WINDOW_MS if window_ms is None else window_ms
        most = CATCH_UP_MAX_RUNS if max_runs is None else max_runs
        if not isinstance(window, int) or isinstance(window, bool) or window < 0:
            raise ValidationError(
                "catch_up_window", "range", "catch_up_window must be a duration of 0 ms or more"
            )
        if (
            not isinstance(most, int)
            or isinstance(most, bool)
            or not 1 <= most <= CATCH_UP_MAX_RUNS_LIMIT
        ):
            raise ValidationError(
                "catch_up_max_runs",
                "range",
                f"catch_up_max_runs must be from 1 to {CATCH_UP_MAX_RUNS_LIMIT}; "
                f"got {quoted(most)}",
            )
        return cls(str(policy), window, most)


def validate_name(name: object) -> str:
    """Return ``name`` if it is 1-200 characters of ``[A-Za-z0-9._:-]``."""
    if not isinstance(name, str) or not _NAME_PATTERN.fullmatch(name):
        raise ValidationError(
            "name",
            "pattern",
            f"a schedule's name must be 1-200 characters of [A-Za-z0-9._:-], got {quoted(name)}",
        )
    return name


@dataclass(frozen=True)
class Schedule:
    """A checked definition. Times are epoch ms; ``None`` bounds are open."""

    topic: str
    name: str
    body: bytes
    recurrence: Recurrence
    key: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    start_ms: int | None = None
    end_ms: int | None = None
    max_runs: int | None = None
    paused: bool = False
    catch_up: CatchUp = CatchUp()

    @classmethod
    def create(
        cls,
        topic: object,
        name: object,
        body: object,
        recurrence: Recurrence,
        *,
        limits: Limits,
        key: object = None,
        headers: object = None,
        start_ms: int | None = None,
        end_ms: int | None = None,
        max_runs: object = None,
        paused: bool = False,
        catch_up: CatchUp | None = None,
    ) -> Schedule:
        """A definition checked as a message is (topic, body, key and headers under
        ``limits``), with ``start_ms <= end_ms`` and ``max_runs >= 1``. Raises
        ValidationError naming the field."""
        if start_ms is not None and end_ms is not None and end_ms < start_ms:
            raise ValidationError("end", "order", "a schedule's end comes before its start")
        if max_runs is not None and (
            not isinstance(max_runs, int) or isinstance(max_runs, bool) or max_runs < 1
        ):
            raise ValidationError(
                "max_runs", "range", f"max_runs must be 1 or more; got {quoted(max_runs)}"
            )
        return cls(
            topic=validate_topic(topic),
            name=validate_name(name),
            body=validate_body(body, limits),
            recurrence=recurrence,
            key=validate_key(key),
            headers=validate_headers(headers, limits),
            start_ms=start_ms,
            end_ms=end_ms,
            max_runs=max_runs,
            paused=paused,
            catch_up=catch_up or CatchUp(),
        )

    @property
    def address(self) -> tuple[str, str]:
        """``(topic, name)``: what identifies the schedule."""
        return self.topic, self.name

    @property
    def zone(self) -> str:
        """The IANA zone of the schedule's wall clock: a cron's ``tz``; UTC for ``every``
        and ``times``, which are instants."""
        return self.recurrence.tz if isinstance(self.recurrence, Cron) else "UTC"

    def within_bounds(self, run_ms: int) -> bool:
        """Whether a run at ``run_ms`` lies within ``[start_ms, end_ms]``."""
        return (self.start_ms is None or run_ms >= self.start_ms) and (
            self.end_ms is None or run_ms <= self.end_ms
        )

    def to_json(self) -> str:
        """The definition's one encoding: compact JSON, the body in base64."""
        return json.dumps(
            {
                "v": SPEC_VERSION,
                "topic": self.topic,
                "name": self.name,
                "body": base64.b64encode(self.body).decode(),
                "key": self.key,
                "headers": dict(self.headers),
                "recurrence": recurrence_to_dict(self.recurrence),
                "start_ms": self.start_ms,
                "end_ms": self.end_ms,
                "max_runs": self.max_runs,
                "paused": self.paused,
                "catch_up": {
                    "policy": self.catch_up.policy,
                    "window_ms": self.catch_up.window_ms,
                    "max_runs": self.catch_up.max_runs,
                },
            },
            separators=(",", ":"),
        )

    def to_view(self) -> dict[str, Any]:
        """The definition as a person reads it, in the terms that the HTTP API and the CLI
        take (not an encoding to store): times in RFC 3339 (UTC), durations such as
        ``15m``, the body as text, or as ``body_b64`` unless it is UTF-8; absent values
        left out."""
        view: dict[str, Any] = {"topic": self.topic, "name": self.name}
        try:
            view["body"] = self.body.decode("utf-8")
        except UnicodeDecodeError:
            view["body_b64"] = base64.b64encode(self.body).decode()
        if self.key is not None:
            view["key"] = self.key
        view["headers"] = dict(self.headers)
        recurrence = self.recurrence
        if isinstance(recurrence, Cron):
            view.update(cron=recurrence.expression, tz=recurrence.tz)
        elif isinstance(recurrence, Every):
            view["every"] = format_duration(recurrence.period_ms)
            view["anchor"] = format_time(recurrence.anchor_ms)
        else:
            view["times"] = [format_time(time_ms) for time_ms in recurrence.times_ms]
        bounds = {"start": self.start_ms, "end": self.end_ms}
        view.update({name: format_time(ms) for name, ms in bounds.items() if ms is not None})
        if self.max_runs is not None:
            view["max_runs"] = self.max_runs
        view["paused"] = self.paused
        view["catch_up"] = self.catch_up.policy
        view["catch_up_window"] = format_duration(self.catch_up.window_ms)
        view["catch_up_max_runs"] = self.catch_up.max_runs
        return view

    @classmethod
    def from_json(cls, text: str | bytes, limits: Limits) -> Schedule:
        """Parse and check a definition that :meth:`to_json` wrote (or a producer wrote
        by hand). Raises DecodeError for what is not one, ValidationError for a
        definition that breaks a rule."""
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise DecodeError(f"a schedule's definition is not JSON: {exc}") from None
        if not isinstance(data, dict) or data.get("v") != SPEC_VERSION:
            raise DecodeError(
                f"a schedule's definition must be a JSON object with v={SPEC_VERSION}"
            )
        try:
            body = base64.b64decode(data.get("body") or "", validate=True)
        except ValueError:
            raise ValidationError("body", "base64", "a definition's body must be base64") from None
        catch_up = data.get("catch_up") or {}
        if not isinstance(catch_up, dict):
            raise ValidationError("catch_up", "type", "catch_up must be an object")
        return cls.create(
            data.get("topic"),
            data.get("name"),
            body,
            recurrence_from_dict(data.get("recurrence")),
            limits=limits,
            key=data.get("key"),
            headers=data.get("headers"),
            start_ms=_optional_ms(data, "start_ms"),
            end_ms=_optional_ms(data, "end_ms"),
            max_runs=data.get("max_runs"),
            paused=data.get("paused") is True,
            catch_up=CatchUp.create(
                catch_up.get("policy", LATEST), catch_up.get("window_ms"), catch_up.get("max_runs")
            ),
        )


def recurrence_to_dict(recurrence: Recurrence) -> dict[str, Any]:
    """A recurrence as JSON-ready data: exactly one of ``cron``, ``every_ms``, ``times_ms``."""
    if isinstance(recurrence, Cron):
        return {"cron": recurrence.expression, "tz": recurrence.tz}
    if isinstance(recurrence, Every):
        return {"every_ms": recurrence.period_ms, "anchor_ms": recurrence.anchor_ms}
    return {"times_ms": list(recurrence.times_ms)}


def recurrence_from_dict(data: object) -> Recurrence:
    """The inverse of :func:`recurrence_to_dict`. Raises ValidationError."""
    if not isinstance(data, dict):
        raise ValidationError("recurrence", "type", "a schedule needs cron, every or times")
    given = [name for name in ("cron", "every_ms", "times_ms") if data.get(name) is not None]
    if len(given) != 1:
        raise ValidationError(
            "recurrence", "one_of", "a schedule takes exactly one of cron, every and times"
        )
    if given == ["cron"]:
        return parse_cron(data["cron"], data.get("tz") or "UTC")
    if given == ["every_ms"]:
        return parse_every(data["every_ms"], _optional_ms(data, "anchor_ms") or 0)
    times = data["times_ms"]
    if not isinstance(times, list) or not all(_is_ms(t) for t in times):
        raise ValidationError("times", "type", "times must be a list of epoch ms")
    return parse_times(times)


def _is_ms(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _optional_ms(data: Mapping[str, Any], name: str) -> int | None:
    value = data.get(name)
    if value is None:
        return None
    if not _is_ms(value):
        raise ValidationError(name, "type", f"{name} must be an integer of epoch ms")
    return int(value)
