"""Every subcommand's every flag given empty, huge, negative, unicode and over-long-path values, and every
training config key given bad YAML, wrong shapes and out-of-range numbers: never a traceback.

Each case runs the command's ``main`` in this process (``samloc.cli.main``), with the steps that would train,
serve, evaluate or write stubbed to raise :class:`Accepted`: a value either reaches them (accepted) or is
refused in one line on standard error with the command's usage exit status (or its documented one).  Values
a flag can never take (a huge seed, an empty path, a path component of 300 bytes, text for a count) must be
refused.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from samloc.cli import main as samloc
from training.config import ConfigError, TrainConfig
from training.config_load import load_config

REPO = Path(__file__).resolve().parent.parent
CKPT = str(REPO / "checkpoints" / "standard")
HUGE = "99999999999999999999"                   # past 64 bits
VALUES = {"empty": "", "huge": HUGE, "-huge": "-" + HUGE, "-1": "-1", "digits": "9" * 5000,
          "unicode": "ü☃\u200b", "long-name": "runs/" + "x" * 300 + "/f", "long-path": "a/" * 2100}
BAD_PATH = ("empty", "long-name", "long-path")  # a path argument refuses these at once


class Accepted(Exception):
    """A stubbed step was reached: the arguments were taken."""


def _accept(*args: object, **kw: object) -> None:
    raise Accepted


@dataclass
class Cmd:
    """A subcommand: the arguments of a case that is otherwise fine (``@`` where a positional value goes),
    its flags with what every value they must refuse (``all``, ``path``: the bad paths, ``name``: the empty
    one, ``any``: none), the steps stubbed, and its exit statuses beside 2."""

    argv: list[str]
    flags: dict[str, str]
    stubs: list[str] = field(default_factory=list)
    codes: tuple[int, ...] = (2,)
    positional: str = ""        # the kind of the value at ``@`` ('' when none)
    default: str = ""           # the value at ``@`` when another flag is fuzzed


TRAIN_FLAGS = {"--config": "path", "--resume": "path", "--more-minutes": "all", "--more-decisions": "all",
               "--run-dir": "path", "--seeds": "all", "--ray-address": "any"}
COMMANDS: dict[str, Cmd] = {
    "replay": Cmd(["@"], {}, positional="path"),
    "rules": Cmd(["@"], {"--set": "any"}, positional="any", default="online"),
    "demo": Cmd([],
                {"--rules": "all", "--players": "all", "--games": "all", "--seed": "all", "--out": "path"},
                ["samloc.commands.demo.roundtrip"]),
    "bench": Cmd([], {"--rules": "all", "--players": "all", "--games": "all", "--batch": "all",
                      "--seed": "all",
                      "--num-envs": "all", "--steps": "all"},
                 ["samloc.commands.bench.bench_engine", "samloc.commands.bench.bench_env"]),
    "bench --agent": Cmd(["--agent", "random"], {"--rules": "all", "--players": "all", "--deals": "all",
                                                 "--games": "all", "--seed": "all", "--agent": "all"},
                         ["samloc.commands.bench_agent.bench_agent"]),
    "bench --serve": Cmd(["--serve"], {"--agent": "name", "--url": "any", "--workers": "all",
                                       "--clients": "all",
                                       "--requests": "all", "--warmup": "all", "--deadline-ms": "all",
                                       "--rules": "all", "--players": "all", "--seed": "all"},
                         ["samloc.commands.bench_serve.bench_serve"]),
    "bench --learner": Cmd(["--learner"], {"--config": "path", "--device": "all", "--precision": "all",
                                           "--batch-decisions": "all", "--minibatch": "all",
                                           "--updates": "all",
                                           "--record": "all", "--rollouts": "all", "--requests": "all"},
                           ["samloc.commands.bench_training.bench_learner"]),
    "bench --to-strength": Cmd(["--to-strength"], {"--config": "path", "--minutes": "all", "--seeds": "all",
                                                   "--every-minutes": "all", "--deals": "all",
                                                   "--eval-seed": "all",
                                                   "--workers": "all", "--out": "path"},
                               ["samloc.commands.bench_strength.run_benchmark",
                                "samloc.commands.bench_strength.score_trained"], codes=(1, 2)),
    "eval": Cmd(["--deals", "1"], {"--agent": "all", "--opponents": "all", "--tables": "all",
                                   "--rules": "all",
                                   "--players": "all", "--deals": "all", "--seed": "all", "--out": "path",
                                   "--save-games": "path", "--workers": "all"},
                ["samloc.commands.eval._announce"]),
    "league": Cmd(["random", "@"], {"--rules": "all", "--players": "all", "--deals": "all", "--seed": "all",
                                    "--pin": "all", "--bootstrap": "all", "--out": "path"},
                  ["samloc.commands.league.rate_league"], positional="all", default="heuristic"),
    "exploit": Cmd(["@"], {"--rules": "all", "--players": "all", "--minutes": "all", "--decisions": "all",
                           "--from": "all", "--temperature": "all", "--deals": "all", "--eval-seed": "all",
                           "--seed": "all", "--config": "path", "--out": "path"},
                   ["samloc.commands.exploit.run_exploit"], positional="all", default="heuristic"),
    "belief": Cmd(["@"], {"--deals": "all", "--epochs": "all", "--hidden": "all", "--seed": "all"},
                  ["samloc.commands.belief.train_belief"], positional="all", default=CKPT),
    "export": Cmd(["@"], {"--out": "path", "--samples": "all", "--seed": "all"},
                  ["samloc.commands.export.export"], positional="path", default=CKPT),
    "serve": Cmd(["--agent", "random"], {"--agent": "all", "--host": "name", "--port": "all",
                                         "--temperature": "all",
                                         "--seed": "all", "--deadline-ms": "all", "--workers": "all",
                                         "--trusted-proxy": "all"},
                 ["samloc.commands.serve.listening_sockets"]),
    "seeds": Cmd(["@"], {"--png": "path", "--opponents": "name", "--by": "all"}, positional="all",
                 default="no-such-run"),
    "sweep": Cmd(["--config", "quick", "--decisions", "1000", "--out", "out"],
                 {"--config": "path", "--grid": "all", "--random": "all", "--samples": "all",
                  "--sample-seed": "all",
                  "--seeds": "all", "--minutes": "all", "--decisions": "all", "--every-minutes": "all",
                  "--deals": "all", "--eval-seed": "all", "--workers": "all", "--out": "path",
                  "--resume": "path", "--ray-address": "any"},
                 ["samloc.commands.sweep.run_sweep"], codes=(1, 2), positional="any"),
    "train": Cmd(["--dry-run", "--config", "quick", "@"], TRAIN_FLAGS,
                 ["samloc.commands.train.run_pipeline", "samloc.commands.train.dry_run"], codes=(1, 2),
                 positional="any", default="display=none"),
}


def _run(name: str, cmd: Cmd, flag: str | None, value: str,
         capsys: pytest.CaptureFixture[str]) -> tuple[object, str]:
    """(exit status, or Accepted) and standard error of one case."""
    argv = [a for a in cmd.argv if a != "@"]
    if flag is None:
        argv += ["--", value]
    else:
        argv += [f"{flag}={value}"] + ([cmd.default] if "@" in cmd.argv and cmd.default else [])
        if "@" in cmd.argv and not cmd.default:
            argv += ["--", "x"]
    words = name.split()
    try:
        status: object = samloc([words[0], *words[1:], *argv])
    except Accepted:
        status = Accepted
    return status, capsys.readouterr().err


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_flag_takes_bad_values_in_one_line(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    cmd = COMMANDS[name]
    monkeypatch.chdir(tmp_path)  # whatever a case would write lands here
    for stub in cmd.stubs:
        module, _, attr = stub.rpartition(".")
        monkeypatch.setattr(f"{module}.{attr}", _accept)
    cases = [(flag, kind) for flag, kind in cmd.flags.items()] + (
        [(None, cmd.positional)] if cmd.positional else [])
    bad = []
    for flag, kind in cases:
        for label, value in VALUES.items():
            status, err = _run(name, cmd, flag, value, capsys)
            must_refuse = (kind == "all" or (kind == "path" and label in BAD_PATH)
                           or (kind == "name" and not value))
            lines = err.strip().splitlines()
            if "Traceback" in err:
                bad.append(f"{flag} {label}: a traceback")
            elif status is Accepted:
                if must_refuse:
                    bad.append(f"{flag} {label}: accepted")
            elif status not in (*cmd.codes, 0) or (status != 0 and len(lines) != 1):
                bad.append(f"{flag} {label}: exit {status}, {len(lines)} lines: {err[:300]!r}")
            elif must_refuse and status != 2:
                bad.append(f"{flag} {label}: exit {status}, not 2")
    assert not bad, f"samloc {name}:\n" + "\n".join(bad)


# ---- config keys -------------------------------------------------------------------------------------------
def _keys(cls: type = TrainConfig, prefix: str = "") -> list[tuple[str, object]]:
    """Every leaf key of the training config with its type."""
    out = []
    for f in dataclasses.fields(cls):
        hint = typing.get_type_hints(cls)[f.name]
        if dataclasses.is_dataclass(hint):
            out += _keys(hint, f"{prefix}{f.name}.")
        else:
            out.append((prefix + f.name, hint))
    return out


OVERRIDE_VALUES = [": x", "[", "{a: 1}", "[1]", "[[1]]", "2", "-1", "9223372036854775808", "-" + HUGE,
                   "1e400", "",
                   "ü☃", "${oops}", "x" * 300]


@pytest.mark.parametrize("value", OVERRIDE_VALUES)
def test_every_config_key_takes_bad_values_in_one_line(value: str) -> None:
    """Every key given each bad value: a config or one ConfigError line naming the key; never a traceback.
    A boolean key takes only true or false, an integer key only 64-bit integers."""
    bad = []
    for key, hint in _keys():
        try:
            cfg = load_config("quick", [f"{key}={value}"])
        except ConfigError as exc:
            msg = str(exc)
            if "\n" in msg or key.rsplit(".", 1)[-1] not in msg:
                bad.append(f"{key}={value}: {msg!r}")
            continue
        except Exception as exc:  # noqa: BLE001 - what this test is for
            bad.append(f"{key}={value}: {type(exc).__name__}: {exc}")
            continue
        got = _get(cfg, key)
        if hint is bool:  # none of the values is true or false
            bad.append(f"{key}={value}: a boolean took {got!r}")
        if hint is int and not -2**63 <= got < 2**63:
            bad.append(f"{key}={value}: an integer took {got!r}")
    assert not bad, "\n".join(bad)


def _get(cfg: object, key: str) -> object:
    for part in key.split("."):
        cfg = getattr(cfg, part)
    return cfg


# ---- the hostile probe's cases, each by name ---------------------------------------------------------------
LONG_NAME = "runs/" + "x" * 300


@pytest.mark.parametrize("argv, words", [
    (["bench", "--games", HUGE], "argument --games: must be from 1 to 2**63 - 1"),
    (["league", "random", "heuristic", "--seed", HUGE], "argument --seed: must be from 0 to 2**63 - 1"),
    (["belief", CKPT, "--hidden", HUGE], "argument --hidden: must be from 1 to 8,192"),
    (["exploit", "random", "--deals", HUGE], "argument --deals: must be a whole number from 1 to 2**53"),
    (["demo", "--out", ""], "argument --out: must be a path, not empty"),
    (["train", "--dry-run", "--run-dir", LONG_NAME],
     "argument --run-dir: a path's component is at most 255 bytes"),
    (["train", "--dry-run", "--config", LONG_NAME + ".yaml"],
     "argument --config: a path's component is at most 255"),
    (["train", "--dry-run", "--config", "quick", "--seeds", f"0,{HUGE}"],
     "argument --seeds: seeds like 0,1,2: each"
                                                                           " must be from 0 to 2**63 - 1"),
    (["eval", "--rules", ""], "argument --rules: must not be empty"),
    (["eval", "--players", " "], "argument --players: must not be empty"),
    (["bench", "--agent", "random", "--games", "0"], "argument --deals/--games: must be 1 or more, not 0"),
])
def test_a_bad_flag_of_the_probe_is_one_line(argv: list[str], words: str, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert samloc(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err, err
    assert not any(tmp_path.iterdir())  # nothing written


@pytest.mark.parametrize("override, words", [
    ("ppo.lr=: x", "ppo.lr: ': x' is not a YAML value"),
    ("name=[", "name: '[' is not a YAML value"),
    ("env.rules={preset: hoi_quan_bai, nonsense: 1}", "env.rules takes a list, not a mapping"),
    ("model.kwargs=[1]", "model.kwargs takes a mapping (key: value), not a list ([1])"),
    ("ppo=[1]", "ppo takes a section of settings (key: value), not a list"),
    ("ppo.anneal_lr=2", "ppo.anneal_lr takes true or false, not 2"),
    ("ppo.anneal_lr=-1", "ppo.anneal_lr takes true or false, not -1"),
    ("ppo.anneal_lr=9223372036854775808", "ppo.anneal_lr takes true or false, not 9223372036854775808"),
    ("ppo.anneal_lr=yes", "ppo.anneal_lr takes true or false, not yes"),
    ("ppo.epochs=9223372036854775808", "ppo.epochs takes a 64-bit integer"),
    ("eval.opponents=[/etc/passwd]", "eval.opponents: /etc/passwd is not an agent that can be loaded"),
    ("eval.opponents=[/no/such.onnx]", "eval.opponents: /no/such.onnx is not an agent that can be loaded"
                                       " (no such ONNX file"),
    ("rollout.opponent=/etc", "rollout.opponent: /etc is not an agent that can be loaded"),
    ("algorithm=samloc_fuzz_raises:X",
     "algorithm=samloc_fuzz_raises:X: cannot import it (RuntimeError: boom)"),
])
def test_a_bad_override_of_the_probe_is_one_line_naming_the_key(override: str, words: str, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "samloc_fuzz_raises.py").write_text("raise RuntimeError('boom\\nsecond line')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    assert samloc(["train", "--dry-run", "--config", "quick", override]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("samloc train: ") and words in err, err


def test_the_dry_run_loads_each_opponent_and_refuses_a_file_that_is_not_a_network(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "fake.onnx").write_bytes(b"not a network")
    (tmp_path / "empty").mkdir()
    for override, words in (("eval.opponents=[fake.onnx]",
                             "eval.opponents: fake.onnx is not an agent that can be"
                                                           " loaded (cannot load ONNX model"),
                            ("rollout.opponent=empty",
                             "rollout.opponent: empty is not an agent that can be loaded")):
        assert samloc(["train", "--dry-run", "--config", "quick", override]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and words in err, err
    good = f"eval.opponents=[heuristic,{CKPT},{CKPT}/policy.onnx]"
    assert samloc(["train", "--dry-run", "--config", "quick", good, "display=none"]) == 0
    assert "everything checks out" in capsys.readouterr().out
