"""``samloc demo``: its help describes every option, and its summary says what each end means."""

from __future__ import annotations

import json
import re

from samloc.cli import main
from samloc.commands.demo import ENDS, parser
from sam_env.core import END_NAMES


def test_the_help_describes_every_option() -> None:
    ap = parser()
    undescribed = [a.option_strings[-1] for a in ap._actions if a.option_strings and not a.help]
    assert undescribed == []


def test_every_end_of_a_game_has_its_meaning() -> None:
    assert set(ENDS) == {e for e in END_NAMES if e is not None}


def test_the_summary_names_and_explains_each_end(tmp_path, capsys) -> None:
    assert main(["demo", "--games", "60", "--out", str(tmp_path / "g.jsonl")]) == 0
    out = capsys.readouterr().out.splitlines()
    ends = json.loads(out[-1])["ends"]
    line = next(x for x in out if x.startswith("how they ended: "))
    assert sum(ends.values()) == 60 and "{" not in line
    for end, n in ends.items():
        assert re.search(rf"\b{n} {end} \({re.escape(ENDS[end])}\)", line), line
