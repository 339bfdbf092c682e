"""A Spark standalone cluster on this machine, started the way operators start one.

The pyspark package ships ``bin/spark-class`` but not Spark's ``sbin`` scripts:
:func:`up` runs a Master and Workers from it, each in a session of its own,
writing to ``<directory>/logs``, and records what it started in
``<directory>/cluster.json``; :func:`down` stops them. ``delayline run
--master <master_url>`` then runs the scheduler on it, as on any cluster.

Every process started here, and so every executor and Python worker the
Workers start in turn, carries ``TAG_VARIABLE`` in its environment: :func:`down`
finds the ones that left their session too.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from delayline.errors import ClusterError
from delayline.scheduler.runtime.java import check_java
from delayline.scheduler.runtime.priority import SPARK_NICENESS, lower_session, lower_to

#: Marks the processes of one cluster: its directory, resolved.
TAG_VARIABLE = "DELAYLINE_CLUSTER"
#: What :func:`up` records, in the cluster's directory.
RECORD_FILE = "cluster.json"
#: How long the Master and the Workers have to come up (s); a JVM starts in 5-10 s.
START_TIMEOUT_S = 120.0
#: How long they have to stop after SIGTERM before SIGKILL (s).
STOP_TIMEOUT_S = 15.0

_MASTER_CLASS = "org.apache.spark.deploy.master.Master"
_WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


@dataclass(frozen=True)
class ClusterSpec:
    """What to start: one Master and ``workers`` Workers, all on ``host``."""

    directory: Path
    host: str = "127.0.0.1"
    port: int = 7077
    webui_port: int = 8080
    workers: int = 2
    #: Cores and memory that each Worker offers (Spark's size syntax: 1g, 512m).
    cores: int = 1
    memory: str = "1g"
    #: How much nicer than this process the Master, the Workers and so their
    #: executors run: on one machine, Redis and the pump first, as in local mode.
    niceness: int = SPARK_NICENESS


@dataclass(frozen=True)
class RunningCluster:
    """A cluster that :func:`up` started, as recorded in its directory."""

    master_url: str
    webui_url: str
    #: Process ids by role: "master", "worker-1", "worker-2", ...
    pids: dict[str, int]

    @classmethod
    def recorded_in(cls, directory: Path) -> RunningCluster:
        """The cluster recorded in ``directory``. Raises ClusterError if there is none."""
        try:
            data = json.loads((directory / RECORD_FILE).read_text(encoding="utf-8"))
            return cls(data["master_url"], data["webui_url"], dict(data["pids"]))
        except FileNotFoundError:
            raise ClusterError(f"no cluster was started from {directory}") from None
        except (ValueError, KeyError, TypeError) as exc:
            raise ClusterError(f"{directory / RECORD_FILE} is not a cluster record: {exc}") from exc

    def state(self) -> dict[str, Any]:
        """The Master's own account (its web UI's JSON): ``status``, ``aliveworkers``,
        ``cores``, ``coresused``, ``activeapps``... Raises ClusterError if it does not answer."""
        try:
            with urllib.request.urlopen(self.webui_url + "/json/", timeout=5) as response:
                state: dict[str, Any] = json.load(response)
                return state
        except (OSError, ValueError) as exc:
            raise ClusterError(f"the Master at {self.webui_url} does not answer: {exc}") from exc


def spark_home() -> Path:
    """``$SPARK_HOME``, else the installed pyspark package (it ships ``bin/spark-class``).

    Raises ClusterError if neither has ``bin/spark-class``.
    """
    if "SPARK_HOME" in os.environ:
        home = Path(os.environ["SPARK_HOME"])
    else:
        spec = importlib.util.find_spec("pyspark")
        locations = spec.submodule_search_locations if spec else None
        if not locations:
            raise ClusterError("pyspark is not installed: pip install 'delayline[server]'")
        home = Path(locations[0])
    if not (home / "bin" / "spark-class").is_file():
        raise ClusterError(f"{home} has no bin/spark-class: set SPARK_HOME to a Spark 4.3")
    return home


def up(spec: ClusterSpec, timeout_s: float = START_TIMEOUT_S) -> RunningCluster:
    """Start the cluster and wait until the Master counts every Worker alive.

    Raises ClusterError if one is running from ``spec.directory`` already, or if a
    process exits or the Workers are not all alive within ``timeout_s`` (what was
    started is stopped again); JavaNotFoundError without Java 17.
    """
    directory = spec.directory.resolve()
    running = _recorded_or_none(directory)
    if running is not None and _alive(running.pids.get("master", 0)):
        raise ClusterError(
            f"a cluster runs from {directory} already ({running.master_url}): "
            f"delayline cluster down --dir {spec.directory}"
        )
    check_java()
    home = spark_home()
    (directory / "logs").mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "SPARK_HOME": str(home),
        "SPARK_LOCAL_IP": spec.host,
        TAG_VARIABLE: str(directory),
        # Its REST submission server would take port 6066 whatever --port says.
        "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
    }
    cluster = RunningCluster(
        f"spark://{spec.host}:{spec.port}", f"http://{spec.host}:{spec.webui_port}", {}
    )
    master = [_MASTER_CLASS, "--host", spec.host, "--port", str(spec.port)]
    try:
        options = ["--webui-port", str(spec.webui_port)]
        start = functools.partial(_start, home, directory, env=env, niceness=spec.niceness)
        cluster.pids["master"] = start("master", master, options)
        _wait(cluster, directory, lambda state: state.get("status") == "ALIVE", timeout_s, "Master")
        for n in range(1, spec.workers + 1):
            name = f"worker-{n}"
            (directory / name).mkdir(exist_ok=True)
            worker = [_WORKER_CLASS, cluster.master_url, "--host", spec.host]
            options = ["--cores", str(spec.cores), "--memory", spec.memory,
                       "--webui-port", "0", "--work-dir", str(directory / name)]  # fmt: skip
            cluster.pids[name] = start(name, worker, options)
        _wait(
            cluster,
            directory,
            lambda state: state.get("aliveworkers", 0) >= spec.workers,
            timeout_s,
            f"{spec.workers} Workers",
        )
    except BaseException:
        _stop(cluster.pids.values(), directory)
        raise
    (directory / RECORD_FILE).write_text(json.dumps(asdict(cluster), indent=2), encoding="utf-8")
    return cluster


def down(directory: Path) -> int:
    """Stop the cluster started from ``directory``: SIGTERM, then SIGKILL after
    STOP_TIMEOUT_S, and every process that carries its tag. Returns how many
    processes were stopped. Raises ClusterError if none was started from there."""
    directory = directory.resolve()
    cluster = RunningCluster.recorded_in(directory)
    stopped = _stop(cluster.pids.values(), directory)
    (directory / RECORD_FILE).unlink()
    return stopped


def _recorded_or_none(directory: Path) -> RunningCluster | None:
    try:
        return RunningCluster.recorded_in(directory)
    except ClusterError:
        return None


def _start(
    home: Path,
    directory: Path,
    name: str,
    command: list[str],
    options: list[str],
    *,
    env: dict[str, str],
    niceness: int,
) -> int:
    """Start ``spark-class <command> <options>`` in a session of its own, ``niceness``
    nicer and its session too; its pid (spark-class execs the JVM, so it is the JVM's)."""
    with open(directory / "logs" / f"{name}.log", "ab") as log:
        process = subprocess.Popen(
            [str(home / "bin" / "spark-class"), *command, *options],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
            preexec_fn=functools.partial(lower_to, niceness),
        )
    lower_session(process.pid, niceness)
    return process.pid


def _wait(
    cluster: RunningCluster,
    directory: Path,
    ready: Callable[[dict[str, Any]], bool],
    timeout_s: float,
    what: str,
) -> None:
    """Poll the Master until ``ready(state)``; raise ClusterError, with the log's
    tail, if a process exits or ``timeout_s`` passes first."""
    deadline = time.monotonic() + timeout_s
    while True:
        for name, pid in cluster.pids.items():
            if not _alive(pid):
                raise ClusterError(f"the {name} exited: {_tail(directory, name)}")
        with contextlib.suppress(ClusterError):
            if ready(cluster.state()):
                return
        if time.monotonic() > deadline:
            raise ClusterError(f"{what} not up within {timeout_s:.0f} s; see {directory / 'logs'}")
        time.sleep(0.25)


def _tail(directory: Path, name: str, lines: int = 5) -> str:
    """The last lines of a process's log, on one line."""
    path = directory / "logs" / f"{name}.log"
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return f"no log at {path}"
    return " | ".join(line.strip() for line in text.splitlines()[-lines:]) + f" (log: {path})"


def _alive(pid: int) -> bool:
    """True if ``pid`` runs and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _tagged(directory: Path) -> Iterator[int]:
    """Pids of the processes whose environment carries this cluster's tag (Linux)."""
    tag = f"{TAG_VARIABLE}={directory}".encode() + b"\0"
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid():
            with contextlib.suppress(OSError):
                if tag in (proc / "environ").read_bytes():
                    yield int(proc.name)


def _stop(pids: Iterable[int], directory: Path) -> int:
    """SIGTERM the sessions of ``pids`` (a JVM shuts down its executors), then
    SIGKILL whatever of them, or of the cluster's tagged processes, is left."""
    started = [pid for pid in pids if _alive(pid)]
    for pid in started:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while any(_alive(pid) for pid in started) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = {pid for pid in started if _alive(pid)} | set(_tagged(directory))
    for pid in left:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    return len(started) + len(left - set(started))
