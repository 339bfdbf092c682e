from __future__ import annotations

from delayline.model import Message
from delayline.plans import producing
from delayline.redis import keys, scripts
from delayline.validation import Limits


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


def test_one_script_call_per_group_in_each_shard_as_its_declaration_says() -> None:
    published = producing.Published(shards=2, horizon_ms=30_000, history=(2,))
    messages = [
        Message.create("t", b"x", now_ms=1_000, limits=Limits(), delay=5_000)
        for _ in range(2 * producing.NEAR_PER_CALL + 3)
    ]
    calls = producing.schedule(messages, published)
    script = scripts.SEND_NEAR
    assert {command[:3] for command in calls} == {("EVALSHA", script.sha, len(script.key_names))}
    by_shard = keys.by_shard(messages, 2, lambda message: message.id)
    expected = [
        script.command(script.keys(shard), scripts.send_near_args(group, 30_000))
        for shard, shard_messages in by_shard.items()
        for group in producing.near_calls([message.to_record() for message in shard_messages])
    ]
    assert calls == expected


def test_the_near_paths_arguments_are_the_horizon_then_each_record() -> None:
    assert scripts.send_near_args([record(1)], 30_000) == [30_000, 2, b"id", b"i", b"body", b"x"]


def test_without_a_near_message_each_is_a_plain_xadd_to_its_shards_inbound() -> None:
    published = producing.Published(shards=2, horizon_ms=30_000, history=(2,))
    far = [Message.create("t", b"x", now_ms=1_000, limits=Limits(), delay=60_000) for _ in range(5)]
    commands = producing.schedule(far, published)
    assert [command[:3] for command in commands] == [
        ("XADD", keys.inbound_for(message.id, 2), "*") for message in far
    ]


def test_with_a_near_message_every_message_goes_through_the_script() -> None:
    # A server that lost its scripts then runs none of the send (every call answers
    # NOSCRIPT), rather than its plain XADDs alone: the send stays all or none.
    published = producing.Published(shards=2, horizon_ms=30_000, history=(2,))
    far = [Message.create("t", b"x", now_ms=1_000, limits=Limits(), delay=60_000) for _ in range(5)]
    near = Message.create("t", b"x", now_ms=1_000, limits=Limits(), delay=5_000)
    messages = [*far, near]
    commands = producing.schedule(messages, published)
    assert {command[:2] for command in commands} == {("EVALSHA", scripts.SEND_NEAR.sha)}
    sent = [arg for command in commands for arg in command if isinstance(arg, bytes)]
    assert {message.id.encode() for message in messages} <= set(sent)
