"""Every worked example of ../shared/spec/examples.jsonl replays exactly (PROTOCOL §3)."""

import json
from pathlib import Path

import pytest

from sam_env.record import replay_report

SPEC = Path(__file__).resolve().parents[2] / "shared" / "spec"
EXAMPLES = [json.loads(line) for line in (SPEC / "examples.jsonl").read_text(encoding="utf-8").splitlines()
            if line.strip()]


def _normal(rep: dict) -> dict:
    rep = dict(rep)
    if "legal" in rep:
        rep["legal"] = sorted(rep["legal"])  # PROTOCOL: legal moves in any order
    return rep


def test_there_are_seventy_examples():
    assert len(EXAMPLES) == 70


@pytest.mark.parametrize("i", range(len(EXAMPLES)), ids=[f"{i}-{e['name']}" for i, e in enumerate(EXAMPLES)])
def test_example_replays_exactly(i):
    ex = EXAMPLES[i]
    got = replay_report(ex["record"])
    assert _normal(got) == _normal(ex["expected"])
    if "legal" in got:
        assert len(got["legal"]) == len(set(got["legal"]))
