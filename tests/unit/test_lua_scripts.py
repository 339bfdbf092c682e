"""The Lua scripts as the loader builds them from ``delayline/redis/lua/``."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from delayline.errors import DelaylineError
from delayline.redis import scripts

#: Each script's constant in scripts.py and the file it is loaded from.
SCRIPTS = {
    "LAST_ID_WITHIN": "last_id_within.lua",
    "COUNT_INGEST": "count_ingest.lua",
    "CANCEL": "cancel.lua",
    "RESCHEDULE": "reschedule.lua",
    "LIST_OUTBOX": "list_outbox.lua",
    "SEND_NEAR": "send_near.lua",
    "WRITE_CHUNK": "write_chunk.lua",
    "PUMP": "pump.lua",
    "DELIVER_READY": "deliver_ready.lua",
    "SETTLE_READY": "settle_ready.lua",
    "TRIM_TOPIC": "trim_topic.lua",
}


def files_of(name: str) -> set[str]:
    """``name`` and every file it includes, directly or not."""
    text = (scripts.LUA_DIR / name).read_text(encoding="utf-8")
    found = {name}
    for library in re.findall(r"^--! include (\S+)$", text, re.MULTILINE):
        found |= files_of(library)
    return found


def write(directory: Path, **files: str) -> Path:
    for stem, text in files.items():
        directory.joinpath(f"{stem}.lua").write_text(text)
    return directory


def test_each_script_is_its_file_loaded() -> None:
    for constant, name in SCRIPTS.items():
        assert getattr(scripts, constant) == scripts.load(name)


def test_every_lua_file_is_used() -> None:
    files = {path.name for path in scripts.LUA_DIR.iterdir() if path.name.endswith(".lua")}
    used = set().union(*(files_of(name) for name in SCRIPTS.values()))
    assert files == used


def test_no_directive_or_placeholder_is_left() -> None:
    for constant in SCRIPTS:
        text = getattr(scripts, constant)
        assert "${" not in text, constant
        assert "--! include" not in text, constant


def test_a_library_is_taken_in_once() -> None:
    # write_chunk.lua has outbox.lua through delivery.lua only; the near path's has it directly.
    for constant in ("SEND_NEAR", "WRITE_CHUNK", "PUMP"):
        assert getattr(scripts, constant).count("local function outbox_put(") == 1


def test_a_library_included_by_two_paths_appears_once(tmp_path: Path) -> None:
    write(
        tmp_path,
        base="-- the base\nlocal base = ${ONE}",
        middle="--! include base.lua\nlocal middle = base + 1\n",
        top="--! include base.lua\n--! include middle.lua\n\nreturn base + middle\n",
    )
    assert scripts.load("top.lua", tmp_path, {"ONE": 1}) == (
        "local base = 1\nlocal middle = base + 1\nreturn base + middle\n"
    )


def test_a_missing_include_raises(tmp_path: Path) -> None:
    write(tmp_path, top="--! include gone.lua\nreturn 1\n")
    with pytest.raises(DelaylineError, match=r"gone\.lua"):
        scripts.load("top.lua", tmp_path, {})


@pytest.mark.parametrize("code", ["return ${TWO}", "return ${ONE", "return '${}'"])
def test_a_placeholder_without_its_constant_raises(tmp_path: Path, code: str) -> None:
    write(tmp_path, top=code + "\n")
    with pytest.raises(DelaylineError, match=r"top\.lua"):
        scripts.load("top.lua", tmp_path, {"ONE": 1})


def test_the_near_paths_sha_is_its_scripts() -> None:
    assert hashlib.sha1(scripts.SEND_NEAR.encode()).hexdigest() == scripts.SEND_NEAR_SHA
