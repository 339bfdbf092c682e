"""Request and response bodies of ``/v1/schedules``: a recurring schedule's definition
in, as :func:`delayline.plans.scheduling.definition_from` takes it; the definition as
stored out (:meth:`delayline.schedules.spec.Schedule.to_view`); a change accepted; a
schedule as a listing shows it (:meth:`delayline.schedules.listed.ListedSchedule.to_view`)
and its next runs."""

from __future__ import annotations

from typing import Annotated, Literal, overload

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

from delayline.api.schemas import body_of
from delayline.moments import parse_moment_ms
from delayline.plans.scheduling import ScheduleArguments
from delayline.schedules.listed import ListedSchedule, run_view
from delayline.schedules.recurrence import MAX_TIMES
from delayline.schedules.spec import (
    CATCH_UP_MAX_RUNS,
    CATCH_UP_MAX_RUNS_LIMIT,
    CATCH_UP_POLICIES,
    LATEST,
)
from delayline.timing import parse_duration_ms

#: What a time of a definition takes.
TIME = "RFC 3339 with an offset, or epoch ms"
#: The pattern of a schedule's name (schedules.spec.validate_name enforces it).
NAME_PATTERN = "^[A-Za-z0-9._:-]{1,200}$"


@overload
def moment_ms(value: int | str, field: str) -> int: ...
@overload
def moment_ms(value: None, field: str) -> None: ...
def moment_ms(value: int | str | None, field: str) -> int | None:
    """A time given as RFC 3339 text or as epoch ms, in epoch ms; None if absent."""
    return parse_moment_ms(value, field) if isinstance(value, str) else value


def duration_ms(value: int | str | None, field: str) -> int | None:
    """A duration given as text (``1h30m``) or as ms, in ms; None if absent."""
    return parse_duration_ms(value, field) if isinstance(value, str) else value


class ScheduleIn(BaseModel):
    """A recurring schedule's definition: each run sends the body (with ``key`` and
    ``headers``) to the topic, as a message due at the run's time would be. Give
    ``body`` (UTF-8 text) or ``body_b64``, and exactly one of ``cron`` (with ``tz``),
    ``every`` (with ``anchor``) and ``times``."""

    model_config = ConfigDict(extra="forbid")

    # The rules are documented here and enforced, with delayline's own error names, by
    # definition_from: the SDK's rules and messages are the API's.
    body: StrictStr | None = Field(default=None, examples=["run the nightly report"])
    body_b64: StrictStr | None = Field(default=None, description="The body, base64-encoded.")
    cron: StrictStr | None = Field(
        default=None,
        description="5 fields (minute hour day-of-month month day-of-week), or 6 with a "
        "second first, on the wall clock of tz.",
        examples=["0 9 * * MON-FRI"],
    )
    tz: StrictStr | None = Field(
        default=None,
        description="With cron only: its IANA time zone (UTC if absent).",
        examples=["Europe/Paris"],
    )
    every: StrictInt | StrictStr | None = Field(
        default=None,
        description="A period of at least 1 s: ms, or a duration such as 15m or 1h30m.",
        examples=["15m", 900_000],
    )
    anchor: StrictInt | StrictStr | None = Field(
        default=None,
        description=f"With every only: runs fall at anchor + k * every ({TIME}; the Unix "
        "epoch if absent).",
    )
    times: list[StrictInt | StrictStr] | None = Field(
        default=None,
        description=f"Explicit instants ({TIME}), at most {MAX_TIMES}.",
        examples=[["2026-12-01T09:00:00Z", "2026-12-08T09:00:00Z"]],
    )
    start: StrictInt | StrictStr | None = Field(
        default=None, description=f"No run before it ({TIME}).", examples=["2026-12-01T00:00:00Z"]
    )
    end: StrictInt | StrictStr | None = Field(
        default=None, description=f"No run after it ({TIME})."
    )
    max_runs: StrictInt | None = Field(
        default=None, description="No run after this many.", json_schema_extra={"minimum": 1}
    )
    paused: StrictBool = Field(default=False, description="Put it paused (see /resume).")
    catch_up: StrictStr = Field(
        default=LATEST,
        description="What becomes of runs missed while delayline was down or the schedule "
        "paused: skip (none is sent), latest (the latest, at once) or all (each one within "
        "catch_up_window, at most catch_up_max_runs, the latest ones).",
        json_schema_extra={"enum": list(CATCH_UP_POLICIES)},
    )
    catch_up_window: StrictInt | StrictStr | None = Field(
        default=None, description="With catch_up all: how far back (ms or a duration; 1h)."
    )
    catch_up_max_runs: StrictInt | None = Field(
        default=None,
        description=f"With catch_up all: the most missed runs sent ({CATCH_UP_MAX_RUNS}).",
        json_schema_extra={"minimum": 1, "maximum": CATCH_UP_MAX_RUNS_LIMIT},
    )
    key: StrictStr | None = None
    headers: dict[StrictStr, StrictStr] | None = None

    def body_value(self) -> bytes | str:
        """The body. Raises ValidationError unless exactly one of the two forms is given."""
        return body_of(self.body, self.body_b64)

    def arguments(self) -> ScheduleArguments:
        """The SDK's arguments, times and durations given as text parsed (times lazily:
        the SDK stops reading after its most). Raises ValidationError naming the field."""
        times = self.times
        return {
            "cron": self.cron,
            "tz": self.tz,
            "every": self.every,
            "anchor": moment_ms(self.anchor, "anchor"),
            "times": None if times is None else (moment_ms(t, "times") for t in times),
            "start": moment_ms(self.start, "start"),
            "end": moment_ms(self.end, "end"),
            "max_runs": self.max_runs,
            "paused": self.paused,
            "catch_up": self.catch_up,
            "catch_up_window": duration_ms(self.catch_up_window, "catch_up_window"),
            "catch_up_max_runs": self.catch_up_max_runs,
            "key": self.key,
            "headers": self.headers,
        }


def _absent(value: object) -> bool:
    return value is None


#: A field of a view left out when it has no value (a definition's unused options).
Text = Annotated[str | None, Field(exclude_if=_absent)]


class ScheduleOut(BaseModel):
    """The definition as stored, in the terms of a PUT's body: times in RFC 3339 (UTC),
    durations such as 15m, the body as text (``body_b64`` unless it is UTF-8); the
    options it does not use are left out."""

    topic: str
    name: str
    body: Text = None
    body_b64: Text = None
    key: Text = None
    headers: dict[str, str]
    cron: Text = None
    tz: Text = None
    every: Text = None
    anchor: Text = None
    times: Annotated[list[str] | None, Field(exclude_if=_absent)] = None
    start: Text = None
    end: Text = None
    max_runs: Annotated[int | None, Field(exclude_if=_absent)] = None
    paused: bool
    catch_up: str
    catch_up_window: str
    catch_up_max_runs: int


#: What a listed schedule is (delayline.schedules.listed.STATES).
State = Literal["active", "paused", "finished"]


class ListedScheduleOut(BaseModel):
    """A recurring schedule as the scheduler's state held it at ``read_at``: its
    definition, its state, and where its runs stand. Times in RFC 3339 (UTC) and in
    epoch ms."""

    topic: str
    name: str
    state: State = Field(
        description="active; paused (no run is sent until it is resumed); finished (no "
        "run is left: past its end, its max_runs or its last time)."
    )
    version: str = Field(
        description="The inbound entry id of the last put, pause or resume applied."
    )
    next_run: str | None = Field(
        description="The first run not sent yet; before read_at when it is overdue; null "
        "while paused or once finished."
    )
    next_run_ms: int | None
    last_run: str | None = Field(description="The latest run sent; null before the first.")
    last_run_ms: int | None
    runs: int = Field(description="Runs sent under this definition (toward max_runs).")
    skipped: int = Field(description="Missed runs that the catch_up policy did not send.")
    read_at: str = Field(description="When the scheduler read its state for this answer.")
    read_at_ms: int
    definition: ScheduleOut

    @classmethod
    def of(cls, listed: ListedSchedule) -> ListedScheduleOut:
        return cls.model_validate(listed.to_view())


class SchedulesOut(BaseModel):
    """The first schedules asked for, by topic, then name."""

    schedules: list[ListedScheduleOut]


class RunOut(BaseModel):
    """A run's time: in UTC, in epoch ms, and on the wall clock of the schedule's zone."""

    at: str = Field(examples=["2027-03-28T01:00:00.000Z"])
    at_ms: int
    local: str = Field(
        description="RFC 3339 with the offset of the schedule's zone at that time.",
        examples=["2027-03-28T03:00:00.000+02:00"],
    )


class NextRunsOut(BaseModel):
    """A stored schedule's next runs after now, within its start, end and the max_runs it
    has left; for a paused one, the runs to come once it is resumed."""

    topic: str
    name: str
    state: State
    tz: str = Field(description="The zone of its wall clock: a cron's tz, else UTC.")
    runs: list[RunOut]

    @classmethod
    def of(cls, listed: ListedSchedule, runs_ms: list[int]) -> NextRunsOut:
        schedule = listed.definition
        return cls.model_validate(
            {
                "topic": listed.topic,
                "name": listed.name,
                "state": listed.state,
                "tz": schedule.zone,
                "runs": [run_view(schedule, run_ms) for run_ms in runs_ms],
            }
        )


class ScheduleChangeOut(BaseModel):
    """The change is written; the scheduler applies it in its next batch."""

    topic: str
    name: str
    action: Literal["pause", "resume", "delete"]
