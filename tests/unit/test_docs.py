"""The docs hold together: the README stays a front door, the index links every page,
every relative link and anchor resolves, and the package map names every module.

The examples themselves run elsewhere: the interactive sessions in
tests/e2e/test_sdk_live.py, the `delayline run` option table in tests/integration/test_cli.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted(DOCS.glob("*.md"))]

#: The README is the front door: a pitch, install, a session, the guarantees, links.
README_MAX_LINES = 220

#: Packages that the design's map describes as a whole (and a line per subpackage)
#: rather than a line per module.
MAPPED_WHOLE = {"api", "cli", "scheduler", "testing"}

_FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.MULTILINE | re.DOTALL)
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def prose(text: str) -> str:
    """The Markdown without its fenced code blocks."""
    return _FENCE.sub("", text)


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every heading anchor of ``page``, with GitHub's -1, -2 suffixes for repeats."""
    found: set[str] = set()
    for line in prose(page.read_text()).splitlines():
        if match := re.match(r"#{1,6} (.+)", line):
            base = slug(match.group(1))
            name, n = base, 0
            while name in found:
                n += 1
                name = f"{base}-{n}"
            found.add(name)
    return found


def relative_links(page: Path) -> list[str]:
    targets = _LINK.findall(prose(page.read_text()))
    return [t for t in targets if not re.match(r"[a-z][a-z0-9+.-]*:", t)]


def test_the_readme_is_a_front_door() -> None:
    lines = (ROOT / "README.md").read_text().count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move the manual to docs/"


def test_the_index_links_every_page() -> None:
    linked = {target.split("#")[0] for target in relative_links(DOCS / "index.md")}
    pages = {page.name for page in DOCS.glob("*.md")} - {"index.md"}
    assert pages - linked == set(), "docs/index.md does not link these pages"


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in relative_links(page):
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no file {file}")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target}: no heading #{anchor} in {file.name}")
    assert broken == []


def test_the_package_map_names_every_module() -> None:
    design = (DOCS / "design.md").read_text()
    start = design.index("## The packages, and where a message goes")
    map_text = design[start : design.index("```", design.index("```", start) + 3)]
    package = ROOT / "src" / "delayline"
    missing = []
    for module in sorted(package.rglob("*.py")):
        parts = module.relative_to(package).with_suffix("").parts
        if parts[0] in MAPPED_WHOLE:
            # `scheduler/pipeline/source.py` needs `pipeline/`; `cli/send.py` needs `cli/`.
            needed = f"{parts[1]}/" if len(parts) > 2 else f"{parts[0]}/"
        else:
            needed = module.name
        if not re.search(rf"(?<![\w/]){re.escape(needed)}", map_text):
            missing.append(str(module.relative_to(package)))
    assert missing == [], "docs/design.md's package map leaves these out"
