"""What clients send: the bodies of ``/v1/act`` and the play page's API (PROTOCOL §4), read strictly.

A body is parsed here rather than by FastAPI, whose messages for an empty, deep or huge body do not
name the problem; anything refused is a :class:`RequestError`, answered 422 with its message.
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any, Literal, TypeVar

from fastapi import Request
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agents.players.http_agent import HOPS_HEADER
from sam_env.cards import DEFAULT_PLAYERS
from sam_env.rules import DEFAULT_PRESET

FORMAT = "samloc/1"


class RequestError(ValueError):
    """A request the server refuses with 422 (the message names the problem)."""


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class EventIn(Strict):
    seat: int
    type: Literal["sam", "pass", "play"]
    declare: bool | None = None
    cards: list[str] | None = None


class ActRequest(Strict):
    format: Literal["samloc/1"]
    rules: str | dict[str, Any]
    players: int
    opener: int
    seat: int
    hand: list[str] = Field(max_length=10)
    events: list[EventIn] = Field(max_length=1000)


def _validation_message(errors: list[Any]) -> str:
    """The first of pydantic's complaints about a body, as one sentence naming the field."""
    if not errors:
        return "invalid request"
    e = errors[0]
    loc = list(e.get("loc", ()))
    where = "".join(f"[{x}]" if isinstance(x, int) else (f".{x}" if i else str(x)) for i, x in enumerate(loc))
    kind = e.get("type", "")
    if kind == "extra_forbidden":
        *parent, field = loc or ["?"]
        at = "".join(f"[{x}]" if isinstance(x, int) else (f".{x}" if i else str(x))
                     for i, x in enumerate(parent))
        return f"unknown field {field!r}" + (f" in {at}" if at else "")
    if kind == "missing":
        return f"missing field {where!r}"
    if kind in ("model_type", "model_attributes_type", "dict_type") and not loc:
        return "the body must be a JSON object"
    return f"{where or 'body'}: {e.get('msg', 'invalid')}"


def _no_constant(name: str) -> object:
    raise RequestError(f"the body is not valid JSON ({name} is not a JSON number)")


def _finite(text: str) -> float:
    x = float(text)
    if not math.isfinite(x):
        raise RequestError("the body has a number too large to read: "
                           + (text if len(text) <= 24 else f"{text[:20]}... ({len(text)} characters)"))
    return x


_DECODER = json.JSONDecoder(parse_constant=_no_constant, parse_float=_finite)  # Python reads NaN; JSON not


def parse_json_body(raw: bytes, content_type: str) -> Any:
    """The one JSON value a request body holds; RequestError names the real problem when it holds none."""
    media = content_type.split(";")[0].strip().lower()
    if media != "application/json":
        raise RequestError("send the body as JSON, with Content-Type: application/json"
                           + (f" (not {media[:40]!r})" if media else ""))
    if not raw.strip():
        raise RequestError("the body is empty: send a JSON object")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RequestError(f"the body is not valid JSON (not UTF-8 text: byte {exc.start + 1})") from None
    try:
        return _DECODER.decode(text)
    except json.JSONDecodeError as exc:
        raise RequestError(f"the body is not valid JSON ({exc.msg} at line {exc.lineno}"
                           f" column {exc.colno})") from None
    except RecursionError:
        raise RequestError("the body nests JSON arrays or objects too deeply") from None
    except ValueError as exc:  # Python refuses to convert integers of more than 4,300 digits
        if "integer string conversion" not in str(exc):
            raise
        raise RequestError(f"the body has a number of more than {sys.get_int_max_str_digits()}"
                           " digits") from None


BodyModel = TypeVar("BodyModel", bound=BaseModel)


async def read_body(request: Request, model: type[BodyModel]) -> BodyModel:
    """The request's body as ``model``, parsed here rather than by FastAPI, whose messages for an
    empty, deep or huge body do not name the problem."""
    value = parse_json_body(await request.body(), request.headers.get("content-type", ""))
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        raise RequestError(_validation_message(exc.errors())) from None


def read_hops(request: Request) -> int:
    """The bot servers a request has passed through (:data:`HOPS_HEADER`; a client that does not
    send it: 0), or RequestError for a value that is not one whole number."""
    values = [v.strip(" \t") for v in request.headers.getlist(HOPS_HEADER)]  # RFC 9110 5.5: around, not in
    if not values:
        return 0
    if len(values) > 1 or not (values[0].isascii() and values[0].isdigit() and len(values[0]) <= 9):
        shown = values[0] if len(values) == 1 else ", ".join(values)
        raise RequestError(f"the {HOPS_HEADER} header must be one whole number (the bot servers this request"
                           f" has passed through), not {shown[:40]!r}")
    return int(values[0])


class NewSession(Strict):
    rules: str | dict[str, Any] = DEFAULT_PRESET
    players: int = DEFAULT_PLAYERS
    seat: int = 0
    seed: int | None = None


class HumanMove(Strict):
    move: Literal["pass", "sam", "no_sam"] | None = None
    cards: list[str] | None = Field(default=None, max_length=10)


