"""A schedule's runs and revoked runs as the sink writes them, against a real server:
a run waits in the outbox, counted in the forecast; a revoked run is a cancel
request, which the pump honours."""

from __future__ import annotations

from collections.abc import Sequence

import redis

from delayline import Client
from delayline.ids import derived_message_id
from delayline.redis import keys
from delayline.redis.store import DeliveryStore
from delayline.rows import CountedRun, ForecastChange, Revoke, Run, SinkRow
from delayline.testing import wait_for
from delayline.timing import now_ms

TOPIC = "scheduled"


def run_row(due_ms: int, seed: bytes = b"reports\0tick\0v1") -> Run:
    return Run(
        topic=TOPIC,
        id=derived_message_id(due_ms, seed),
        body=b"run",
        key="",
        headers='{"delayline-schedule":"tick"}',
        deliver_at_ms=due_ms,
        attempt=1,
    )


def write(store: DeliveryStore, batch_id: int, rows: Sequence[SinkRow]) -> None:
    store.write_chunk(
        query_id="q", partition=0, batch_id=batch_id, first_row=0, rows=rows, journal_ttl_s=3600
    )


def test_a_run_waits_in_the_outbox_counted_in_the_forecast_and_is_delivered(
    redis_url: str, raw_redis: redis.Redis
) -> None:
    store = DeliveryStore.from_url(redis_url)
    due_ms = now_ms() + 1_000
    run = run_row(due_ms)
    write(store, 0, [run])
    assert raw_redis.zscore(keys.OUTBOX, run.id) == due_ms
    with Client(redis_url) as client:
        assert client.pending(topic=TOPIC).total == 1
        assert client.metrics().pending == 1  # accepted as the sink writes it
        wait_for(lambda: store.pump(100, 3600).moved, 10, "the pump", interval_s=0.01)
        [(entry_id, fields)] = raw_redis.xrange(TOPIC)
        assert fields[b"id"] == run.id.encode()
        assert int(entry_id.split(b"-")[0]) >= due_ms
        assert client.pending(topic=TOPIC).total == 0
        assert client.metrics().pending == 0
        assert client.status(run.id).state == "delivered"


def test_a_revoked_run_is_dropped_by_the_pump_and_leaves_the_forecast(
    redis_url: str, raw_redis: redis.Redis
) -> None:
    store = DeliveryStore.from_url(redis_url)
    due_ms = now_ms() + 500
    run, kept = run_row(due_ms), run_row(due_ms + 1)
    write(store, 0, [run, kept])
    write(store, 1, [Revoke(run.id, run.deliver_at_ms, TOPIC)])
    with Client(redis_url) as client:
        assert client.pending(topic=TOPIC).total == 1

        def drained() -> bool:
            store.pump(100, 3600)
            return raw_redis.zcard(keys.OUTBOX) == 0

        wait_for(drained, 10, "the pump to empty the outbox", interval_s=0.01)
        assert [fields[b"id"] for _, fields in raw_redis.xrange(TOPIC)] == [kept.id.encode()]
        assert client.status(run.id).state == "cancelled"
        assert client.pending(topic=TOPIC).total == 0
        assert client.metrics().pending == 0


def counted_run_row(due_ms: int) -> CountedRun:
    return CountedRun(*run_row(due_ms))


def test_runs_counted_ahead_are_in_the_minute_once_and_in_their_second_once_handed(
    redis_url: str, raw_redis: redis.Redis
) -> None:
    """A schedule counts its runs ahead in their minute; handed over, a counted run adds
    its second only; delivered, it leaves both; a negative change takes a count back."""
    store = DeliveryStore.from_url(redis_url)
    due_ms = now_ms() + 1_000
    minute_ms = due_ms // 60_000 * 60_000
    later_ms = minute_ms + 3_600_000
    write(store, 0, [ForecastChange(TOPIC, minute_ms, 1), ForecastChange(TOPIC, later_ms, 3)])
    with Client(redis_url) as client:
        forecast = client.pending(topic=TOPIC, hot_over=0)
        assert [(b.start_ms, b.count) for b in forecast.buckets] == [(minute_ms, 1), (later_ms, 3)]
        assert forecast.hot == []  # counted ahead: minutes only
        assert client.metrics().pending == 0  # not accepted before it is handed over
        write(store, 1, [counted_run_row(due_ms), ForecastChange(TOPIC, later_ms, -3)])
        forecast = client.pending(topic=TOPIC, hot_over=0)
        assert [(b.start_ms, b.count) for b in forecast.buckets] == [(minute_ms, 1)]
        assert [(h.at_ms, h.count) for h in forecast.hot] == [(due_ms // 1_000 * 1_000, 1)]
        assert client.metrics().pending == 1
        wait_for(lambda: store.pump(100, 3600).moved, 10, "the pump", interval_s=0.01)
        assert client.pending(topic=TOPIC, hot_over=0).total == 0
        assert client.pending(topic=TOPIC, hot_over=0).hot == []
        assert client.metrics().pending == 0
    assert len(raw_redis.xrange(TOPIC)) == 1
