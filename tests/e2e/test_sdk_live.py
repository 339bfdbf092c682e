"""The SDK against a real Redis and the session's running scheduler (1 s horizon).

Most tests run twice: with a delay within the horizon, which takes the near
path straight into the outbox, and with one beyond it, which goes through the
inbound stream and Spark's wheel. The forecast and reschedule tests run once,
through Spark (their near-path halves are in tests/integration).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
import redis
from click.testing import CliRunner

from delayline import AsyncClient, Client, RetryPolicy, ScheduleNotFoundError
from delayline.cli import main
from delayline.ids import new_message_id
from delayline.metrics import percentile_ms
from delayline.redis import keys
from delayline.timing import from_epoch_ms, now_ms
from tests.support.harness import SchedulerProcess, Service, wait_for

pytestmark = pytest.mark.spark


#: A delay within the shared service's 1 s horizon (the near path), and one beyond it.
NEAR_DELAY_MS = 500
SPARK_DELAY_MS = 2_500


@dataclass
class Live:
    url: str
    scheduler: SchedulerProcess
    raw: redis.Redis
    #: A short delay, which takes this path: near, or through Spark.
    delay_ms: int
    near: bool

    def topic(self) -> str:
        return f"live.{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module", params=["near path", "spark path"])
def live(request: pytest.FixtureRequest, default_service: Service) -> Live:
    near = request.param == "near path"
    service = default_service
    delay_ms = NEAR_DELAY_MS if near else SPARK_DELAY_MS
    return Live(service.url, service.scheduler, service.raw, delay_ms, near)


@pytest.fixture
def client(live: Live) -> Iterator[Client]:
    with Client(live.url) as sdk:
        yield sdk


@pytest.fixture
def once(default_service: Service) -> Iterator[Client]:
    """A client of the shared service, for the tests that run once."""
    with Client(default_service.url) as sdk:
        yield sdk


def test_round_trip(live: Live, client: Client) -> None:
    topic = live.topic()
    sent_ms = now_ms()
    message_id = client.send(
        topic, b"order-42", delay=live.delay_ms, key="42", headers={"trace": "t"}
    )
    # The near path puts it in the outbox at once; the other one leaves it to Spark.
    assert (live.raw.zscore(keys.OUTBOX, message_id) is not None) == live.near
    delivery = next(client.consume(topic, "billing", block_ms=1_000))
    assert (delivery.id, delivery.body, delivery.key, delivery.headers, delivery.attempt) == (
        message_id,
        b"order-42",
        "42",
        {"trace": "t"},
        1,
    )
    assert delivery.delivered_at >= delivery.deliver_at
    assert delivery.deliver_at.timestamp() * 1000 >= sent_ms + live.delay_ms
    delivery.ack()
    status = client.status(message_id)
    assert status.state == "delivered"
    assert status.delivered_at == delivery.delivered_at


def test_status_through_every_state(live: Live, client: Client) -> None:
    topic = live.topic()
    delivered = client.send(topic, b"d", delay=live.delay_ms)
    cancelled = client.send(topic, b"c", delay=3_000)
    assert client.status(cancelled).state == "pending"
    assert client.cancel(cancelled) is True
    # One clock reading for both: an id that does not encode deliver_at_ms is
    # rejected for that, before its topic is looked at.
    due_ms = now_ms()
    rejected = new_message_id(due_ms)
    live.raw.xadd(
        keys.INBOUND,
        {
            "v": "1",
            "op": "send",
            "id": rejected,
            "topic": "no spaces",
            "body": "x",
            "deliver_at_ms": str(due_ms),
        },
    )
    wait_for(
        lambda: client.status(delivered).state == "delivered", 30, "the delivery", [live.scheduler]
    )
    wait_for(
        lambda: client.status(rejected).state == "rejected", 30, "the rejection", [live.scheduler]
    )
    assert "topic must be" in str(client.status(rejected).reason)
    # The cancelled message's slot fires and drops it: the journal then says so too.
    wait_for(
        lambda: (
            live.raw.hget(keys.journal(client.status(cancelled).deliver_at_ms), cancelled)
            == b"cancelled"
        ),
        30,
        "the drop",
        [live.scheduler],
    )
    assert client.status(cancelled).state == "cancelled"
    assert [f[b"id"].decode() for _, f in live.raw.xrange(topic)] == [delivered]


def test_the_forecast_follows_sends_cancels_and_deliveries(
    default_service: Service, once: Client
) -> None:
    topic = f"live.{uuid.uuid4().hex[:8]}"
    # Three due in the same whole second, a few seconds ahead: through Spark.
    due_ms = (now_ms() + SPARK_DELAY_MS + 4_000) // 1000 * 1000 + 1000
    at = from_epoch_ms(due_ms)
    sent = [once.send(topic, str(n), deliver_at=at) for n in range(3)]

    def due_in_that_second() -> int:
        hot = once.pending(start=at, end=at + timedelta(minutes=1), hot_over=0).hot
        return next((instant.count for instant in hot if instant.at_ms == due_ms), 0)

    # The Spark path counts them when its source reads them: within a batch.
    wait_for(
        lambda: once.pending(topic=topic).total == 3,
        30,
        "the forecast to count the sends",
        [default_service.scheduler],
    )
    forecast = once.pending(topic=topic)
    assert [(b.start_ms, b.count, b.topics) for b in forecast.buckets] == [
        (due_ms // 60_000 * 60_000, 3, {topic: 3})
    ]
    before = due_in_that_second()
    assert before >= 3  # other tests' messages may be due in that second too
    assert once.cancel(sent[0])
    assert due_in_that_second() == before - 1, "a cancel leaves the forecast at once"
    cli = CliRunner().invoke(
        main, ["pending", "--json", "--topic", topic, "--redis-url", default_service.url]
    )
    assert json.loads(cli.output)["total"] == 3  # a cancel by id does not name the topic
    wait_for(
        lambda: default_service.raw.xlen(topic) == 2,
        30,
        "the deliveries",
        [default_service.scheduler],
    )
    wait_for(
        lambda: once.pending(topic=topic).total == 0,
        10,
        "the delivered and the cancelled to leave the forecast",
        [default_service.scheduler],
    )


def test_reschedule_moves_a_message_once_and_never_delivers_the_old_one(
    default_service: Service, once: Client
) -> None:
    topic = f"live.{uuid.uuid4().hex[:8]}"
    # 10 minutes ahead: a coarse slot in Spark's state; 8 s ahead: a fine slot.
    far = once.send(topic, b"far", delay=timedelta(minutes=10))
    soon = once.send(topic, b"soon", delay=timedelta(seconds=8))
    soon_due_ms = once.status(soon).deliver_at_ms
    wait_for(
        lambda: once.pending(topic=topic).total == 2,
        30,
        "the scheduler to hold both",
        [default_service.scheduler],
    )
    moved = {
        once.reschedule(far, delay=2_000): b"far",
        once.reschedule(soon, delay=2_500): b"soon",
    }
    assert {once.status(far).rescheduled_to, once.status(soon).rescheduled_to} == set(moved)
    wait_for(
        lambda: default_service.raw.xlen(topic) == 2,
        30,
        "the moved messages",
        [default_service.scheduler],
    )
    for entry_id, fields in default_service.raw.xrange(topic):
        new_id = fields[b"id"].decode()
        assert moved[new_id] == fields[b"body"]
        assert int(entry_id.split(b"-")[0]) >= int(fields[b"deliver_at_ms"]), "early"
    # The old one's time comes and goes: nothing more arrives.
    wait_for(lambda: now_ms() > soon_due_ms + 2_000, 15, "the old time to pass")
    assert default_service.raw.xlen(topic) == 2
    assert once.status(soon).state == "rescheduled"


def test_list_pending_scans_the_schedulers_state(default_service: Service, once: Client) -> None:
    topic = f"live.{uuid.uuid4().hex[:8]}"
    base_ms = now_ms() + 600_000
    sent = once.send_many(
        [
            {"topic": topic, "body": "x" * n, "deliver_at": base_ms + 1_000 * n, "key": f"k{n % 2}"}
            for n in range(20)
        ]
    )
    progress: list[tuple[int, int]] = []

    def listed() -> list[str]:
        rows = once.list_pending(topic=topic, on_progress=lambda *p: progress.append(p))
        return [row.id for row in rows]

    # Listed at once, from the inbound stream; from the state once a batch committed them.
    assert listed() == sent
    wait_for(
        lambda: {row.where for row in once.list_pending(topic=topic)} == {"state"},
        60,
        "the listing to find the sends in the state",
        [default_service.scheduler],
    )
    rows = once.list_pending(topic=topic, key="k1", limit=3)
    assert [(r.id, r.key, r.body_bytes, r.where) for r in rows] == [
        (sent[n], "k1", n, "state") for n in (1, 3, 5)
    ]
    window = once.list_pending(
        topic=topic, start=from_epoch_ms(base_ms + 5_000), end=from_epoch_ms(base_ms + 7_000)
    )
    assert [row.deliver_at_ms - base_ms for row in window] == [5_000, 6_000]
    result = CliRunner().invoke(
        main,
        ["pending", "--list", "--topic", topic, "--key", "k0", "--json", "--progress",
         "--redis-url", default_service.url],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert [m["id"] for m in json.loads(result.stdout)["messages"]] == sent[0::2]
    assert all(done <= total for done, total in progress)
    # By key: the cancels leave the topic's forecast at once, and the listing once the
    # scheduler has them.
    assert once.cancel_key(topic, "k1") == 10
    assert once.pending(topic=topic).total == 10
    wait_for(
        lambda: listed() == sent[0::2],
        60,
        "the listing to leave the cancelled out",
        [default_service.scheduler],
    )
    moved = once.reschedule_key(topic, "k0", delay=1_500)
    assert sorted(moved) == sorted(sent[0::2])
    wait_for(lambda: default_service.raw.xlen(topic) == 10, 30, "the rescheduled deliveries")
    delivered = {f[b"id"].decode() for _, f in default_service.raw.xrange(topic)}
    assert delivered == set(moved.values())


def test_a_schedule_is_listed_shown_and_previewed_by_the_running_scheduler(
    default_service: Service, once: Client
) -> None:
    topic = f"live.{uuid.uuid4().hex[:8]}"
    anchor_ms = now_ms() + 1_800_000  # hourly from half an hour ahead: no run in the test
    once.schedule("hourly", topic, b"r", every="1h", anchor=anchor_ms)
    wait_for(
        lambda: [row.name for row in once.schedules(topic=topic)] == ["hourly"],
        30,
        "the schedule to be listed",
        [default_service.scheduler],
    )
    shown = once.get_schedule("hourly", topic)
    assert (shown.state, shown.next_run_ms, shown.runs, shown.last_run_ms) == (
        "active", anchor_ms, 0, None,
    )  # fmt: skip
    assert once.next_runs("hourly", topic, n=2) == [
        from_epoch_ms(anchor_ms),
        from_epoch_ms(anchor_ms + 3_600_000),
    ]
    once.delete_schedule("hourly", topic)

    def gone() -> bool:
        try:
            once.get_schedule("hourly", topic)
        except ScheduleNotFoundError:
            return True
        return False

    wait_for(gone, 30, "the deleted schedule to be gone", [default_service.scheduler])


def test_a_group_created_while_running_delivers_through_its_own_lane(live: Live) -> None:
    """The scheduler finds a new group and pumps its lane; the group's sends, and its
    schedule's runs, reach the group's topics, counted in its own counters."""
    group = f"g{uuid.uuid4().hex[:8]}"
    with Client(live.url) as admin:
        admin.create_group(group)
    with Client(live.url, group=group) as client:
        sent = client.send("t", b"x", delay=live.delay_ms)
        wait_for(
            lambda: live.raw.xlen(f"{group}/t") == 1, 30, "the group's delivery", [live.scheduler]
        )
        assert client.status(sent).state == "delivered"
        metrics = client.metrics()
        assert metrics.counters["delivered"] == 1
        # On time: create_group returned once the scheduler pumped the group's lane.
        assert percentile_ms(metrics.lateness, 1.0) <= 1_000
        if live.near:
            return
        client.schedule("tick", "runs", b"r", every="1s")
        wait_for(
            lambda: live.raw.xlen(f"{group}/runs") >= 2, 30, "the group's runs", [live.scheduler]
        )
        assert [row.topic for row in client.schedules()] == [f"{group}/runs"]
        client.delete_schedule("tick", "runs")


def test_retry_later_until_the_dlq(live: Live, client: Client) -> None:
    topic = live.topic()
    client.send(topic, b"flaky", delay=100)
    policy = RetryPolicy([200, 200])
    attempts = []
    for delivery in client.consume(topic, "workers", block_ms=1_000, retry_policy=policy):
        attempts.append(delivery.attempt)
        if not delivery.retry_later():
            break
    assert attempts == [1, 2, 3]
    [(_, dead)] = live.raw.xrange(f"{topic}.DLQ")
    assert (dead[b"body"], dead[b"attempt"], dead[b"reason"]) == (
        b"flaky",
        b"3",
        b"no retries left after 2",
    )
    assert live.raw.xpending(topic, "workers")["pending"] == 0


def test_a_crashed_consumer_is_recovered_by_xautoclaim(live: Live, client: Client) -> None:
    topic = live.topic()
    ids = set(client.send_many([{"topic": topic, "body": str(n)} for n in range(5)]))
    crashed = client.consume(topic, "g", consumer="a", block_ms=1_000, batch=10)
    taken = {next(crashed).id for _ in range(5)}  # read, never acked: consumer a "dies"
    assert taken == ids
    survivor = client.consume(topic, "g", consumer="b", block_ms=200, claim_idle_ms=500)
    recovered = [next(survivor) for _ in range(5)]
    assert {d.id for d in recovered} == ids
    for delivery in recovered:
        delivery.ack()
    assert live.raw.xpending(topic, "g")["pending"] == 0


def test_async_round_trip(live: Live) -> None:
    topic = live.topic()

    async def scenario() -> None:
        async with AsyncClient(live.url) as sdk:
            message_id = await sdk.send(topic, b"async", delay=live.delay_ms)
            pending = await sdk.send(topic, b"never", delay=60_000)
            assert await sdk.cancel(pending) is True
            delivery = await anext(sdk.consume(topic, "g", block_ms=1_000))
            assert (delivery.id, delivery.body) == (message_id, b"async")
            await delivery.ack()
            assert (await sdk.status(message_id)).state == "delivered"
            assert (await sdk.status(pending)).state == "cancelled"

    asyncio.run(scenario())


#: The pages whose interactive sessions (```python blocks that start with >>>) a test runs.
DOCUMENTED_SESSIONS = ("README.md", "docs/quickstart.md", "docs/sdk.md")


@pytest.mark.parametrize("page", DOCUMENTED_SESSIONS)
def test_the_documented_sessions_run(default_service: Service, page: str) -> None:
    text = (Path(__file__).parents[2] / page).read_text()
    run_sessions(text, default_service.url, page)


def run_sessions(text: str, url: str, page: str) -> None:
    """Run every ```python block of ``page`` that is an interactive session, in order,
    against ``url`` (the default Redis URL and ``Client()`` are pointed at it)."""
    import doctest

    blocks = [block.split("```", 1)[0] for block in text.split("```python\n")[1:]]
    sessions = [block for block in blocks if block.lstrip().startswith(">>>")]
    assert sessions, f"{page} has no runnable example"
    text = "\n".join(sessions).replace("redis://127.0.0.1:6390/0", url)
    text = text.replace("Client()", f"Client({url!r})")
    text = text.replace("Client(group=", f"Client({url!r}, group=")
    parser = doctest.DocTestParser()
    test = parser.get_doctest(text, {}, page, page, 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    assert runner.failures == 0, f"{runner.failures} example(s) of {page} failed"
