"""The Lua scripts as the loader builds them from ``delayline/redis/lua/``."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from delayline.errors import DelaylineError
from delayline.redis import lua_source, scripts


def files_of(name: str) -> set[str]:
    """``name`` and every file it includes, directly or not."""
    text = (lua_source.LUA_DIR / name).read_text(encoding="utf-8")
    found = {name}
    for library in re.findall(r"^--! include (\S+)$", text, re.MULTILINE):
        found |= files_of(library)
    return found


def write(directory: Path, **files: str) -> Path:
    for stem, text in files.items():
        directory.joinpath(f"{stem}.lua").write_text(text)
    return directory


def lua_files() -> set[str]:
    return {path.name for path in lua_source.LUA_DIR.iterdir() if path.name.endswith(".lua")}


def test_each_script_is_its_file_loaded_and_known_by_its_sha() -> None:
    for script in scripts.ALL:
        assert script.text == lua_source.load(script.file)
        assert script.sha == hashlib.sha1(script.text.encode()).hexdigest()
        assert scripts.by_sha(script.sha.encode()) is script
        assert script.command(script.keys(**dict.fromkeys(script.key_names, "k")), [1])[:3] == (
            "EVALSHA", script.sha, len(script.key_names),
        )  # fmt: skip


def test_every_lua_file_is_used() -> None:
    used = set().union(*(files_of(script.file) for script in scripts.ALL))
    assert lua_files() == used


def test_no_directive_or_placeholder_is_left() -> None:
    for script in scripts.ALL:
        assert "${" not in script.text, script.file
        assert "--! include" not in script.text, script.file


def test_a_library_is_taken_in_once() -> None:
    # write_chunk.lua has outbox.lua through topic_writes.lua only; the near path's has it directly.
    for script in (scripts.SEND_NEAR, scripts.WRITE_CHUNK, scripts.PUMP):
        assert script.text.count("local function outbox_put(") == 1


def test_each_script_uses_exactly_the_keys_it_declares() -> None:
    for script in scripts.ALL:
        indexes = re.findall(r"KEYS\s*\[([^\]]*)\]", script.text)
        # Only literal indexes: a computed one could reach a key nobody declared.
        assert all(index.strip().isdigit() for index in indexes), (script.file, indexes)
        used = {int(index) for index in indexes}
        assert used == set(range(1, len(script.key_names) + 1)), (script.file, script.key_names)
        # KEYS goes whole nowhere (#KEYS, unpack(KEYS)): each key is taken by its index.
        assert re.search(r"KEYS(?!\s*\[)", script.text) is None, script.file


def test_no_library_reads_keys_of_its_own() -> None:
    entry_files = {script.file for script in scripts.ALL}
    for name in lua_files() - entry_files:
        text = lua_source.load(name)
        assert "KEYS" not in text, name
        assert "ARGV" not in text, name


#: Redis syntax that spells a marker's value without meaning the marker: XTRIM's
#: "approximately" flag.
NOT_MARKERS = re.compile(r"'(MAXLEN|MINID)', '~'")


def code_of(name: str) -> str:
    """The raw code lines of Lua file ``name``: its comments are prose."""
    lines = (lua_source.LUA_DIR / name).read_text(encoding="utf-8").splitlines()
    return "\n".join(line for line in lines if not line.lstrip().startswith("--"))


@pytest.mark.parametrize("marker", sorted(lua_source.MARKERS))
def test_no_lua_file_spells_a_marker_instead_of_its_name(marker: str) -> None:
    value = lua_source.MARKERS[marker].decode()
    for name in sorted(lua_files()):
        raw = NOT_MARKERS.sub("", code_of(name))
        for quote in ("'", '"'):
            assert quote + value not in raw, f"{name} spells {value!r}: write '${{{marker}}}'"


def test_every_marker_reaches_lua_as_its_value() -> None:
    for name, value in lua_source.MARKERS.items():
        assert lua_source.LUA_CONSTANTS[name] == value.decode()


def test_a_library_included_by_two_paths_appears_once(tmp_path: Path) -> None:
    write(
        tmp_path,
        base="-- the base\nlocal base = ${ONE}",
        middle="--! include base.lua\nlocal middle = base + 1\n",
        top="--! include base.lua\n--! include middle.lua\n\nreturn base + middle\n",
    )
    assert lua_source.load("top.lua", tmp_path, {"ONE": 1}) == (
        "local base = 1\nlocal middle = base + 1\nreturn base + middle\n"
    )


def test_a_missing_include_raises(tmp_path: Path) -> None:
    write(tmp_path, top="--! include gone.lua\nreturn 1\n")
    with pytest.raises(DelaylineError, match=r"gone\.lua"):
        lua_source.load("top.lua", tmp_path, {})


@pytest.mark.parametrize("code", ["return ${TWO}", "return ${ONE", "return '${}'"])
def test_a_placeholder_without_its_constant_raises(tmp_path: Path, code: str) -> None:
    write(tmp_path, top=code + "\n")
    with pytest.raises(DelaylineError, match=r"top\.lua"):
        lua_source.load("top.lua", tmp_path, {"ONE": 1})
