"""The deployments of ``python -m bench redis-cluster``: a fresh Redis Cluster of 3
primaries with a replica each, its nodes named and their pids found, ``delayline
run`` on it with the cluster-aware consumer, a receipts Redis; and the producer
processes (bench/cluster_load.py) started on it."""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import redis

from bench.cluster_load import CONSUMER_READY, pick_topics
from bench.harness import keep_logs
from bench.measure import Receipts
from bench.systems.delayline_sys import DelaylineSystem
from bench.systems.processes import spawn, terminate, wait_for_log
from bench.workloads import Bench
from delayline.redis import keys
from delayline.redis.embedded import EmbeddedRedis
from delayline.testing import free_port
from delayline.testing.redis_cluster import LocalRedisCluster
from delayline.testing.slots import move_empty_slot, shard_slots


class ClusterDelayline(DelaylineSystem):
    """``delayline run`` on the cluster's URL and the cluster-aware consumer; its pids
    are the scheduler's, the consumer's and every node's."""

    def __init__(self, url: str, receipts_url: str, workdir: Path, *, shards: int,
                 topics: list[str], node_pids: list[int]) -> None:  # fmt: skip
        super().__init__(url, receipts_url, workdir)
        self.run_options = ("--inbound-shards", str(shards))
        self.topics = topics
        self.node_pids = node_pids

    def start(self) -> None:
        self._start_scheduler()
        log = self.workdir / "consumer.log"
        config = write_config(self.workdir / "consumer.json", {"url": self.redis_url,
                                                               "topics": self.topics})  # fmt: skip
        self._consumer = spawn([sys.executable, "-m", "bench.cluster_load", "consume", config],
                               env=self.child_env(), log=log)  # fmt: skip
        wait_for_log(log, CONSUMER_READY, 60, self._consumer)

    def pids(self) -> list[int]:
        return [self._scheduler.pid, self._consumer.pid, *self.node_pids]

    def stop(self) -> None:
        terminate(self._scheduler, timeout_s=90)
        terminate(self._consumer)


def write_config(path: Path, config: dict[str, Any]) -> str:
    """``config`` as JSON in ``path``, readable by this user only (it holds a password)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as file:
        json.dump(config, file)
    return str(path)


@dataclass
class Node:
    """One node: ``name`` (p0.. by first slot, r0.. for p0's replica...), port, pid."""

    name: str
    port: int
    pid: int
    client: redis.Redis

    def cpu(self) -> tuple[float, float]:
        """(process CPU s, main thread CPU s)."""
        times = psutil.Process(self.pid).cpu_times()
        info = self.client.info("cpu")
        main = float(info["used_cpu_user_main_thread"]) + float(info["used_cpu_sys_main_thread"])
        return times.user + times.system, main


@dataclass
class Deployment:
    shards: int
    cluster: LocalRedisCluster
    nodes: list[Node]
    topics: list[str]
    placement: dict[str, list[str]]
    system: ClusterDelayline
    receipts: Receipts
    scratch: Path
    start_s: float
    receipts_pid: int

    def cpu(self) -> dict[str, tuple[float, float]]:
        return {node.name: node.cpu() for node in self.nodes}

    def bench(self) -> Bench:
        return Bench(self.system, self.nodes[0].pid, self.receipts, random.Random(7))


def describe_nodes(cluster: LocalRedisCluster) -> list[tuple[str, int]]:
    """(name, port) of every node: primaries p0.. by first slot, replica rK of pK."""
    seen = cluster.nodes()
    primaries = sorted((n for n in seen if n.is_primary and n.slots), key=lambda n: min(n.slots))
    names = [(f"p{i}", n.address[1]) for i, n in enumerate(primaries)]
    for i, primary in enumerate(primaries):
        names += [(f"r{i}", n.address[1]) for n in seen if n.primary_id == primary.node_id]
    return names


def parse_spec(spec: str) -> tuple[int, int | None]:
    """A deployment's spec: ``N`` (N shards, each on a primary of its own in turn) or
    ``N@P`` (N shards on the first P primaries only): (N, P or None).

    Raises ValueError for anything else.
    """
    shards, at, over = spec.partition("@")
    bad_over = bool(at) and (not over.isdigit() or int(over) < 1)
    if not shards.isdigit() or int(shards) < 1 or bad_over:
        raise ValueError(f"a deployment is N or N@P (N shards on P primaries), not {spec!r}")
    return int(shards), int(over) if over else None


def place_shards(cluster: LocalRedisCluster, shards: int, over: int | None) -> None:
    """Move shard ``n``'s (empty) slot to the ``n mod P``-th primary, P ``over`` or every
    primary (``slots.spread_shards``), before delayline starts; one shard stays put."""
    primaries = cluster.primaries()[: over or None]
    if shards == 1:
        return
    for shard, slot in enumerate(shard_slots(shards)):
        target = primaries[shard % len(primaries)]
        if cluster.primary_of(keys.layout(shards)[shard].namespace) != target:
            move_empty_slot(cluster, slot, target)


@contextlib.contextmanager
def deployment(spec: str, topics_per_primary: int, logs: Path) -> Iterator[Deployment]:
    """A fresh cluster, receipts Redis, data dir and ``delayline run``; stopped after."""
    shards, over = parse_spec(spec)
    scratch = Path(tempfile.mkdtemp(prefix=f"bench-cluster-{shards}-"))
    cluster = LocalRedisCluster(scratch / "cluster", primaries=3, replicas_per_primary=1)
    receipts_redis = EmbeddedRedis(scratch / "receipts-redis", free_port())
    system: ClusterDelayline | None = None
    try:
        place_shards(cluster, shards, over)
        nodes = []
        for name, port in describe_nodes(cluster):
            client = cluster.node_client(port)
            nodes.append(Node(name, port, int(client.info("server")["process_id"]), client))
        by_port = {node.port: node.name for node in nodes}
        primaries = [node.name for node in nodes if node.name.startswith("p")]
        topics = pick_topics(lambda t: by_port[cluster.primary_of(t)[1]], primaries,
                             topics_per_primary)  # fmt: skip
        placement: dict[str, list[str]] = {name: [] for name in primaries}
        for shard in keys.layout(shards):
            placement[by_port[cluster.primary_of(shard.outbox)[1]]].append(shard.namespace)
        for topic in topics:
            placement[by_port[cluster.primary_of(topic)[1]]].append(topic)
        receipts_redis.start()
        system = ClusterDelayline(cluster.url, receipts_redis.url, scratch / "system",
                                  shards=shards, topics=topics,
                                  node_pids=[node.pid for node in nodes])  # fmt: skip
        began = time.monotonic()
        system.start()
        receipts = Receipts(redis.Redis.from_url(receipts_redis.url))
        yield Deployment(shards, cluster, nodes, topics, placement, system, receipts, scratch,
                         round(time.monotonic() - began, 1),
                         int(receipts.client.info("server")["process_id"]))  # fmt: skip
    finally:
        if system is not None:
            with contextlib.suppress(Exception):
                system.stop()
            keep_logs(system.workdir, logs)
        receipts_redis.stop()
        cluster.close()
        shutil.rmtree(scratch, ignore_errors=True)


def start_producers(dep: Deployment, producers: int, delay_s: tuple[float, float], tag: str,
               extra: dict[str, Any]) -> list[tuple[subprocess.Popen[bytes], Path]]:  # fmt: skip
    """Start the producer processes of one workload; (process, output stem) each."""
    started = []
    for index in range(producers):
        out = dep.scratch / "load" / f"{tag}-{index}"
        config = {"url": dep.system.redis_url, "topics": dep.topics, "index": index,
                  "producers": producers, "seed": 7, "out": str(out),
                  "delay_ms": [int(delay_s[0] * 1000), int(delay_s[1] * 1000)],
                  **extra}  # fmt: skip
        path = write_config(dep.scratch / "load" / f"{tag}-{index}.config.json", config)
        log = dep.system.workdir / f"producer-{tag}-{index}.log"
        process = spawn([sys.executable, "-m", "bench.cluster_load", "produce", path],
                        env=dep.system.child_env(), log=log)  # fmt: skip
        started.append((process, out))
    return started


def check_producers(producers: list[tuple[subprocess.Popen[bytes], Path]]) -> None:
    """Raise RuntimeError at once if a producer failed (its log says why)."""
    for process, out in producers:
        if process.poll() not in (None, 0):
            raise RuntimeError(f"producer {out.name} exited with {process.returncode}")


def wait_producers(
    producers: list[tuple[subprocess.Popen[bytes], Path]], timeout_s: float
) -> list[Any]:
    """Wait for every producer; their reports. Raises RuntimeError if one failed."""
    reports = []
    for process, out in producers:
        if process.wait(timeout=timeout_s) != 0:
            raise RuntimeError(f"producer {out.name} exited with {process.returncode}")
        reports.append(json.loads(out.with_suffix(".json").read_text()))
    return reports
