"""The engine runs as plain Python (NUMBA_DISABLE_JIT=1, for debugging) and agrees with the compiled one."""

import json
import os
import subprocess
import sys
from pathlib import Path

from sam_env.batch import play_random
from sam_env.rules import RuleSet
from sam_env.record import replay_report

import pytest

pytestmark = pytest.mark.slow  # the engine run uncompiled

SCRIPT = """
import json, sys
from sam_env.batch import play_random
from sam_env.rules import RuleSet
from sam_env.record import replay_report
recs = [json.loads(l)["record"] for l in open(sys.argv[1], encoding="utf-8")][:20]
print(json.dumps({"random": play_random(RuleSet.parse("mien_bac"), 3, games=12, seed=5, batch=4),
                  "replays": [replay_report(r) for r in recs]}))
"""


def test_uncompiled_engine_matches_compiled():
    examples = Path(__file__).resolve().parents[2] / "shared" / "spec" / "examples.jsonl"
    env = dict(os.environ, NUMBA_DISABLE_JIT="1", PYTHONWARNINGS="ignore")
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(examples)], env=env, capture_output=True,
                         text=True, timeout=300, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    recs = [json.loads(line)["record"] for line in examples.read_text(encoding="utf-8").splitlines()][:20]
    assert got["random"] == play_random(RuleSet.parse("mien_bac"), 3, games=12, seed=5, batch=4)
    assert got["random"]["illegal"] == 0 and got["random"]["games"] == 12
    assert got["replays"] == [replay_report(r) for r in recs]
