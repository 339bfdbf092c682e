"""Writing rows exactly as the scheduler's sink does, for tests of what reads them."""

from __future__ import annotations

import time

from delayline.ids import deliver_at_ms_of
from delayline.redis.store import DeliveryStore
from delayline.rows import Deliver, SinkRow


def sink(redis_url: str, *rows: SinkRow) -> None:
    """Write ``rows`` through the sink's own transport call, as one fresh batch."""
    store = DeliveryStore.from_url(redis_url)
    store.write_chunk(
        query_id="q",
        partition=0,
        batch_id=time.time_ns(),
        first_row=0,
        rows=list(rows),
        journal_ttl_s=3600,
    )
    store.close()


def delivered(
    message_id: str,
    topic: str = "t",
    body: bytes = b"x",
    attempt: int = 1,
    *,
    key: str = "",
    headers: str = "{}",
) -> Deliver:
    """A due message with the delivery time its id carries."""
    return Deliver(
        topic=topic,
        id=message_id,
        body=body,
        key=key,
        headers=headers,
        deliver_at_ms=deliver_at_ms_of(message_id),
        attempt=attempt,
    )
