"""The Spark session the scheduler runs in: RocksDB state, quiet logs, our Python."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

from pyspark import java_gateway
from pyspark.sql import SparkSession

from delayline.lifetime import die_with_parent
from delayline.scheduler.runtime.java import check_java
from delayline.scheduler.runtime.priority import SPARK_NICENESS, lower_session
from delayline.scheduler.settings import SchedulerSettings

_ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"

#: RocksDB's memory budget (MiB) for all state partitions together: memtables
#: flush when their half is full, and reads are point lookups of a slot's key.
STATE_MEMORY_MB = 64

#: How often a local driver's JVM returns freed native memory to the system (ms).
TRIM_NATIVE_HEAP_INTERVAL_MS = 5_000

#: A local driver is also the executor, on a small machine: the serial collector
#: needs no remembered sets or concurrent threads (G1's cost 55 MB here), and
#: the heap gives back what a full collection frees: all of it at once, not a
#: part per collection (ShrinkHeapInSteps), since the runner collects once when
#: a load is over (quiet.py). Most of the JVM's memory is not its heap but
#: malloc's (RocksDB, Spark's native buffers), and glibc keeps what is freed:
#: every few seconds the JVM hands it back (TrimNativeHeapInterval, JDK 17.0.9+;
#: an older JVM ignores it).
LOCAL_JVM_OPTIONS = [
    "-Xms64m",
    "-XX:+UseSerialGC",
    "-XX:MinHeapFreeRatio=10",
    "-XX:MaxHeapFreeRatio=30",
    "-XX:-ShrinkHeapInSteps",
    f"-XX:TrimNativeHeapInterval={TRIM_NATIVE_HEAP_INTERVAL_MS}",
]

#: Two threads, and up to 4 attempts per task: every stage resumes safely.
LOCAL_MASTER = "local[2,4]"


def resolve_master(settings: SchedulerSettings) -> str | None:
    """The master to set: the configured one, else spark-submit's (None), else LOCAL_MASTER."""
    if settings.master:
        return settings.master
    return None if "PYSPARK_GATEWAY_PORT" in os.environ else LOCAL_MASTER


def runs_locally(settings: SchedulerSettings) -> bool:
    """True if the driver's JVM starts on this machine under a local master."""
    return (resolve_master(settings) or "").startswith("local")


@contextlib.contextmanager
def children_write_to(log_path: Path | None) -> Iterator[None]:
    """While the block runs, point this process's stdout and stderr at ``log_path``
    (appended to), so that a child started meanwhile writes there for good.

    The driver JVM is such a child, and every Python worker it starts inherits
    its output: their warnings and chatter go to the log, not the console.
    None: no change.
    """
    if log_path is None:
        yield
        return
    log_path.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    try:
        with open(log_path, "ab") as log:
            os.dup2(log.fileno(), 1)
            os.dup2(log.fileno(), 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, original in enumerate(saved, start=1):
            os.dup2(original, fd)
            os.close(original)


@contextlib.contextmanager
def sigint_left_to_us() -> Iterator[None]:
    """While the block runs, this process ignores SIGINT, and so, for good, does a
    child started meanwhile; then the handler from before the block is back.

    Ctrl-C at a terminal signals the whole foreground process group, the driver
    JVM included, which would exit at once, in the middle of a batch. A JVM
    that finds SIGINT ignored at its start installs no handler for it (HotSpot
    leaves a signal ignored by its parent alone, as under nohup). PySpark, for
    its part, installs a SIGINT handler of its own when its context starts
    (cancel the running jobs, raise KeyboardInterrupt), which the restore
    undoes. ``delayline run`` then stops the query between batches. Only the
    main thread may set a handler: elsewhere nothing changes.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextlib.contextmanager
def jvm_in_a_session_of_its_own() -> Iterator[None]:
    """A driver JVM started while the block runs leads a session of its own, and is
    SIGKILLed by the kernel when this process ends.

    ``kill -TERM -- -PGID`` signals the whole process group: a JVM in it would
    exit at once, in the middle of a batch, and PySpark would fail with an
    EOFError. Out of it, the JVM is stopped by ``delayline run`` once the
    current batch has finished. Ignoring SIGTERM instead would not do: the
    processes the JVM starts would inherit that, and outlive the SIGTERM it
    stops them with. A ``kill -9`` of ``delayline run`` still takes the JVM at
    once, as when it was in the group. PySpark sets its own ``preexec_fn`` on
    the JVM's Popen (it ignores SIGINT), so ours goes around its Popen, the
    one seam it has. Only from the main thread: the kernel's signal follows
    the thread that started the JVM, and another thread may end first.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    original: Any = getattr(java_gateway, "Popen")  # noqa: B009  (not exported)

    def popen(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        theirs = kwargs.get("preexec_fn")

        def preexec() -> None:  # in the child, between fork and exec
            if theirs is not None:
                theirs()
            os.setsid()
            die_with_parent(signal.SIGKILL)

        started: subprocess.Popen[bytes] = original(*args, **{**kwargs, "preexec_fn": preexec})
        return started

    setattr(java_gateway, "Popen", popen)  # noqa: B010
    try:
        yield
    finally:
        setattr(java_gateway, "Popen", original)  # noqa: B010


def build_session(settings: SchedulerSettings, spark_log: Path | None = None) -> SparkSession:
    """Start (or reuse) the Spark session for ``settings.master``.

    A JVM started here writes its output, and its workers theirs, to
    ``spark_log`` (None: this process's stdout and stderr). Raises
    JavaNotFoundError before Spark would fail with a Py4J trace.
    """
    check_java()
    # Workers must run this interpreter (the one with delayline installed), not
    # whatever "python3" is first on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    master = resolve_master(settings)
    local = runs_locally(settings)
    log_config = resources.files("delayline.scheduler.runtime") / "log4j2.properties"
    java_options = [f"-Dlog4j2.configurationFile=file:{log_config}"]
    if local:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        # RocksDB allocates from many threads; glibc would give each its own arena.
        os.environ.setdefault("MALLOC_ARENA_MAX", "2")
        java_options += LOCAL_JVM_OPTIONS
    scratch = (settings.data_dir / "spark-tmp").resolve()
    scratch.mkdir(parents=True, exist_ok=True)
    builder = SparkSession.builder.master(master) if master else SparkSession.builder
    if "PYSPARK_GATEWAY_PORT" not in os.environ:  # this process starts the driver JVM
        builder = builder.config("spark.driver.memory", settings.driver_memory)
    with children_write_to(spark_log), sigint_left_to_us(), jvm_in_a_session_of_its_own():
        spark = _configured(builder, settings, java_options, scratch).getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    if local:
        yield_cpu_to_the_fine_wheel(spark)
    return spark


def _configured(
    builder: SparkSession.Builder,
    settings: SchedulerSettings,
    java_options: list[str],
    scratch: Path,
) -> SparkSession.Builder:
    """``builder`` with delayline's Spark configuration."""
    return (
        builder.appName("delayline")
        .config("spark.driver.extraJavaOptions", " ".join(java_options))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.local.dir", str(scratch))
        # Workers fork from a daemon that has imported what they use (see worker_daemon.py).
        .config("spark.python.daemon.module", "delayline.scheduler.runtime.worker_daemon")
        .config("spark.sql.shuffle.partitions", str(settings.state_partitions))
        .config("spark.sql.streaming.stateStore.providerClass", _ROCKSDB)
        .config("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled", "true")
        .config("spark.sql.streaming.stateStore.encodingFormat", "avro")
        # One memory budget for every RocksDB instance (memtables and block cache),
        # so the JVM does not grow with the pending messages: they are on disk.
        .config("spark.sql.streaming.stateStore.rocksdb.boundedMemoryUsage", "true")
        .config("spark.sql.streaming.stateStore.rocksdb.maxMemoryUsageMB", str(STATE_MEMORY_MB))
        # An idle query with timers would run a batch every trigger (SPARK-50180);
        # the source wakes one when a timer is due instead (see source.py).
        .config("spark.sql.streaming.noDataMicroBatches.enabled", "false")
        # Each batch adds checkpoint files; keep the tail short.
        .config("spark.sql.streaming.minBatchesToRetain", "20")
        # The offset and commit logs and state changelogs go through FileContext:
        # raw local, without a .crc file beside each. RocksDB's snapshot upload
        # goes through FileSystem.getLocal, which must stay a LocalFileSystem.
        .config(
            "spark.hadoop.fs.AbstractFileSystem.file.impl", "org.apache.hadoop.fs.local.RawLocalFs"
        )
    )


def yield_cpu_to_the_fine_wheel(spark: SparkSession) -> None:
    """Lower the CPU priority of the local Spark JVM, every thread of it, and so the
    Python workers it starts later (they inherit it), and of the session it leads:
    see priority.py. Linux only (``/proc``); elsewhere, and for a JVM already
    gone, nothing changes.
    """
    gateway = getattr(spark.sparkContext, "_gateway", None)
    process = getattr(gateway, "proc", None)
    if process is None:
        return
    threads = Path(f"/proc/{process.pid}/task")
    for thread in threads.iterdir() if threads.is_dir() else []:
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            os.setpriority(os.PRIO_PROCESS, int(thread.name), SPARK_NICENESS)
    lower_session(process.pid, SPARK_NICENESS)
