from __future__ import annotations

from delayline.plans import producing
from delayline.redis import keys


def record(body_bytes: int) -> dict[bytes, bytes]:
    return {b"id": b"i", b"body": b"x" * body_bytes}


def test_near_calls_hold_at_most_so_many_messages() -> None:
    records = [record(1) for _ in range(2 * producing.NEAR_PER_CALL + 1)]
    groups = list(producing.near_calls(records))
    assert [len(group) for group in groups] == [producing.NEAR_PER_CALL] * 2 + [1]
    assert [r for group in groups for r in group] == records


def test_near_calls_end_early_at_their_byte_budget() -> None:
    big = producing.NEAR_BYTES_PER_CALL // 2
    records = [record(big), record(big), record(1), record(2 * big)]
    groups = list(producing.near_calls(records))
    # Two halves and their ids pass the budget: the second starts a call, which the
    # small one joins; a record larger than the budget still goes, alone.
    assert [len(group) for group in groups] == [1, 2, 1]


def test_one_script_call_per_group_after_loading_the_script() -> None:
    records = [record(1) for _ in range(producing.NEAR_PER_CALL + 1)]
    shard = keys.shard_keys(1)
    commands = [
        producing._send_near(group, shard, 30_000) for group in producing.near_calls(records)
    ]
    assert [command[0] for command in commands] == ["EVALSHA", "EVALSHA"]
    # the shard's keys, its namespace last
    assert commands[1][3:9] == (
        shard.outbox, shard.outbox_data, shard.outbox_bell, shard.inbound, shard.stats,
        shard.namespace,
    )  # fmt: skip
    # horizon, then per record: its field count and its fields and values
    assert commands[1][9:] == (30_000, 2, b"id", b"i", b"body", b"x")
