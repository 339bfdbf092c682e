"""What may import what across the repository's top folders: ``src/`` and ``bench/``
never import ``tests`` (the tests may import both), and ``delayline.testing`` runs
on the client install."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
#: Packages of the server extra and of the test and bench environments: a client
#: install has none of them.
NOT_IN_THE_CLIENT = frozenset(
    {"pyspark", "pandas", "pyarrow", "fastapi", "uvicorn", "starlette", "pydantic",
     "confluent_kafka", "psutil", "pytest", "httpx", "hypothesis"}
)  # fmt: skip


def imported_modules(source: str) -> Iterator[tuple[int, str]]:
    """(line, absolute module name) of every import in ``source``; relative imports are
    left out (they stay inside their package)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.lineno, node.module


def test_imported_modules_finds_every_absolute_import_however_nested() -> None:
    source = textwrap.dedent(
        """
        import os, tests.support
        from tests import support
        from .sibling import thing
        def later():
            from tests.e2e.chaos import run_chaos
        """
    )
    assert list(imported_modules(source)) == [
        (2, "os"), (2, "tests.support"), (3, "tests"), (6, "tests.e2e.chaos"),
    ]  # fmt: skip


@pytest.mark.parametrize("folder", ["src", "bench"])
def test_no_module_imports_the_tests(folder: str) -> None:
    sources = sorted((ROOT / folder).rglob("*.py"))
    assert sources, f"no Python files under {folder}/"
    offenders = [
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for path in sources
        for line, name in imported_modules(path.read_text())
        if name.partition(".")[0] == "tests"
    ]
    assert not offenders, "\n".join(offenders)


def test_the_testing_package_itself_imports_the_standard_library_only() -> None:
    init = ROOT / "src" / "delayline" / "testing" / "__init__.py"
    outside = {
        name
        for _, name in imported_modules(init.read_text())
        if name.partition(".")[0] not in sys.stdlib_module_names
    }
    assert not outside


def test_delayline_testing_imports_without_the_server_or_test_packages() -> None:
    # Each blocked package fails to import, as if not installed.
    code = textwrap.dedent(
        f"""
        import importlib.abc, sys
        BLOCKED = {sorted(NOT_IN_THE_CLIENT)!r}
        class Block(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.partition(".")[0] in BLOCKED:
                    raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        sys.meta_path.insert(0, Block())
        import delayline.testing, delayline.testing.kafka, delayline.testing.streams
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
