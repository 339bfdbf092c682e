from __future__ import annotations

import pytest

from delayline.errors import InvalidMessageIdError
from delayline.ids import new_message_id
from delayline.redis.lua_source import CANCELLED_MARK, RESCHEDULED_MARK, VIA_INBOUND
from delayline.status import IN_FLIGHT_GRACE_MS, infer_status

DUE_MS = 1_800_000_000_000
ID = new_message_id(DUE_MS)


def infer(**records: object) -> str:
    values: dict[str, object] = {
        "journal": None,
        "rejected": None,
        "cancel_requested": None,
        "last_batch_at_ms": None,
        "now_ms": DUE_MS - 1,
    }
    values.update(records)
    return infer_status(ID, **values).state  # type: ignore[arg-type]


def test_records_decide_in_order() -> None:
    assert infer(journal=b"1800000000042") == "delivered"
    assert infer(journal=CANCELLED_MARK) == "cancelled"
    assert infer(rejected=b"bad topic") == "rejected"
    assert infer(cancel_requested=b"1799999999000") == "cancelled"
    rescheduled = f"1799999999000:{new_message_id(DUE_MS + 5)}:{DUE_MS + 5}".encode()
    assert infer(cancel_requested=rescheduled) == "rescheduled"
    # As a change of the shard count copies it (redis/layout.py).
    assert infer(cancel_requested=rescheduled + VIA_INBOUND) == "rescheduled"
    # A cancel that lost the race to the delivery: the delivery is the truth.
    assert infer(journal=b"1800000000042", cancel_requested=b"1") == "delivered"


def test_a_reschedules_journal_value_names_the_new_message() -> None:
    # The journal values are the ones topic_writes.lua writes, from the shared marker table.
    new_id = new_message_id(DUE_MS + 5)
    replaced = infer_status(
        ID,
        journal=RESCHEDULED_MARK + new_id.encode(),
        rejected=None,
        cancel_requested=None,
        last_batch_at_ms=None,
        now_ms=DUE_MS,
    )
    assert (replaced.state, replaced.rescheduled_to) == ("rescheduled", new_id)


def test_delivered_carries_its_time_and_rejected_its_reason() -> None:
    delivered = infer_status(
        ID,
        journal=b"1800000000042",
        rejected=None,
        cancel_requested=None,
        last_batch_at_ms=None,
        now_ms=DUE_MS + 50,
    )
    assert (delivered.deliver_at_ms, delivered.delivered_at_ms) == (DUE_MS, DUE_MS + 42)
    assert delivered.delivered_at is not None
    assert (delivered.delivered_at - delivered.deliver_at).total_seconds() == pytest.approx(0.042)
    rejected = infer_status(
        ID,
        journal=None,
        rejected=b"bad topic",
        cancel_requested=None,
        last_batch_at_ms=None,
        now_ms=DUE_MS,
    )
    assert rejected.reason == "bad topic"


def test_without_records_the_id_and_the_scheduler_decide() -> None:
    settled = DUE_MS + IN_FLIGHT_GRACE_MS
    assert infer(now_ms=DUE_MS - 1) == "pending"  # not yet due
    assert infer(now_ms=settled - 1, last_batch_at_ms=settled + 5) == "pending"  # in flight
    # Long past due, but the scheduler has not run since: it may still deliver.
    assert infer(now_ms=settled + 10**6, last_batch_at_ms=None) == "pending"
    assert infer(now_ms=settled + 10**6, last_batch_at_ms=settled - 1) == "pending"
    # The scheduler ran well past the due time and left no record.
    assert infer(now_ms=settled + 10**6, last_batch_at_ms=settled) == "unknown"


def test_a_malformed_id_is_refused() -> None:
    with pytest.raises(InvalidMessageIdError):
        infer_status(
            "nope",
            journal=None,
            rejected=None,
            cancel_requested=None,
            last_batch_at_ms=None,
            now_ms=0,
        )
