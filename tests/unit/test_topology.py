"""The servers a Redis URL names, and which one serves a command (no I/O)."""

from __future__ import annotations

import pytest

from delayline.errors import ConfigurationError
from delayline.redis import keys, topology
from delayline.redis.topology import SlotRange


def test_a_plain_url_names_one_server_with_its_database() -> None:
    found = topology.parse_endpoints("redis://:s3cret@10.0.0.5:6380/2")
    assert found.kind == "server"
    assert found.addresses == (("10.0.0.5", 6380),)
    assert found.url_for(("10.0.0.5", 6380)) == "redis://:s3cret@10.0.0.5:6380/2"
    assert found.password == "s3cret"
    assert found.replica_wait_ms == topology.DEFAULT_REPLICA_WAIT_MS


def test_several_hosts_name_a_primary_and_its_replicas() -> None:
    found = topology.parse_endpoints("rediss://u:p@a:1,b,[::1]:3/0?ssl_cert_reqs=none")
    assert found.kind == "server"
    assert found.addresses == (("a", 1), ("b", topology.DEFAULT_PORT), ("::1", 3))
    assert found.url_for(("b", 2)) == "rediss://u:p@b:2/0?ssl_cert_reqs=none"


def test_a_cluster_url_has_seeds_and_no_database() -> None:
    found = topology.parse_endpoints("redis+cluster://:pw@127.0.0.1:7000,127.0.0.1:7001")
    assert found.kind == "cluster"
    assert found.addresses == (("127.0.0.1", 7000), ("127.0.0.1", 7001))
    assert found.url_for(("h", 1)) == "redis://:pw@h:1"
    with pytest.raises(ConfigurationError, match="database 0 only"):
        topology.parse_endpoints("redis+cluster://127.0.0.1:7000/3")


def test_a_sentinel_url_names_its_service() -> None:
    found = topology.parse_endpoints("redis+sentinel://:pw@s1:26379,s2:26379/orders")
    assert (found.kind, found.service, found.path) == ("sentinel", "orders", "")
    with pytest.raises(ConfigurationError, match="service name"):
        topology.parse_endpoints("redis+sentinel://s1:26379")


def test_the_replica_wait_is_ours_and_not_passed_on() -> None:
    found = topology.parse_endpoints("redis://h:1/0?replica_wait_ms=0&socket_keepalive=true")
    assert found.replica_wait_ms == 0
    assert found.url_for(("h", 1)) == "redis://h:1/0?socket_keepalive=true"
    with pytest.raises(ConfigurationError, match="whole number"):
        topology.parse_endpoints("redis://h:1/0?replica_wait_ms=soon")


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://h:1", "unknown scheme"),
        ("h:1", "no scheme"),
        ("redis://", "no host"),
        ("redis://:pw@h:99999", "bad port"),
        ("redis+cluster://a:1,,b:2", "no host"),
    ],
)
def test_bad_urls_are_refused_without_showing_the_password(url: str, why: str) -> None:
    with pytest.raises(ConfigurationError, match=why) as refused:
        topology.parse_endpoints(url)
    assert "pw" not in str(refused.value).replace("password", "")


def test_the_routing_key_of_each_kind_of_command() -> None:
    assert topology.command_key(("XADD", "orders", "*", "a", "1")) == "orders"
    assert topology.command_key(("EVALSHA", "abc", 2, "k1", "k2", "arg")) == "k1"
    assert topology.command_key(("EVALSHA", "abc", 0, "arg")) is None
    assert topology.command_key(("SCRIPT", "LOAD", "return 1")) is None
    read = ("XREADGROUP", "GROUP", "g", "c", "COUNT", 5, "BLOCK", 10, "STREAMS", "t", ">")
    assert topology.command_key(read) == "t"


def test_commands_group_in_order_and_keyless_ones_join_the_next() -> None:
    commands = [("SCRIPT", "LOAD", "x"), ("SET", "a", 1), ("SET", "b", 1), ("GET", "a")]
    groups = topology.grouped(commands, lambda command: topology.command_key(command))
    assert groups == [[0, 1, 3], [2]]
    assert topology.grouped([("PING",)], lambda command: None) == [[0]]


def test_writes_are_told_from_reads() -> None:
    assert not topology.writes([("HGETALL", "x"), ("XRANGE", "s", "-", "+")])
    assert topology.writes([("HGETALL", "x"), ("EVALSHA", "sha", 1, "k")])


def test_slot_ranges_find_the_primary_of_a_slot() -> None:
    reply = [
        [5461, 10922, [b"", 7001, b"id1"], [b"127.0.0.1", 7004, b"id4"]],
        [0, 5460, [b"127.0.0.1", 7000, b"id0"]],
    ]
    ranges = topology.slot_ranges(reply, ("10.0.0.1", 7001))
    assert ranges == [
        SlotRange(0, 5460, ("127.0.0.1", 7000), 0),
        SlotRange(5461, 10922, ("10.0.0.1", 7001), 1),
    ]
    assert topology.range_of(ranges, 5461) == ranges[1]
    assert topology.range_of(ranges, 16000) is None


def test_every_shard_key_routes_to_its_inbound_streams_slot() -> None:
    from redis.crc import key_slot

    for shard in range(8):
        shard_keys = keys.shard_keys(shard)
        slot = key_slot(shard_keys.inbound.encode())
        assert key_slot(shard_keys.outbox.encode()) == slot
    assert key_slot(keys.drain_marker("q").encode()) == key_slot(keys.INBOUND.encode())


def test_a_primarys_role_counts_its_replicas() -> None:
    assert topology.connected_replicas([b"master", 10, [[b"h", b"1", b"10"]]]) == 1
    assert topology.connected_replicas([b"slave", b"h", 1, b"connected", 10]) == 0
    assert topology.is_primary([b"master", 0, []])


def test_stream_group_commands_route_by_their_stream() -> None:
    assert topology.command_key(("XGROUP", "CREATE", "t", "g", "0", "MKSTREAM")) == "t"
    assert topology.command_key(("XINFO", "GROUPS", "t")) == "t"


def test_a_probe_url_has_short_timeouts_and_keeps_the_options() -> None:
    found = topology.parse_endpoints("redis://:pw@h:1/0?ssl_cert_reqs=none")
    assert found.url_for(("h", 1), timeout_s=1.0) == (
        "redis://:pw@h:1/0?ssl_cert_reqs=none&socket_timeout=1.0&socket_connect_timeout=1.0"
    )
