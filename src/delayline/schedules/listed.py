"""A recurring schedule as a listing shows it: its definition and where its runs stand
at the moment of the scan; its JSON form, and its view for a person (pure).

The scheduler's state holds each schedule as an :class:`~delayline.schedules.runs.Armed`,
whose counts are of runs *handed over* to the outbox, a horizon ahead of their time.
A listing shows them as a user sees them at the scan's time ``read_at_ms``: runs
sent are those handed over whose time has come; the next run is the first one not
sent yet. A schedule put a moment ago is listed once the scheduler's next batch
has committed it: within about a second.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from zoneinfo import ZoneInfo

from delayline.schedules.runs import (
    MAX_RUNS_PER_FIRING,
    Armed,
    last_runs,
    preview,
    runs_in,
)
from delayline.schedules.spec import Schedule
from delayline.schedules.state import STORED
from delayline.timing import format_time, from_epoch_ms

#: Its runs go on being sent.
ACTIVE = "active"
#: Paused: no run is sent until it is resumed.
PAUSED = "paused"
#: No run is left to send: past its end, its max_runs or its last time.
FINISHED = "finished"
#: The states a listed schedule is in.
STATES = (ACTIVE, PAUSED, FINISHED)


@dataclass(frozen=True)
class ListedSchedule:
    """A schedule in the scheduler's state, as of ``read_at_ms`` (epoch ms, the scan's
    time).

    - ``definition``: what was put, ``paused`` included;
    - ``version``: the inbound entry id of the last put, pause or resume applied;
    - ``state``: ``active``, ``paused`` or ``finished`` (no run left to send);
    - ``next_run_ms``: the first run not sent yet (epoch ms; earlier than
      ``read_at_ms`` when it is overdue), None while paused or once finished;
    - ``last_run_ms``: the latest run sent (epoch ms), None before the first. Found
      from the recurrence: a run that the catch-up policy skipped after an outage
      or a pause may show instead of the one sent before it;
    - ``runs``: how many runs were sent under this definition (what counts
      toward ``max_runs``);
    - ``skipped``: how many missed runs the catch-up policy did not send.
    """

    definition: Schedule
    version: str
    state: str
    next_run_ms: int | None
    last_run_ms: int | None
    runs: int
    skipped: int
    read_at_ms: int

    @property
    def topic(self) -> str:
        return self.definition.topic

    @property
    def name(self) -> str:
        return self.definition.name

    @classmethod
    def of(cls, armed: Armed, now_ms: int) -> ListedSchedule:
        """``armed`` as it stands at ``now_ms`` (epoch ms)."""
        schedule = armed.schedule
        handed_until_ms = armed.handed_until_ms
        ahead = (
            runs_in(schedule, now_ms, handed_until_ms, armed.runs)
            if handed_until_ms is not None and handed_until_ms > now_ms
            else []
        )  # handed over, not yet due
        sent = armed.runs - len(ahead)
        last_ms: int | None = None
        if sent > 0 and handed_until_ms is not None:
            before_ms = min(now_ms, handed_until_ms) + 1
            from_ms = min(schedule.start_ms or 0, before_ms - 1)
            found = last_runs(schedule, from_ms=from_ms, before_ms=before_ms, count=1)
            last_ms = found[-1] if found else None
        if armed.next_run_ms is None and not ahead:
            state, next_ms = FINISHED, None
        elif schedule.paused:
            state, next_ms = PAUSED, None
        else:
            state, next_ms = ACTIVE, ahead[0] if ahead else armed.next_run_ms
        return cls(schedule, armed.version, state, next_ms, last_ms, sent, armed.skipped, now_ms)

    def upcoming(self, n: int, now_ms: int) -> list[int]:
        """The next ``n`` runs after ``now_ms`` (epoch ms, at or after the scan's time),
        within the definition's bounds and the ``max_runs`` left: the runs an active
        schedule sent between the scan and ``now_ms`` count as sent. For a paused
        schedule, the runs to come once it is resumed (its missed runs aside)."""
        if self.state == FINISHED:
            return []
        after_ms = max(now_ms, self.read_at_ms)
        sent = self.runs
        if self.state == ACTIVE:
            sent += len(runs_in(self.definition, self.read_at_ms, after_ms, MAX_RUNS_PER_FIRING))
        return preview(self.definition, after_ms, n, runs_done=sent)

    def to_json(self) -> dict[str, Any]:
        """The row as JSON-ready data: the times in epoch ms and in RFC 3339 (UTC), the
        definition as :meth:`Schedule.to_json` writes it (the body in base64)."""
        return {**self._where_it_stands(), "definition": json.loads(self.definition.to_json())}

    def to_view(self) -> dict[str, Any]:
        """The row as a person reads it, as the HTTP API and ``delayline schedule list
        --json`` show it: :meth:`to_json`'s, with ``read_at`` in RFC 3339 too and the
        definition as :meth:`Schedule.to_view` shows it (in the terms of a put)."""
        return {
            **self._where_it_stands(),
            "read_at": format_time(self.read_at_ms),
            "definition": self.definition.to_view(),
        }

    def _where_it_stands(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "name": self.name,
            "state": self.state,
            "version": self.version,
            "next_run_ms": self.next_run_ms,
            "next_run": _shown(self.next_run_ms),
            "last_run_ms": self.last_run_ms,
            "last_run": _shown(self.last_run_ms),
            "runs": self.runs,
            "skipped": self.skipped,
            "read_at_ms": self.read_at_ms,
        }

    def dumps(self) -> str:
        """The row as JSON text, as a listing keeps it in Redis."""
        return json.dumps(self.to_json(), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | bytes) -> ListedSchedule:
        """The inverse of :meth:`dumps`. Raises DecodeError or ValidationError for a
        definition that is not one, KeyError or ValueError for anything else."""
        data = json.loads(text)
        return cls(
            definition=Schedule.from_json(json.dumps(data["definition"]), STORED),
            version=data["version"],
            state=data["state"],
            next_run_ms=data["next_run_ms"],
            last_run_ms=data["last_run_ms"],
            runs=data["runs"],
            skipped=data["skipped"],
            read_at_ms=data["read_at_ms"],
        )


def run_view(schedule: Schedule, run_ms: int) -> dict[str, Any]:
    """A run's time (epoch ms) as the HTTP API shows it: ``at`` in RFC 3339 (UTC),
    ``at_ms``, and ``local``, RFC 3339 on the wall clock of the schedule's zone (with
    that zone's offset at the time)."""
    local = from_epoch_ms(run_ms).astimezone(ZoneInfo(schedule.zone))
    return {
        "at": format_time(run_ms),
        "at_ms": run_ms,
        "local": local.isoformat(timespec="milliseconds"),
    }


def _shown(epoch_ms: int | None) -> str | None:
    return None if epoch_ms is None else format_time(epoch_ms)
