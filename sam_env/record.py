"""``samloc/1`` game records (PROTOCOL §2) and their replay (PROTOCOL §3).

This module builds games from records (:func:`replay`); :class:`~sam_env.game.Game` writes
them (``to_record``) and never imports this module: the dependency runs one way.
"""

from __future__ import annotations

import io
import json
import sys
from typing import IO, Any, BinaryIO, Callable, Iterable, Iterator, Mapping, NamedTuple

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
        super().__init__(_one_line(message))
        self.error_at = error_at

    def to_json(self) -> dict[str, Any]:
        return {"ok": False, "error_at": self.error_at, "error": str(self)}


MAX_MESSAGE = 1000  # characters: messages echo values from the input, and a value may be huge


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
            raise RecordError(f"result.{key} is {_show(given[key])}"
                              f" but the replay gives {_show(actual[key])}")


def same_json(a: object, b: object) -> bool:
    """JSON equality that tells ``true`` from ``1`` and ``-3.0`` from ``-3`` (Python's ``==`` does not)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(map(same_json, a, b))  # type: ignore[arg-type]
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_json(v, b[k]) for k, v in a.items())  # type: ignore
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


def json_line(rep: dict[str, Any]) -> str:
    """An answer as ``samloc replay --json`` prints it."""
    return json.dumps(rep, ensure_ascii=False)


def answer_all(records: Iterable[object], out: IO[str], show: Callable[[dict], str] = json_line) -> int:
    """Replay and answer each record as it comes (one line each on ``out``): 1 if one was bad, else 0."""
    bad = False
    for rec in records:
        rep = rec.to_json() if isinstance(rec, RecordError) else replay_report(rec)
        bad |= not rep["ok"]
        out.write(show(rep) + "\n")
    out.flush()  # here, not at exit: a closed pipe must raise where it is handled
    return 1 if bad else 0


# ---- reading a file of records (PROTOCOL §2, §3) ----------------------------------------------
MAX_RECORD_BYTES = 1 << 20  # real records are a few KB; a longer line (or spread record) is refused unread
_TOO_LONG = f"is over {MAX_RECORD_BYTES >> 20} MiB: no samloc/1 record is that long"
MAX_SKIP_BYTES = 64 << 20  # a line longer still has no end in sight: the rest of the input is not read
_ENDLESS = (f"is over {MAX_RECORD_BYTES >> 20} MiB and has not ended after {MAX_SKIP_BYTES >> 20} MiB:"
            " no samloc/1 record is that long; the rest of the input is not read")
_BOM = b"\xef\xbb\xbf"
_JSON_SPACE = " \t\r"  # JSON's whitespace on a line (str.strip would also take U+2028, \x85, \x0c)


class _Line(NamedTuple):
    """One input line: its number from 1, and its text, or why it has none (``error``)."""

    n: int
    text: str | None
    error: str | None = None


class _BadJSON(Exception):
    """Why a text is not one JSON value.  ``wants_more``: a valid start of one that ends early."""

    def __init__(self, what: str, *, syntax: str | None = None, lineno: int = 1, colno: int = 0,
                 wants_more: bool = False):
        super().__init__(what)
        self.what, self.syntax, self.wants_more = what, syntax, wants_more
        self.lineno, self.colno = lineno, colno


def _no_constant(name: str) -> object:
    raise _BadJSON(f"is not valid JSON ({name} is not a JSON number)")


_DECODER = json.JSONDecoder(parse_constant=_no_constant)  # Python reads NaN and Infinity; JSON has none


def _parse(text: str) -> object:
    """The one JSON value ``text`` holds; _BadJSON names the real problem when there is none."""
    try:
        return _DECODER.decode(text)
    except json.JSONDecodeError as exc:
        raise _BadJSON(f"is not valid JSON ({_where(exc.msg, exc.colno)})", syntax=exc.msg,
                       lineno=exc.lineno, colno=exc.colno,
                       wants_more=exc.pos >= len(text.rstrip(_JSON_SPACE + "\n"))) from None
    except RecursionError:
        raise _BadJSON("nests JSON arrays or objects too deeply") from None
    except ValueError as exc:  # Python refuses to convert integers of more than 4,300 digits
        if "integer string conversion" not in str(exc):
            raise
        raise _BadJSON(f"has a number of more than {sys.get_int_max_str_digits()} digits") from None


def _where(msg: str, colno: int, lineno: int | None = None) -> str:
    """json's message with its place ("Unterminated string starting at" already ends in "at")."""
    place = f"column {colno}" if lineno is None else f"line {lineno} column {colno}"
    return f"{msg} {place}" if msg.endswith(" at") else f"{msg} at {place}"


def _lines(stream: BinaryIO) -> Iterator[_Line]:
    """The lines of a byte stream, split on ``\\n`` only (a trailing ``\\r`` dropped), each decoded
    on its own, so that one bad byte or one huge line spoils only its own line."""
    limit = MAX_RECORD_BYTES + 2  # room for \r\n
    n = 0
    while raw := stream.readline(limit):
        n += 1
        if len(raw) == limit and not raw.endswith(b"\n"):  # over the limit: the rest is skipped unread
            if not _skip_rest_of_line(stream):  # /dev/zero, say: no end to skip to
                yield _Line(n, None, _ENDLESS)
                return
            yield _Line(n, None, _TOO_LONG)
            continue
        raw = raw.removesuffix(b"\n").removesuffix(b"\r")
        if n == 1:
            raw = raw.removeprefix(_BOM)
        yield _decoded(n, raw)


def _decoded(n: int, raw: bytes) -> _Line:
    if len(raw) > MAX_RECORD_BYTES:
        return _Line(n, None, _TOO_LONG)
    try:
        return _Line(n, raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        return _Line(n, None, f"is not UTF-8 text (byte {exc.start + 1} of the line)")


def _skip_rest_of_line(stream: BinaryIO) -> bool:
    """Read past the end of the current line; False (the input given up) if it has none within
    MAX_SKIP_BYTES."""
    skipped = 0
    while (chunk := stream.readline(1 << 16)) and not chunk.endswith(b"\n"):
        skipped += len(chunk)
        if skipped > MAX_SKIP_BYTES:
            return False
    return True


def _blank(line: _Line) -> bool:
    return line.text is not None and not line.text.strip(_JSON_SPACE)


def _line_value(line: _Line) -> object:
    """The record on one line, or a RecordError that names the line."""
    if line.text is None:
        return RecordError(f"line {line.n} {line.error}")
    try:
        return _parse(line.text)
    except _BadJSON as bad:
        return RecordError(f"line {line.n} {bad.what}")


def iter_records(stream: BinaryIO) -> Iterator[object]:
    """Each record of a ``samloc replay`` input in order, read one at a time: a JSON value to
    replay, or a RecordError (naming its line) where there is none.  Memory stays bounded
    by MAX_RECORD_BYTES however large the input.

    PROTOCOL §2: an input is one record, which may spread over lines (pretty-printed), or
    JSON Lines.  The first non-blank line decides: if it starts a JSON value without ending
    it, the input is one record, with one answer however it is broken; otherwise it is JSON
    Lines, where blank lines are skipped and every other line gets its own answer.  A line
    holding a whole record (an object with "format") after the start of a spread one ends
    it: what follows is JSON Lines, so a cut-short first line spoils only itself.
    """
    lines = _lines(stream)
    first = next((line for line in lines if not _blank(line)), None)
    if first is None:
        yield RecordError("the input is empty: expected a samloc/1 record")
        return
    if first.text is not None:
        try:
            value = _parse(first.text)
        except _BadJSON as bad:
            if bad.wants_more:
                yield from _spread_record(first, bad, lines)
                return
            value = RecordError(f"line {first.n} {bad.what}")
    else:
        value = RecordError(f"line {first.n} {first.error}")
    yield value
    yield from _json_lines(lines)


def _json_lines(lines: Iterable[_Line]) -> Iterator[object]:
    for line in lines:
        if not _blank(line):
            yield _line_value(line)


class _Spread(NamedTuple):
    """The lines of a record spread over lines, as far as they are held (MAX_RECORD_BYTES)."""

    held: list[_Line]
    problem: tuple[int, _Line] | None  # the first line that cannot be part of it, and its index in held
    record_line: _Line | None          # the line holding a whole record that ended it, or None at the end


def _spread_record(first: _Line, first_bad: _BadJSON, lines: Iterator[_Line]) -> Iterator[object]:
    """The record spread over the lines from ``first`` (pretty-printed): its value, or one
    RecordError for all of it.  It runs to the input's end, or up to a line that holds a
    whole record (a cut-short record before JSON Lines): those go on from there, each line
    answered.
    """
    spread = _gather(first, lines)
    if spread.problem is None and all(_blank(line) for line in spread.held[1:]):
        yield RecordError(f"line {first.n} {first_bad.what}")  # one line, cut short
    else:
        yield _spread_value(first.n, spread.held, spread.problem)
    if spread.record_line is not None:
        yield _line_value(spread.record_line)
        yield from _json_lines(lines)


def _whole_record(line: _Line) -> bool:
    """A line holding a whole object with a "format": a JSON Lines record.  No line inside a
    pretty-printed record is one (its lines hold fragments, events or hands at most)."""
    text = (line.text or "").strip(_JSON_SPACE)
    if not (text.startswith("{") and text.endswith("}") and '"format"' in text):
        return False
    value = _line_value(line)
    return isinstance(value, dict) and "format" in value


def _gather(first: _Line, lines: Iterator[_Line]) -> _Spread:
    """The lines of a spread record from ``first``: up to the input's end or to a line that
    holds a whole record; past MAX_RECORD_BYTES they are read on but not held."""
    held, size, overflow = [first], len(first.text or ""), False
    problem: tuple[int, _Line] | None = None
    for line in lines:
        if _whole_record(line):
            return _Spread(held, problem, line)
        if overflow:
            continue
        index = len(held)
        size += len(line.text or "") + 1
        if size > MAX_RECORD_BYTES:
            overflow = True
            line = line._replace(text=None, error=f"takes it over {MAX_RECORD_BYTES >> 20} MiB:"
                                                  " no samloc/1 record is that long")
        else:
            held.append(line)
        if line.text is None and problem is None:
            problem = (index, line)
    return _Spread(held, problem, None)


def _spread_value(n0: int, held: list[_Line], problem: tuple[int, _Line] | None) -> object:
    """The value of a spread record, or the RecordError at the first place it goes wrong."""
    end = len(held) if problem is None else problem[0]
    try:
        value = _parse(_joined(held[:end]))
    except _BadJSON as bad:
        if problem is not None and bad.wants_more:  # good up to the line that cannot be part of it
            return RecordError(f"the record that begins on line {n0}: line {problem[1].n} {problem[1].error}")
        return _spread_error(n0, held[:end], bad)
    return value if problem is None else _followed_by_more(n0, problem[1].n)


def _joined(buf: list[_Line]) -> str:
    return "\n".join(ln.text or "" for ln in buf)


def _spread_error(n0: int, buf: list[_Line], bad: _BadJSON) -> RecordError:
    """One error for a record spread over lines, naming the line where it goes wrong."""
    head = f"the record that begins on line {n0}"
    if bad.syntax is None:
        return RecordError(f"{head} {bad.what}")
    if bad.wants_more:
        last = max(line.n for line in buf if not _blank(line))
        return RecordError(f"{head} is cut short: its JSON has not ended by line {last}")
    at = n0 + bad.lineno - 1
    if bad.syntax == "Extra data":
        return _followed_by_more(n0, at)
    return RecordError(f"{head} is not valid JSON ({_where(bad.syntax, bad.colno, at)})")


def _followed_by_more(n0: int, at: int) -> RecordError:
    return RecordError(f"the record that begins on line {n0} is followed by more at line {at}:"
                       " several records go one per line (JSON Lines)")


def parse_records(text: str | bytes) -> Iterator[object]:
    """iter_records over a whole input held in memory (the CLI streams instead)."""
    data = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
    return iter_records(io.BytesIO(data))


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
