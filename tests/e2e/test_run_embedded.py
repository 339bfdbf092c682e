"""``delayline run`` as a user runs it: embedded Redis, Client(), Ctrl-C."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import redis

from delayline import Client
from delayline.scheduler.runtime.session import SPARK_NICENESS, TRIM_NATIVE_HEAP_INTERVAL_MS
from delayline.testing import free_port
from tests.support.harness import SchedulerProcess, wait_for
from tests.support.processes import session_nice

pytestmark = pytest.mark.spark


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def arguments(process: psutil.Process) -> list[str]:
    """A process's command line; none for one that has exited (or is a zombie) meanwhile."""
    try:
        return process.cmdline()
    except psutil.Error:
        return []


def test_run_delivers_and_stops_cleanly_on_ctrl_c(data_dir: Path) -> None:
    port, api_port = free_port(), free_port()
    args = ["--redis-port", str(port), "--api-port", str(api_port), "--data-dir", str(data_dir),
            "--topic-max-len", "3"]  # fmt: skip
    with SchedulerProcess(args) as service:
        url = service.embedded_url
        assert url.startswith("redis://:")
        assert url.endswith(f"@127.0.0.1:{port}/0")
        password = url.split(":")[2].split("@")[0]
        assert password not in service.output
        server = "embedded Valkey 8.1.8 with mimalloc, AOF everysec"
        line = f"redis     redis://:***@127.0.0.1:{port}/0 ({server})"
        assert line in service.output
        assert f"http api  http://127.0.0.1:{api_port} (auth off)" in service.output
        client = Client(url)
        sent_ms = time.time_ns() // 1_000_000
        message_id = client.send("orders.timeout", b"order-42", delay=1_000)
        raw = redis.Redis.from_url(url)
        wait_for(lambda: raw.xlen("orders.timeout") == 1, 30, "the delivery")
        [(entry_id, fields)] = raw.xrange("orders.timeout")
        assert fields[b"id"].decode() == message_id
        assert int(entry_id.split(b"-")[0]) >= sent_ms + 1_000
        # The topic keeps about its newest 3 (whole stream nodes go) once its consumer
        # group acknowledged the rest.
        raw.xgroup_create("orders.timeout", "billing", id="0")
        client.send_many([{"topic": "orders.timeout", "body": b"o", "delay": 500}] * 299)

        def acknowledged() -> int:
            for _, entries in raw.xreadgroup("billing", "c", {"orders.timeout": ">"}) or []:
                raw.xack("orders.timeout", "billing", *(entry for entry, _ in entries))
            counters = raw.hgetall("delayline:stats")
            return int(counters.get(b"topic_trimmed", 0)) + raw.xlen("orders.timeout")

        wait_for(lambda: acknowledged() == 300, 30, "300 deliveries, read and acknowledged")
        # Each trim is counted: what is left and what went add up to what was delivered.
        wait_for(
            lambda: raw.xlen("orders.timeout") < 103 and acknowledged() == 300,
            30,
            "the trim to about the newest 3",
        )
        assert raw.xlen("orders.timeout") >= 3
        raw.close()
        client.close()
        assert list((data_dir / "redis" / "appendonlydir").glob("*.incr.aof"))
        # The fine wheel (pump, Redis) gets a core before Spark: the JVM and its
        # Python workers run niced, delayline run and valkey-server do not.
        family = psutil.Process(service.process.pid).children(recursive=True)
        niceness = {p.pid: (p.name(), p.nice()) for p in family if p.is_running()}
        assert psutil.Process(service.process.pid).nice() == 0
        assert {nice for name, nice in niceness.values() if name == "java"} == {SPARK_NICENESS}
        assert {nice for name, nice in niceness.values() if "valkey" in name} == {0}
        workers = [nice for name, nice in niceness.values() if name.startswith("python")]
        assert workers
        assert set(workers) == {SPARK_NICENESS}
        # And the JVM's session as a whole, where the kernel ranks sessions as groups.
        [jvm] = [pid for pid, (name, _) in niceness.items() if name == "java"]
        [server] = [pid for pid, (name, _) in niceness.items() if "valkey" in name]
        assert session_nice(jvm) == SPARK_NICENESS
        assert session_nice(server) == session_nice(service.process.pid) == 0
        # A right-sized JVM, and task workers forked from a daemon that preloaded them.
        commands = [arguments(p) for p in family]
        [java] = [args for args in commands if args and Path(args[0]).name == "java"]
        assert "-Xmx512m" in java
        assert "-XX:-ShrinkHeapInSteps" in java  # one quiet collection gives the heap back
        assert f"-XX:TrimNativeHeapInterval={TRIM_NATIVE_HEAP_INTERVAL_MS}" in java
        daemons = [args for args in commands if "pyspark.worker" in args]
        assert daemons
        assert all("delayline.scheduler.runtime.worker_daemon" in args for args in daemons)

        # The JVM gets the SIGINT too, and leaves it to delayline run, which stops
        # the query between batches (SIGTERM takes the same way).
        started = time.monotonic()
        assert service.interrupt(timeout_s=60) == 0
        assert time.monotonic() - started < 60
        assert "stopping: letting the current batch finish" in service.output
        assert "stopped" in service.output
        # The console has delayline's own lines only; Spark's output is in its log.
        spark_log = (data_dir / "spark.log").resolve()
        assert f"spark log {spark_log}" in service.output
        assert "Using incubator modules" in spark_log.read_text()
        own = ("redis ", "data dir ", "http api ", "spark log ", "lease ",
               "starting the scheduler ", "spark     starting: ", "scheduler running ",
               "accepted ", "stopping: ", "stopped")  # fmt: skip
        # Spark's start takes longer than a tick: it said it was still starting.
        assert "spark     starting: 5 s" in service.output
        strangers = [line for line in service.output.splitlines() if not line.startswith(own)]
        assert strangers == []
        assert not port_open(port), "the embedded Redis outlived delayline run"
        assert not port_open(api_port), "the HTTP API outlived delayline run"
        # A clean stop leaves nothing behind: no Python worker, no redis-server.
        wait_for(lambda: not service.leftovers(), 30, "the scheduler's processes to exit")


def test_missing_java_is_one_clear_line(data_dir: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = str(Path(sys.executable).parent)  # the venv's bin: python, no java
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "delayline",
            "run",
            "--redis-port",
            str(free_port()),
            "--api-port",
            str(free_port()),
            "--data-dir",
            str(data_dir),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 2
    errors = [line for line in completed.stderr.splitlines() if line.strip()]
    assert errors == [
        "error: Java 17 or newer is needed to run the scheduler: install a JRE "
        "(Debian/Ubuntu: apt-get install openjdk-17-jre-headless) or set JAVA_HOME"
    ]
    assert "Traceback" not in completed.stderr + completed.stdout


def test_a_killed_spark_jvm_ends_the_run_with_what_to_do(data_dir: Path) -> None:
    # The kernel's OOM killer, or an operator's kill -9, takes the JVM alone.
    args = ["--redis-port", str(free_port()), "--no-api", "--data-dir", str(data_dir)]
    with SchedulerProcess(args) as service:
        assert service.process is not None
        family = psutil.Process(service.process.pid).children(recursive=True)
        [jvm] = [process for process in family if process.name() == "java"]
        jvm.kill()
        assert service.process.wait(60) == 1
        wait_for(lambda: "error: " in service.output, 10, "the error line")
        [error] = [line for line in service.output.splitlines() if line.startswith("error: ")]
        assert error.startswith("error: the Spark JVM stopped answering")
        assert "start delayline run again" in error
        assert str((data_dir / "spark.log").resolve()) in error
        wait_for(lambda: not service.leftovers(), 30, "the scheduler's processes to exit")
