"""Scheduler settings, as ``delayline run`` takes them, and the data directory's lock.

The settings a checkpoint pins are recorded by :mod:`delayline.scheduler.pinning`.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from delayline.defaults import DEFAULT_DATA_DIR, DEFAULT_REDIS_URL
from delayline.errors import ConfigurationError
from delayline.kafka.records import INBOUND_TOPIC
from delayline.kafka.target import KafkaDelivery
from delayline.redis import keys
from delayline.retention import (
    DEFAULT_HARD_MAX_LEN,
    DEFAULT_MAX_AGE,
    DEFAULT_MAX_LEN,
    RetentionPolicy,
)
from delayline.schedules.ops import SCHEDULE_WEIGHT
from delayline.timing import HORIZON_MS, LEASE_TTL_MS, MAX_SHARDS, Wheel
from delayline.validation import Limits

#: Spark refuses a driver heap under 450 MiB; 512m leaves room for the survivor spaces.
MIN_DRIVER_MEMORY_MB = 512
#: The shortest lease (ms): renewed every fifth of it, it must outlast a busy
#: Redis's replies and a driver's short GC pauses.
MIN_LEASE_MS = 500
_UNIT_MB = {"m": 1, "g": 1024, "t": 1024 * 1024}


def driver_memory_mb(size: str) -> int:
    """MiB in a JVM size such as "512m" or "2g". Raises ConfigurationError if malformed."""
    match = re.fullmatch(r"(\d+)([mgt])", size.strip().lower())
    if match is None:
        raise ConfigurationError(f'driver_memory must look like "512m" or "2g", got {size!r}')
    return int(match.group(1)) * _UNIT_MB[match.group(2)]


def option(default: Any, help: str, flag: str | None = None, aliases: tuple[str, ...] = ()) -> Any:
    """A field that ``delayline run`` takes as an option: ``--<name>`` (or ``flag``),
    with ``help`` (what it does, in its unit) and the field's default; each of
    ``aliases`` is a deprecated flag that still sets it."""
    return field(default=default, metadata={"help": help, "flag": flag, "aliases": aliases})


@dataclass(frozen=True)
class RunOption:
    """A setting as ``delayline run`` takes it."""

    name: str
    flag: str
    type: type
    default: Any
    help: str
    #: Deprecated flags that still set it (``delayline run`` warns when one is used).
    aliases: tuple[str, ...] = ()


def run_options() -> list[RunOption]:
    """The settings that ``delayline run`` takes as options, in field order."""
    found = []
    for spec in fields(SchedulerSettings):
        if "help" not in spec.metadata:
            continue
        flag = spec.metadata["flag"] or "--" + spec.name.replace("_", "-")
        kind = int if isinstance(spec.default, int) else str
        found.append(
            RunOption(
                spec.name, flag, kind, spec.default, spec.metadata["help"], spec.metadata["aliases"]
            )
        )
    return found


@dataclass(frozen=True)
class SchedulerSettings:
    """How the scheduler runs. Times are ms.

    ``tick_ms`` is the width of a wheel slot; ``shards`` splits each slot over
    that many state keys; ``state_partitions`` is Spark's shuffle partition
    count; ``trigger_ms`` the micro-batch interval; ``horizon_ms`` the horizon:
    how early a slot's timer fires, and how soon a message must be due for
    producers and the source to send it straight to the outbox (near or far is
    :func:`delayline.timing.is_near`; the pump still holds each one until it is
    due). ``cascade_ahead_ms`` is not the horizon: it is how early a coarse slot
    hands its messages down to fine slots. With no input and no timer due, no
    batch runs for up to ``idle_batch_ms``.
    """

    redis_url: str = DEFAULT_REDIS_URL
    data_dir: Path = DEFAULT_DATA_DIR
    # The job keeps its state in RocksDB, off the heap; under spark-submit, its
    # own spark.driver.memory wins.
    master: str | None = option(
        None,
        "Spark master (spark://..., local-cluster[...]) [default: local[2,4], or "
        "spark-submit's master under spark-submit].",
    )
    checkpoint: str | None = option(
        None,
        "Where Spark keeps offsets and state, any Hadoop URI (hdfs://, s3a://) "
        "[default: <data-dir>/checkpoint].",
    )
    driver_memory: str = option("512m", "Heap of the Spark driver JVM, at least 512m.")
    tick_ms: int = option(500, "Width of a wheel slot, ms. Pinned by the checkpoint.")
    coarse_tick_ms: int = option(60_000, "Width of a coarse slot, ms. Pinned.")
    coarse_after_ms: int = option(
        300_000, "Messages due further ahead than this wait in coarse slots, ms. Pinned."
    )
    cascade_ahead_ms: int = option(
        120_000,
        "Coarse slots hand their messages down to fine slots this early, ms. Pinned.",
        aliases=("--cascade-lead-ms",),
    )
    shards: int = option(
        4, "State keys per slot, so that a burst due at one instant spreads out. Pinned."
    )
    state_partitions: int = option(2, "State partitions. Pinned.", flag="--partitions")
    trigger_ms: int = option(500, "Micro-batch interval, ms.")
    horizon_ms: int = option(
        HORIZON_MS,
        "The horizon, ms: fire slots this early, and send what is due within it straight "
        "to the outbox, which holds it until due. Changes only with no batch in flight.",
        aliases=("--lead-ms",),
    )
    # A safety net should a wakeup be lost; at most the horizon, so that a lost
    # wakeup still fires its slot before its messages are due.
    idle_batch_ms: int = option(
        60_000, "Longest time without a batch when idle, ms (each costs about a CPU-second)."
    )
    max_batch_rows: int = option(
        50_000,
        f"Inbound records per batch at most (a schedule's record counts as {SCHEDULE_WEIGHT}).",
    )
    source_partitions: int = option(2, "Partitions an inbound batch is read in.")
    inbound_shards: int = option(
        1,
        "Redis shards: each message's inbound stream (a source partition), outbox, pump and "
        "status records, by a hash of its id. Pinned: change it with a drain. Not given: the "
        "checkpoint's, or for a new one 1, or on a Redis Cluster the number of its primaries.",
    )
    kafka: str | None = option(
        None,
        "Kafka brokers (host:port,...): read producers' records from the Kafka inbound topic "
        "too, and deliver due messages to Kafka topics instead of to Redis streams.",
    )
    kafka_delivery: str = option(
        KafkaDelivery.AT_LEAST_ONCE.value,
        "With --kafka: at-least-once, or exactly-once (each pump's writes in Kafka "
        "transactions; consumers read with isolation.level=read_committed).",
    )
    kafka_inbound_topic: str = option(
        INBOUND_TOPIC,
        "With --kafka, the topic producers write records to; created if missing.",
    )
    cancel_retention_ms: int = option(
        3_600_000, "How long a cancel is kept after its slot is due, for a late message, ms."
    )
    journal_retention_ms: int = option(
        keys.JOURNAL_RETENTION_MS,
        "How long delivered, cancelled and rejected ids are remembered (dedupe by id, and "
        "status), ms; 0: off.",
    )
    topic_retention: str = option(
        DEFAULT_MAX_AGE,
        "Keep topic entries this long once every consumer group acknowledged them (24h, "
        "90m; 0: no age bound); PATTERN=AGE overrides, comma separated: '24h,audit.*=7d'.",
    )
    topic_max_len: str = option(
        DEFAULT_MAX_LEN,
        "Keep at most this many acknowledged entries per topic stream (0: no bound); "
        "PATTERN=N overrides, comma separated.",
    )
    topic_hard_max_len: str = option(
        DEFAULT_HARD_MAX_LEN,
        "Trim a topic stream to this many entries even if a consumer group has not read "
        "them, counted as topic_trimmed_unread (0: never); PATTERN=N overrides.",
    )
    lease_ms: int = option(
        LEASE_TTL_MS,
        "How long the scheduler's lease lasts unrenewed, ms: a standby (--standby) takes "
        "over this long after the active scheduler stops renewing it (every fifth of it).",
    )
    limits: Limits = field(default_factory=Limits)
    #: The fencing token of the lease this scheduler took (redis/lease.py), which its
    #: writes carry; 0 until it takes the lease. Not an option: set at takeover.
    fence_token: int = 0

    def __post_init__(self) -> None:
        positive = (
            "tick_ms",
            "shards",
            "state_partitions",
            "trigger_ms",
            "max_batch_rows",
            "source_partitions",
            "inbound_shards",
            "idle_batch_ms",
        )
        for name in positive:
            if getattr(self, name) < 1:
                raise ConfigurationError(f"{name} must be at least 1, got {getattr(self, name)}")
        for name in ("horizon_ms", "cancel_retention_ms", "journal_retention_ms"):
            if getattr(self, name) < 0:
                raise ConfigurationError(f"{name} must not be negative, got {getattr(self, name)}")
        self.delivery_to_kafka  # noqa: B018 (refuses an unknown mode now)
        self.retention_policy  # noqa: B018 (refuses a malformed rule now, not in a thread)
        if driver_memory_mb(self.driver_memory) < MIN_DRIVER_MEMORY_MB:
            raise ConfigurationError(
                f"driver_memory must be at least {MIN_DRIVER_MEMORY_MB}m (Spark's floor), "
                f"got {self.driver_memory}"
            )
        if self.lease_ms < MIN_LEASE_MS:
            raise ConfigurationError(
                f"lease_ms must be at least {MIN_LEASE_MS}, got {self.lease_ms}"
            )
        if self.shards > MAX_SHARDS:
            raise ConfigurationError(f"shards must be at most {MAX_SHARDS}, got {self.shards}")
        try:
            self.wheel  # noqa: B018 - validates the wheel's shape
        except ValueError as exc:
            raise ConfigurationError(str(exc)) from exc

    @property
    def wheel(self) -> Wheel:
        """The two-level wheel these settings describe."""
        return Wheel(self.tick_ms, self.coarse_tick_ms, self.coarse_after_ms, self.cascade_ahead_ms)

    @property
    def journal_ttl_s(self) -> int:
        """``journal_retention_ms`` in whole seconds, as the delivery scripts take it
        (the source's hand-off, the sink and the pumps)."""
        return self.journal_retention_ms // 1000

    @property
    def retention_policy(self) -> RetentionPolicy:
        """The topic streams' retention (delayline/retention.py). Raises ConfigurationError."""
        return RetentionPolicy.parse(
            self.topic_retention, self.topic_max_len, self.topic_hard_max_len
        )

    @property
    def delivery_to_kafka(self) -> KafkaDelivery:
        """``kafka_delivery`` as a mode. Raises ConfigurationError if it names none."""
        try:
            return KafkaDelivery(self.kafka_delivery)
        except ValueError:
            modes = " or ".join(mode.value for mode in KafkaDelivery)
            raise ConfigurationError(
                f"kafka_delivery must be {modes}, got {self.kafka_delivery!r}"
            ) from None

    @property
    def checkpoint_location(self) -> str:
        """Spark's checkpoint: offsets, commits and the RocksDB state."""
        return self.checkpoint or str((self.data_dir / "checkpoint").resolve())

    def to_json(self) -> str:
        """Serialize, to pass the settings to Spark data sources as an option."""
        data = asdict(self)
        data["data_dir"] = str(self.data_dir)
        return json.dumps(data)

    @classmethod
    def from_json(cls, text: str) -> SchedulerSettings:
        """Inverse of :meth:`to_json`."""
        data: dict[str, Any] = json.loads(text)
        data["data_dir"] = Path(data["data_dir"])
        data["limits"] = Limits(**data["limits"])
        return cls(**data)

    def with_overrides(self, **overrides: Any) -> SchedulerSettings:
        """A copy with the given fields replaced; None values are ignored."""
        known = {f.name for f in fields(self)}
        return replace(self, **{k: v for k, v in overrides.items() if v is not None and k in known})


#: The data directory holds every message body (the AOF, the checkpoint): only its
#: user may enter it, and what is written in it while the lock is held is 0600.
PRIVATE_DIR_MODE = 0o700
PRIVATE_UMASK = 0o077


@contextmanager
def data_dir_lock(data_dir: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``data_dir`` for as long as the block runs, with the
    directory private to its user and the process's umask 077 (so the embedded
    server, Spark and delayline create their files 0600).

    Two schedulers on one checkpoint would corrupt it. The kernel drops the
    lock when the process dies, even by SIGKILL. Raises ConfigurationError if
    another process holds it, or if ``.lock`` is a symbolic link (it is opened
    without following one, and never truncated).
    """
    data_dir.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)
    with contextlib.suppress(PermissionError):  # another user's: theirs to set
        data_dir.chmod(PRIVATE_DIR_MODE)
    lock_path = data_dir / ".lock"
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        descriptor = os.open(lock_path, flags, 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ConfigurationError(
                f"{lock_path.resolve(strict=False)} is a symbolic link; delayline will not "
                f"follow it: remove {lock_path}"
            ) from None
        raise ConfigurationError(f"cannot open {lock_path}: {exc.strerror}") from None
    umask = os.umask(PRIVATE_UMASK)
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ConfigurationError(
                f"another delayline scheduler is running on {data_dir.resolve()}"
            ) from None
        yield
    finally:
        os.umask(umask)
        os.close(descriptor)
