"""Raw records of every shape on the inbound stream of a running scheduler.

Whatever producers write, the query must keep running (issue 8: one record with
a 70,000-character topic stopped it for good), and every record must end up
accounted for: rejected with a reason, delivered once and never early, or
counted as a cancel or a duplicate.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest
import redis
from hypothesis import HealthCheck, Phase, given, note, settings
from hypothesis import strategies as st

from delayline import ids
from delayline.model import Cancel, Message
from delayline.redis import keys
from delayline.scheduler.pipeline.records import MAX_REASON_BYTES
from delayline.testing import wait_for
from delayline.timing import now_ms
from delayline.validation import Limits
from tests.support.harness import SchedulerProcess, Service

pytestmark = pytest.mark.spark

#: How long one batch of records may take to be accounted for, on a busy 2-core machine.
SETTLE_TIMEOUT_S = 60.0
LIMITS = Limits()
#: Every field the scheduler reads; an extra field must not be one of them.
KNOWN_FIELDS = frozenset(
    {
        b"v",
        b"op",
        b"id",
        b"topic",
        b"body",
        b"deliver_at_ms",
        b"key",
        b"headers",
        b"sent_at_ms",
        b"attempt",
        b"cascade",
    }
)


@dataclass
class Live:
    scheduler: SchedulerProcess
    raw: redis.Redis

    def check_running(self) -> None:
        """The scheduler process is alive and its query never stopped."""
        assert self.scheduler.process is not None
        assert self.scheduler.process.poll() is None, self.scheduler.output[-5000:]
        assert "query stopped" not in self.scheduler.output, self.scheduler.output[-5000:]


@pytest.fixture(scope="module")
def live(default_service: Service) -> Live:
    return Live(default_service.scheduler, default_service.raw)


# -- what to write -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Blob:
    """A big value, made only when written (hypothesis would print megabytes).

    It starts with 0xFF, so it is never UTF-8, a number, JSON or an id.
    """

    size: int
    seed: int

    def data(self) -> bytes:
        return b"\xff" + random.Random(self.seed).randbytes(self.size - 1)


@dataclass(frozen=True)
class Repeated:
    """``unit`` ``times`` over, between ``before`` and ``after``: a long value with a short repr."""

    unit: bytes
    times: int
    before: bytes = b""
    after: bytes = b""

    def data(self) -> bytes:
        return self.before + self.unit * self.times + self.after


Value = bytes | Blob | Repeated


def data_of(value: Value) -> bytes:
    return value if isinstance(value, bytes) else value.data()


@dataclass(frozen=True)
class ValidSend:
    """A send due ``delay_ms`` after it is written; ``same_id_as`` picks an earlier send's id."""

    delay_ms: int
    body: Value
    extra: tuple[tuple[Value, Value], ...]
    same_id_as: int | None


@dataclass(frozen=True)
class ValidCancel:
    """A cancel of an earlier valid send (``of`` picks which), or of an unknown id."""

    of: int | None


@dataclass(frozen=True)
class BadField:
    """A valid send or cancel with one field made invalid (``None``: left out)."""

    op: bytes
    name: bytes
    value: Value | None
    extra: tuple[tuple[Value, Value], ...]


@dataclass(frozen=True)
class MismatchedId:
    """A send whose id encodes a time ``delta_ms`` away from its ``deliver_at_ms``."""

    delta_ms: int


@dataclass(frozen=True)
class Junk:
    """Fields of any names and values, without a valid ``v``; ``width`` more named f0, f1, ..."""

    fields: tuple[tuple[Value, Value], ...]
    width: int


huge = st.builds(
    Blob,
    size=st.sampled_from([65_537, 70_000, 1_048_577, 2 * 1024 * 1024, 3 * 1024 * 1024]),
    seed=st.integers(0, 2**32),
)
junk_bytes = st.binary(max_size=40)
extra_fields = st.lists(
    st.tuples(
        junk_bytes.filter(lambda name: name not in KNOWN_FIELDS) | huge,
        junk_bytes | huge,
    ),
    max_size=3,
).map(tuple)
too_big_body = st.builds(Blob, size=st.sampled_from([1_048_577, 2 * 1024 * 1024]), seed=st.just(1))
not_a_version = (junk_bytes | huge).filter(lambda v: v != b"1")
not_an_op = (junk_bytes | huge).filter(lambda v: v not in (b"send", b"cancel"))
not_an_id = (
    st.sampled_from([b"", b"not-an-id", b"01KDVDNA00", b"u" * 26]) | junk_bytes | huge
).filter(lambda v: isinstance(v, Blob) or not ids.is_message_id(v.decode("latin-1")))
not_an_integer = (
    st.sampled_from([b"", b"soon", b"1.5", b"1e3", b"9" * 20, Repeated(b"9", 70_000)]) | huge
)
BadValues = dict[bytes, st.SearchStrategy[Value | None]]
#: For each field of a send, values it must not have (None: it must not be missing).
BAD_SEND_VALUES: BadValues = {
    b"v": st.none() | not_a_version,
    b"op": st.none() | not_an_op,
    b"id": st.none() | not_an_id,
    b"topic": st.none()
    | st.sampled_from([b"", b"has space", b"delayline:x", Repeated(b"t", 250), b"\xff"])
    | huge,
    b"body": st.none() | too_big_body,
    b"deliver_at_ms": st.none() | st.just(b"-5") | not_an_integer,
    b"attempt": st.sampled_from([b"0", b"-1", str(2**31).encode(), Repeated(b"9", 5_000)]) | huge,
    b"headers": st.sampled_from(
        [b"[1]", b"{oops", b'{"n":1}', Repeated(b"x", 17_000, b'{"h":"', b'"}')]
    )
    | huge,
    b"key": st.sampled_from([Repeated(b"k", 1_025), b"\xff\xfe"]) | huge,
    b"sent_at_ms": not_an_integer,
}
BAD_CANCEL_VALUES: BadValues = {
    b"v": BAD_SEND_VALUES[b"v"],
    b"op": st.none() | not_an_op,
    b"id": BAD_SEND_VALUES[b"id"],
    b"sent_at_ms": not_an_integer,
}


def bad_field(op: bytes, bad_values: BadValues) -> st.SearchStrategy[BadField]:
    """A record of ``op`` with one of the fields of ``bad_values`` made bad."""
    return st.sampled_from(sorted(bad_values)).flatmap(
        lambda name: st.builds(
            BadField, op=st.just(op), name=st.just(name), value=bad_values[name], extra=extra_fields
        )
    )


planned = st.one_of(
    st.builds(
        ValidSend,
        delay_ms=st.integers(-2_000, 3_000),
        body=st.binary(max_size=64) | st.just(Blob(LIMITS.max_body_bytes, 7)),
        extra=extra_fields,
        same_id_as=st.none() | st.integers(0, 50),
    ),
    st.builds(ValidCancel, of=st.none() | st.integers(0, 50)),
    bad_field(b"send", BAD_SEND_VALUES),
    bad_field(b"cancel", BAD_CANCEL_VALUES),
    st.builds(MismatchedId, delta_ms=st.integers(1, 10**6) | st.integers(-(10**6), -1)),
    st.builds(
        Junk,
        fields=st.lists(st.tuples(junk_bytes | huge, junk_bytes | huge), max_size=6).map(tuple),
        width=st.sampled_from([0, 0, 0, 3_000]),
    ),
)


# -- writing it, and what must become of it ---------------------------------------------------


@dataclass
class Expected:
    """What each written record must become. Groups of sends are keyed by message id."""

    topic: str
    rejects: set[str] = field(default_factory=set)
    #: Message id -> its sends in inbound order, as (body, deliver_at_ms).
    sends: dict[str, list[tuple[bytes, int]]] = field(default_factory=dict)
    cancelled: set[str] = field(default_factory=set)
    cancels: int = 0

    @property
    def send_count(self) -> int:
        return sum(len(group) for group in self.sends.values())

    def duplicates(self, *, cancelled: bool) -> int:
        """Sends after the first of their id, among the cancelled ids or the others."""
        return sum(
            len(group) - 1
            for message_id, group in self.sends.items()
            if (message_id in self.cancelled) == cancelled
        )


def with_extra(
    fields: dict[bytes, bytes], extra: Sequence[tuple[Value, Value]]
) -> dict[bytes, bytes]:
    return {**fields, **{data_of(name): data_of(value) for name, value in extra}}


def materialize(plans: Sequence[object], topic: str) -> tuple[list[dict[bytes, bytes]], list[str]]:
    """The records to write for ``plans`` now, and what each must become ("reject", or a
    message id for a valid send or cancel)."""
    now = now_ms()
    records: list[dict[bytes, bytes]] = []
    outcomes: list[str] = []
    valid: list[Message] = []
    for plan in plans:
        if isinstance(plan, ValidSend):
            message = Message.create(
                topic, data_of(plan.body), now_ms=now, limits=LIMITS, delay=max(plan.delay_ms, 0)
            )
            if plan.delay_ms < 0:  # already due when written
                due_ms = now + plan.delay_ms
                message = message._replace(id=ids.new_message_id(due_ms), deliver_at_ms=due_ms)
            if plan.same_id_as is not None and valid:
                first = valid[plan.same_id_as % len(valid)]
                message = message._replace(id=first.id, deliver_at_ms=first.deliver_at_ms)
            valid.append(message)
            records.append(with_extra(message.to_record(), plan.extra))
            outcomes.append("send:" + message.id)
        elif isinstance(plan, ValidCancel):
            if plan.of is not None and valid:
                target = valid[plan.of % len(valid)].id
            else:  # an id nobody sent
                target = ids.new_message_id(now + 60_000)
            records.append(Cancel(target, now).to_record())
            outcomes.append("cancel:" + target)
        elif isinstance(plan, BadField):
            good = Message.create("fuzz.bad", b"x", now_ms=now, limits=LIMITS, delay=1_000)
            base = good.to_record() if plan.op == b"send" else Cancel(good.id, now).to_record()
            base = with_extra(base, plan.extra)
            base.pop(plan.name, None)
            if plan.value is not None:
                base[plan.name] = data_of(plan.value)
            records.append(base)
            outcomes.append("reject")
        elif isinstance(plan, MismatchedId):
            good = Message.create("fuzz.bad", b"x", now_ms=now, limits=LIMITS, delay=1_000)
            claimed = ids.new_message_id(good.deliver_at_ms + plan.delta_ms)
            records.append(good.to_record() | {b"id": claimed.encode()})
            outcomes.append("reject")
        else:
            assert isinstance(plan, Junk)
            junk = {data_of(name): data_of(value) for name, value in plan.fields}
            junk |= {f"f{n}".encode(): b"w" for n in range(plan.width)}
            if junk.get(b"v") == b"1":
                junk[b"v"] = b"junk"
            records.append(junk or {b"junk": b""})
            outcomes.append("reject")
    return records, outcomes


def write(raw: redis.Redis, plans: Sequence[object], topic: str) -> Expected:
    """XADD the records of ``plans`` to the inbound stream; what must become of each."""
    records, outcomes = materialize(plans, topic)
    pipe = raw.pipeline(transaction=False)
    for record in records:
        pipe.xadd(keys.INBOUND, record)  # type: ignore[arg-type]
    entry_ids = [entry_id.decode() for entry_id in pipe.execute()]
    expected = Expected(topic)
    for entry_id, record, outcome in zip(entry_ids, records, outcomes, strict=True):
        kind, _, message_id = outcome.partition(":")
        if kind == "reject":
            expected.rejects.add(entry_id)
        elif kind == "send":
            group = expected.sends.setdefault(message_id, [])
            group.append((record[b"body"], int(record[b"deliver_at_ms"])))
        else:
            expected.cancels += 1
            if message_id in expected.sends:
                expected.cancelled.add(message_id)
    return expected


class Observer:
    """What the scheduler has done since it was made: rejects, deliveries, counters."""

    def __init__(self, raw: redis.Redis, topic: str) -> None:
        self.raw = raw
        self.topic = topic
        #: Inbound entry id -> the fields of its reject.
        self.rejects: dict[str, dict[bytes, bytes]] = {}
        #: (stream entry ms, fields) of each entry on the topic.
        self.deliveries: list[tuple[int, dict[bytes, bytes]]] = []
        self._stats_before = self.stats()
        newest = raw.xrevrange(keys.REJECTS, count=1)
        self._rejects_after = newest[0][0].decode() if newest else "0-0"
        self._topic_after = "0-0"

    def stats(self) -> dict[str, int]:
        return {k.decode(): int(v) for k, v in self.raw.hgetall(keys.STATS).items()}

    def counted(self, name: str) -> int:
        """How much ``name`` in delayline:stats grew since this observer was made."""
        return self.stats().get(name, 0) - self._stats_before.get(name, 0)

    def poll(self) -> None:
        """Read the rejects and deliveries added since the last poll (each entry once)."""
        for entry_id, fields in self.raw.xrange(keys.REJECTS, "(" + self._rejects_after):
            self._rejects_after = entry_id.decode()
            self.rejects[fields[b"inbound_id"].decode()] = fields
        for entry_id, fields in self.raw.xrange(self.topic, "(" + self._topic_after):
            self._topic_after = entry_id.decode()
            self.deliveries.append((int(entry_id.split(b"-")[0]), fields))

    def delivered_ids(self) -> list[str]:
        return [fields[b"id"].decode() for _, fields in self.deliveries]

    def missing(self, expected: Expected) -> list[str]:
        """What has not happened yet; raises AssertionError for what never may."""
        self.poll()
        accepted, cancels = self.counted("accepted"), self.counted("cancels")
        assert accepted <= expected.send_count, "a record meant to be rejected was accepted"
        missing = [f"reject of {entry_id}" for entry_id in expected.rejects - set(self.rejects)]
        if accepted < expected.send_count:
            missing.append(f"{expected.send_count - accepted} sends to be accepted")
        if cancels < expected.cancels:
            missing.append(f"{expected.cancels - cancels} cancels to be counted")
        # Every accepted send ends as exactly one of these three.
        settled = sum(self.counted(name) for name in ("delivered", "dropped", "duplicates"))
        if settled < expected.send_count:
            missing.append(f"{expected.send_count - settled} sends to be delivered or dropped")
        delivered = set(self.delivered_ids())
        missing += [
            f"delivery of {message_id}"
            for message_id in set(expected.sends) - expected.cancelled - delivered
        ]
        return missing


def settle(live: Live, observer: Observer, expected: Expected) -> None:
    """Poll until every record written is accounted for (fail after SETTLE_TIMEOUT_S)."""
    missing: list[str] = []

    def accounted() -> bool:
        missing[:] = observer.missing(expected)
        if missing:
            live.check_running()
        return not missing

    wait_for(
        accounted,
        SETTLE_TIMEOUT_S,
        "every record to be accounted for",
        interval_s=0.1,
        details=lambda: f"still waiting for {missing[:10]}\n{live.scheduler.output[-4000:]}",
    )


def check_outcomes(observer: Observer, expected: Expected) -> None:
    """Rejects only where expected; each send delivered once, first one wins, never early."""
    observer.poll()  # what landed since the last look
    assert set(observer.rejects) == expected.rejects
    for entry_id, fields in observer.rejects.items():
        assert 0 < len(fields[b"reason"]) <= MAX_REASON_BYTES, entry_id
    delivered = observer.delivered_ids()
    assert len(delivered) == len(set(delivered)), "a message was delivered twice"
    assert set(delivered) <= set(expected.sends)
    for stream_ms, fields in observer.deliveries:
        message_id = fields[b"id"].decode()
        first_body, deliver_at_ms = expected.sends[message_id][0]
        assert fields[b"body"] == first_body, f"{message_id}: not the first send's body"
        assert int(fields[b"deliver_at_ms"]) == deliver_at_ms
        assert stream_ms >= deliver_at_ms, f"{message_id} was delivered early"
    assert len(delivered) == observer.counted("delivered")
    duplicates = observer.counted("duplicates")
    assert expected.duplicates(cancelled=False) <= duplicates
    # A cancel may lose its race with its message; then that id's duplicates count too.
    assert duplicates <= expected.duplicates(cancelled=False) + expected.duplicates(cancelled=True)


# -- the tests ---------------------------------------------------------------------------------


def test_a_70000_character_topic_is_rejected_and_delivery_goes_on(live: Live) -> None:
    topic = f"fuzz.{uuid.uuid4().hex[:8]}"
    observer = Observer(live.raw, topic)
    due_ms = now_ms()
    poison = {
        b"v": b"1",
        b"op": b"send",
        b"id": ids.new_message_id(due_ms).encode(),
        b"topic": b"a" * 70_000,
        b"body": b"poison",
        b"deliver_at_ms": str(due_ms).encode(),
    }
    poison_entry = live.raw.xadd(keys.INBOUND, poison).decode()  # type: ignore[arg-type]
    good = Message.create(topic, b"after the poison", now_ms=now_ms(), limits=LIMITS, delay=500)
    live.raw.xadd(keys.INBOUND, good.to_record())  # type: ignore[arg-type]
    expected = Expected(topic, rejects={poison_entry})
    expected.sends[good.id] = [(good.body, good.deliver_at_ms)]
    settle(live, observer, expected)
    check_outcomes(observer, expected)
    kept = observer.rejects[poison_entry]
    assert kept[b"reason"].startswith(b"topic must be 1-249 characters of [A-Za-z0-9._:-], got")
    assert {name: kept[name] for name in poison} == poison  # the record, whole
    live.check_running()


@settings(
    max_examples=6,
    deadline=None,
    # Each example costs seconds of a live scheduler; the failing list is reported as drawn.
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
@given(plans=st.lists(planned, min_size=5, max_size=25))
def test_every_raw_record_is_accounted_for(live: Live, plans: list[object]) -> None:
    note(f"plans={plans!r}")  # this hypothesis version prints the failing arguments empty
    topic = f"fuzz.{uuid.uuid4().hex[:8]}"
    observer = Observer(live.raw, topic)
    expected = write(live.raw, plans, topic)
    settle(live, observer, expected)
    check_outcomes(observer, expected)
    live.check_running()
