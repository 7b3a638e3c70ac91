"""The play page's text: the ten reads "10" wherever a person reads it (agents/serving/static/play.js).

The page's helpers run under Node where it is installed (the end-to-end test runs the whole page in
Chromium, but cannot count on a ten being played)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

PLAY_JS = Path(__file__).resolve().parents[1] / "agents" / "serving" / "static" / "play.js"
NODE = shutil.which("node")


def _function(source: str, name: str) -> str:
    found = re.search(rf"^function {name}\(.*$", source, re.M)
    assert found, f"play.js has no one-line function {name}"
    return found.group(0)


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_a_move_with_tens_reads_as_its_cards_do() -> None:
    """The centre label read "Seat 2 · TT" beside cards reading "10"."""
    source = PLAY_JS.read_text(encoding="utf-8")
    names = ["TT", "9TJ", "TTTT", "5555TTTT", "345", "2", "pass", "sam", "no_sam"]
    script = "\n".join([_function(source, "rankText"), _function(source, "moveName"),
                        f"console.log(JSON.stringify({json.dumps(names)}.map(moveName)));"])
    out = subprocess.run([NODE, "-e", script], capture_output=True, text=True, timeout=120, check=True).stdout
    assert json.loads(out) == ["10 10", "9 10 J", "10 10 10 10", "5 5 5 5 10 10 10 10", "3 4 5", "2",
                               "pass", "sam", "no_sam"]


def test_every_move_name_shown_goes_through_movename() -> None:
    source = PLAY_JS.read_text(encoding="utf-8")
    shown = re.findall(r"\$\{([^}]*\.move)\}", source)
    assert shown == [], f"move names shown raw (a ten reads T): {shown}"
    assert len(re.findall(r"moveName\([^)]*\.move\)", source)) == 2


def test_no_function_of_the_page_is_declared_twice() -> None:
    """A second ``function moveText`` once replaced the first for every caller (the later declaration wins in
    JavaScript), and the page stopped at its first move."""
    names = re.findall(r"^(?:async )?function (\w+)\(", PLAY_JS.read_text(encoding="utf-8"), re.M)
    assert names and len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
