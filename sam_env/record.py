"""``samloc/1`` game records (PROTOCOL §2) and their replay (PROTOCOL §3)."""

from __future__ import annotations

import json
from typing import Any, Iterable, Iterator, Mapping

from .atomic import write_with
from .cards import CardError
from .game import Game, GameError
from .rules import RuleSet, RulesError

FORMAT = "samloc/1"
RECORD_FIELDS = ("format", "rules", "players", "opener", "hands", "events", "result")
RESULT_FIELDS = ("end", "winner", "scores", "instant", "den", "chops")


class RecordError(ValueError):
    """A bad record: ``error_at`` is the index of the first bad event, or None."""

    def __init__(self, message: str, error_at: int | None = None):
        super().__init__(message)
        self.error_at = error_at

    def to_json(self) -> dict[str, Any]:
        return {"ok": False, "error_at": self.error_at, "error": str(self)}


def replay(record: object, *, check_result: bool = True) -> Game:
    """Replay a record under its rules; RecordError names the first problem."""
    if not isinstance(record, Mapping):
        raise RecordError("a record must be a JSON object")
    extra = [k for k in record if k not in RECORD_FIELDS]
    if extra:
        raise RecordError(f"unknown record field {extra[0]!r} (known: {', '.join(RECORD_FIELDS)})")
    if record.get("format") != FORMAT:
        raise RecordError(f"format must be \"{FORMAT}\", not {json.dumps(record.get('format'))}")
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
            game.apply(ev if isinstance(ev, Mapping) else _not_event(ev))
        except (GameError, CardError) as exc:
            raise RecordError(f"event {i}: {exc}", i) from None
    if check_result and record.get("result") is not None:
        _check_result(game, record["result"])
    return game


def _opener(value: object, players: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < players:
        raise RecordError(f"opener must be a seat from 0 to {players - 1}, not {json.dumps(value)}")
    return value


def _not_event(ev: object) -> Mapping[str, Any]:
    raise GameError(f"an event must be an object with seat and type, not {json.dumps(ev)}")


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
        if key in given and given[key] != actual[key]:
            raise RecordError(f"result.{key} is {json.dumps(given[key])} but the replay gives {json.dumps(actual[key])}")


def replay_report(record: object) -> dict[str, Any]:
    """The ``samloc replay --json`` answer for one record (PROTOCOL §3)."""
    try:
        game = replay(record)
    except RecordError as exc:
        return exc.to_json()
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
    """Write records as JSON Lines atomically; returns how many."""
    def write(f: Any) -> int:
        n = 0
        for r in records:
            f.write((dumps(r) + "\n").encode("utf-8"))
            n += 1
        return n
    return write_with(path, write)
