"""``samloc/1`` game records (PROTOCOL §2) and their replay (PROTOCOL §3)."""

from __future__ import annotations

import json
from typing import Any, Iterable, Iterator, Mapping

from .cards import CardError
from .game import Game, GameError
from .rules import RuleSet, RulesError

FORMAT = "samloc/1"
RECORD_FIELDS = ("format", "rules", "players", "opener", "hands", "events", "result")
RESULT_FIELDS = ("end", "winner", "scores", "instant", "den", "chops")


class RecordError(ValueError):
    """A bad record: ``error_at`` is the index of the first bad event, or None."""

    def __init__(self, message: str, error_at: int | None = None):
        super().__init__(_one_line(message))
        self.error_at = error_at

    def to_json(self) -> dict[str, Any]:
        return {"ok": False, "error_at": self.error_at, "error": str(self)}


MAX_MESSAGE = 300  # characters: messages echo values from the input, and a value may be huge


def _one_line(message: str) -> str:
    """A message a person can read: one line, and not a megabyte of echoed input."""
    message = " ".join(message.splitlines())
    return message if len(message) <= MAX_MESSAGE else message[:MAX_MESSAGE - 1] + "…"


def _show(value: object) -> str:
    """A value from the input as JSON, for a message (safe for any depth or size)."""
    try:
        text = json.dumps(value)
    except (RecursionError, TypeError, ValueError):
        text = "a value nested too deeply to show" if isinstance(value, (list, dict)) else repr(value)
    return text if len(text) <= 60 else text[:59] + "…"


def replay(record: object, *, check_result: bool = True) -> Game:
    """Replay a record under its rules; RecordError names the first problem."""
    if not isinstance(record, Mapping):
        raise RecordError("a record must be a JSON object")
    extra = [k for k in record if k not in RECORD_FIELDS]
    if extra:
        raise RecordError(f"unknown record field {extra[0]!r} (known: {', '.join(RECORD_FIELDS)})")
    if record.get("format") != FORMAT:
        raise RecordError(f"format must be \"{FORMAT}\", not {_show(record.get('format'))}")
    for key in ("rules", "players", "opener", "hands", "events"):
        if key not in record:
            raise RecordError(f"the record has no {key!r}")
    try:
        rules = RuleSet.parse(record["rules"])
        players = rules.check_players(record["players"])
        hands = record["hands"]
        if not isinstance(hands, list) or len(hands) != players:
            raise RecordError(f"hands must list {players} hands, one per seat")
        for s, hand in enumerate(hands):
            if not isinstance(hand, list) or not all(isinstance(c, str) for c in hand):
                raise RecordError(f"hand of seat {s} must be a list of cards written like \"Ts\"")
        game = Game.from_deal(rules, hands, _opener(record["opener"], players))
    except (RulesError, GameError, CardError) as exc:
        raise RecordError(str(exc)) from None
    events = record["events"]
    if not isinstance(events, list):
        raise RecordError("events must be a list")
    for i, ev in enumerate(events):
        try:
            game.apply(ev if type(ev) is dict or isinstance(ev, Mapping) else _not_event(ev))
        except (GameError, CardError) as exc:
            raise RecordError(f"event {i}: {exc}", i) from None
    if check_result and record.get("result") is not None:
        _check_result(game, record["result"])
    return game


def _opener(value: object, players: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < players:
        raise RecordError(f"opener must be a seat from 0 to {players - 1}, not {_show(value)}")
    return value


def _not_event(ev: object) -> Mapping[str, Any]:
    raise GameError(f"an event must be an object with seat and type, not {_show(ev)}")


def _check_result(game: Game, given: object) -> None:
    if not isinstance(given, Mapping):
        raise RecordError("result must be an object")
    extra = [k for k in given if k not in RESULT_FIELDS]
    if extra:
        raise RecordError(f"unknown result field {extra[0]!r} (known: {', '.join(RESULT_FIELDS)})")
    res = game.result
    if res is None:
        raise RecordError(f"the record has a result but its game is not finished (seat {game.to_act} to act)")
    actual = res.to_json()
    for key in RESULT_FIELDS:
        if key in given and not same_json(given[key], actual[key]):
            raise RecordError(f"result.{key} is {_show(given[key])} but the replay gives {_show(actual[key])}")


def same_json(a: object, b: object) -> bool:
    """JSON equality that tells ``true`` from ``1`` and ``-3.0`` from ``-3`` (Python's ``==`` does not)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(map(same_json, a, b))  # type: ignore[arg-type]
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_json(v, b[k]) for k, v in a.items())  # type: ignore[attr-defined]
    return a == b


def replay_report(record: object) -> dict[str, Any]:
    """The ``samloc replay --json`` answer for one record (PROTOCOL §3)."""
    try:
        game = replay(record)
    except RecordError as exc:
        return exc.to_json()
    except RecursionError:  # a value nested deep enough to overflow a message or a check
        return RecordError("the record nests JSON arrays or objects too deeply").to_json()
    res = game.result
    if res is not None:
        return {"ok": True, "finished": True, "result": res.to_json()}
    return {"ok": True, "finished": False, "to_act": game.to_act, "phase": game.phase,
            "legal": game.legal_moves()}


def parse_records(text: str) -> Iterator[object]:
    """One JSON record, or JSON Lines.  A line that is not JSON yields a RecordError."""
    stripped = text.strip()
    if not stripped:
        yield RecordError("the input is empty: expected a samloc/1 record")
        return
    try:
        whole = json.loads(stripped)
    except (json.JSONDecodeError, RecursionError):
        whole = None
    if isinstance(whole, dict):
        yield whole
        return
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            yield json.loads(line)
        except json.JSONDecodeError as exc:
            yield RecordError(f"line {n} is not valid JSON ({exc.msg} at column {exc.colno})")
        except RecursionError:
            yield RecordError(f"line {n} nests JSON arrays or objects too deeply")


def dumps(record: Mapping[str, Any]) -> str:
    """A record as one line of JSON (what JSON Lines files hold)."""
    return json.dumps(record, ensure_ascii=False, separators=(", ", ": "))


def write_jsonl(path: str, records: Iterable[Mapping[str, Any]]) -> int:
    """Write records as JSON Lines atomically (temporary file, then rename)."""
    import os
    import tempfile
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-", suffix=".jsonl")
    n = 0
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            for r in records:
                f.write(dumps(r) + "\n")
                n += 1
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes it 0600; a records file is for sharing
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return n
