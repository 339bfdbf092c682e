"""The layers of the package, checked so that a stray import fails here rather
than on a user's machine: the pure core by reading its imports (importing it
would run the package's ``__init__``, the client's), the client by importing it
in a fresh interpreter in which the server's packages cannot be imported."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import delayline
from delayline.cli.options import SERVER_MODULES

#: The scheduler's pure modules: ``delayline run --help`` shows the settings.
SCHEDULER_PURE = ("delayline.scheduler.settings", "delayline.scheduler.runtime.quiet")
#: The pure core: the message model, validation, ids, time and wheel math, the
#: sans-IO plans, the rows the sink hands to Redis. No I/O library, no server part.
PURE_CORE = (
    "delayline.chunking",
    "delayline.defaults",
    "delayline.errors",
    "delayline.forecast",
    "delayline.groups",
    "delayline.history",
    "delayline.ids",
    "delayline.kafka",
    "delayline.kafka.records",
    "delayline.kafka.target",
    "delayline.kafka.topics",
    "delayline.limits",
    "delayline.listing",
    "delayline.metrics",
    "delayline.model",
    "delayline.moments",
    "delayline.plans",
    "delayline.plans.consuming",
    "delayline.plans.grouping",
    "delayline.plans.limiting",
    "delayline.plans.observing",
    "delayline.plans.producing",
    "delayline.plans.quotas",
    "delayline.plans.scheduling",
    "delayline.redis.compaction",
    "delayline.retention",
    "delayline.retry",
    "delayline.rows",
    "delayline.schedules",
    "delayline.schedules.ahead",
    "delayline.schedules.listed",
    "delayline.schedules.ops",
    "delayline.schedules.recurrence",
    "delayline.schedules.runs",
    "delayline.schedules.spec",
    "delayline.schedules.state",
    *SCHEDULER_PURE,
    "delayline.sending",
    "delayline.status",
    "delayline.timing",
    "delayline.validation",
)
#: What ``pip install delayline`` gives: the SDK, the consumer and the client CLI.
CLIENT = ("delayline", "delayline.client", "delayline.async_client", "delayline.cli")
#: Modules of delayline that belong to the server extra: the HTTP API, the service,
#: and the scheduler but for its settings, which ``delayline run --help`` shows.
SOURCE = Path(delayline.__file__).parent


def modules_under(package: str) -> set[str]:
    """Every module of ``package`` and its subpackages (not the packages themselves,
    whose ``__init__`` holds only a map), by absolute name."""
    root = SOURCE.joinpath(*package.split(".")[1:])
    return {
        ".".join((package, *path.relative_to(root).with_suffix("").parts))
        for path in root.rglob("*.py")
        if path.stem != "__init__"
    }


SERVER_PARTS = frozenset(
    {"delayline.api", "delayline.service"}
    | (modules_under("delayline.scheduler") - set(SCHEDULER_PURE))
)
IO_MODULES = frozenset({"redis", "click", "socket", "asyncio", "subprocess", "httpx"})


def imports_of(module: str) -> set[str]:
    """The modules that ``module``'s source imports, by absolute name (each
    ``from package import name`` counted as both ``package`` and ``package.name``)."""
    path = SOURCE.joinpath(*module.split(".")[1:])
    source = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    found: set[str] = set()
    for node in ast.walk(ast.parse(source.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def is_delayline_module(name: str) -> bool:
    path = SOURCE.joinpath(*name.split(".")[1:])
    return name.startswith("delayline.") and (path.is_dir() or path.with_suffix(".py").exists())


def run_blocked(blocked: frozenset[str], code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a new interpreter in which importing ``blocked`` (or below) fails
    as if it were not installed."""
    prelude = textwrap.dedent(
        f"""
        import importlib.abc, sys
        BLOCKED = {sorted(blocked)!r}
        class Block(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if any(name == b or name.startswith(b + ".") for b in BLOCKED):
                    raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        sys.meta_path.insert(0, Block())
        """
    )
    return subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_pure_core_imports_no_io_and_no_server_part() -> None:
    seen: set[str] = set()
    todo = list(PURE_CORE)
    while todo:
        module = todo.pop()
        seen.add(module)
        for name in imports_of(module):
            top = name.partition(".")[0]
            assert top not in SERVER_MODULES | IO_MODULES, f"{module} imports {name}"
            assert not any(name.startswith(part) for part in SERVER_PARTS)
            if is_delayline_module(name) and name not in seen:
                todo.append(name)
    # What the core reaches beyond itself is data: key names and script texts.
    assert seen - set(PURE_CORE) <= {
        "delayline.redis",
        "delayline.redis.commands",
        "delayline.redis.keys",
        "delayline.redis.lua_source",
        "delayline.redis.scripts",
        "delayline.redis.script_args",
    }


def test_the_client_imports_no_server_package() -> None:
    code = "\n".join(f"import {module}" for module in CLIENT)
    done = run_blocked(SERVER_MODULES | SERVER_PARTS, code)
    assert done.returncode == 0, done.stderr


def test_client_commands_work_without_the_server_extra() -> None:
    done = run_blocked(
        SERVER_MODULES,
        """
        from delayline.cli import main
        main(["send", "--help"])
        """,
    )
    assert done.returncode == 0, done.stderr
    assert "Usage: " in done.stdout
    assert "send" in done.stdout


def test_schedule_commands_work_without_the_server_extra() -> None:
    # ``schedule next`` computes runs (croniter, zoneinfo) and touches no Redis.
    done = run_blocked(
        SERVER_MODULES | SERVER_PARTS,
        """
        from delayline.cli import main
        main(["schedule", "next", "--cron", "0 9 * * *", "--tz", "Europe/Paris", "-n", "1"])
        """,
    )
    assert done.returncode == 0, done.stderr
    assert "next 1 run, in Europe/Paris and in UTC:" in done.stdout


def test_sending_through_kafka_without_confluent_kafka_names_the_extra() -> None:
    done = run_blocked(
        SERVER_MODULES,
        """
        from delayline import Client
        from delayline.errors import ConfigurationError
        try:
            Client(kafka="127.0.0.1:9")
        except ConfigurationError as exc:
            print(exc)
        """,
    )
    assert done.returncode == 0, done.stderr
    assert "pip install 'delayline[kafka]'" in done.stdout


def test_server_commands_without_the_extra_name_it_in_one_line() -> None:
    for command in ("run", "api"):
        done = run_blocked(SERVER_MODULES, f"from delayline.cli import main; main([{command!r}])")
        assert done.returncode == 2, done.stderr
        assert done.stderr.count("\n") == 1, done.stderr
        assert done.stderr.startswith(f"error: `delayline {command}` needs the server extra: ")
        assert "pip install 'delayline[server]'" in done.stderr


def test_the_scheduler_packages_are_maps_that_import_nothing() -> None:
    # The client imports the scheduler's settings: a package's __init__ runs first.
    for package in ("scheduler", "scheduler/pipeline", "scheduler/runtime", "scheduler/jobs"):
        tree = ast.parse((SOURCE / package / "__init__.py").read_text())
        assert ast.get_docstring(tree), f"{package} has no map"
        assert not [node for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)]


def test_the_pipeline_imports_neither_the_runtime_nor_the_jobs() -> None:
    for module in modules_under("delayline.scheduler.pipeline"):
        for name in imports_of(module):
            assert not name.startswith(
                ("delayline.scheduler.runtime", "delayline.scheduler.jobs")
            ), f"{module} imports {name}"


def test_the_jobs_do_not_import_the_runtime() -> None:
    # The runtime runs the jobs (the listing server); the jobs use the pump beside it.
    for module in modules_under("delayline.scheduler.jobs"):
        for name in imports_of(module):
            assert not name.startswith("delayline.scheduler.runtime"), f"{module} imports {name}"


def test_only_the_query_imports_the_source() -> None:
    # Data flows source -> processor -> sink: what writes must not reach back up.
    importers = {
        module
        for module in modules_under("delayline")
        if any(
            name.startswith("delayline.scheduler.pipeline.source") for name in imports_of(module)
        )
    }
    assert importers == {"delayline.scheduler.pipeline.query"}


#: The most lines a module of src/ may have: past it, a module holds more than one idea.
MAX_MODULE_LINES = 400


def test_no_module_is_over_the_line_bound() -> None:
    long = {
        str(path.relative_to(SOURCE)): lines
        for path in SOURCE.rglob("*.py")
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}, f"split these along a seam: {long}"
