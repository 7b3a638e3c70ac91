"""docs/architecture.md is the one file map: every package module has its row, and every path it names exists.
And the links between the docs (README.md, docs/**/*.md) reach a file and, with ``#``, a heading there.

The map is the section "Which file holds which part"; a path is a backticked token with a ``/`` in it
(``training/run/loop.py``, ``sam_env/presets/``).  A module moved or added without its row, or a row left
behind by a move, fails here with the files named."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ARCHITECTURE = ROOT / "docs" / "architecture.md"
MAP_HEADING = "## Which file holds which part"
PACKAGES = ("sam_env", "agents", "training", "samloc")


def map_section(text: str) -> str:
    """The map: from its heading to the next heading of the same level."""
    start = text.index(MAP_HEADING)
    end = text.find("\n## ", start + len(MAP_HEADING))
    return text[start:] if end < 0 else text[start:end]


def map_paths(section: str) -> set[str]:
    """Every backticked token of the map that is a path (has a ``/``, no spaces, not a URL)."""
    tokens = re.findall(r"`([^`\s]+)`", section)
    return {t for t in tokens if "/" in t and "://" not in t}


def package_modules() -> set[str]:
    """Every .py file under the four packages, as a path from the repository root."""
    return {p.relative_to(ROOT).as_posix() for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")
            if "__pycache__" not in p.parts}


def test_the_map_section_parses() -> None:
    section = map_section(ARCHITECTURE.read_text(encoding="utf-8"))
    named = map_paths(section)
    assert "training/config.py" in named and "sam_env/core.py" in named, sorted(named)[:10]


def test_every_package_module_is_in_the_map() -> None:
    named = map_paths(map_section(ARCHITECTURE.read_text(encoding="utf-8")))
    missing = sorted(package_modules() - named)
    assert not missing, ("docs/architecture.md (\"Which file holds which part\") does not name these "
                         f"modules; give each a row: {', '.join(missing)}")


def test_every_path_the_map_names_exists() -> None:
    named = map_paths(map_section(ARCHITECTURE.read_text(encoding="utf-8")))
    gone = sorted(p for p in named if not (ROOT / p.rstrip("/")).exists())
    assert not gone, ("docs/architecture.md (\"Which file holds which part\") names paths that do not "
                      f"exist; move or remove their rows: {', '.join(gone)}")


def test_the_parser_reads_rows_only() -> None:
    """The parser finds a row's path, ignores prose and URLs, and stops at the next section."""
    text = ("# A\n## Which file holds which part\n| `a/b.py` | x `c.d` `http://e/f` |\n"
            "## Next\n`g/h.py`\n")
    assert map_paths(map_section(text)) == {"a/b.py"}


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    out, in_code = set(), False
    for line in text.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and (m := re.match(r"#{1,6} (.*)", line)):
            out.add(slug(m.group(1)))
    return out


def test_the_links_between_the_docs_resolve() -> None:
    broken = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for link in re.findall(r"\]\(([^)\s]+)\)", doc.read_text(encoding="utf-8")):
            if "://" in link or link.startswith("mailto:"):
                continue
            path, _, anchor = link.partition("#")
            target = (doc.parent / path).resolve() if path else doc
            if not target.exists():
                broken.append(f"{doc.relative_to(ROOT)}: {link} (no such file)")
            elif (anchor and target.suffix == ".md"
                  and anchor not in anchors(target.read_text(encoding="utf-8"))):
                broken.append(f"{doc.relative_to(ROOT)}: {link} (no such heading)")
    assert not broken, "links that lead nowhere: " + "; ".join(broken)


def test_a_heading_s_anchor_is_github_s() -> None:
    assert slug("Seeds: `samloc seeds`") == "seeds-samloc-seeds"
    assert slug("The all_tables run behind `checkpoints/all_tables/`") == (
        "the-all_tables-run-behind-checkpointsall_tables")
    assert slug("The temperature, and sitting 1 at 0.25 lá") == "the-temperature-and-sitting-1-at-025-lá"
