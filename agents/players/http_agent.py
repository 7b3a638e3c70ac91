"""``HttpAgent``: a remote bot that speaks the bot protocol (PROTOCOL §4).

Each decision is one ``POST /v1/act`` with the seat's view — rules, players,
opener, seat, the seat's cards now and every public event so far — so the
remote side never sees another seat's cards.  The answer is checked: it must
be an event of this seat that is legal here.

A remote bot may itself be a bot server that asks another (``samloc serve --agent
http://...``), so every call carries :data:`HOPS_HEADER`, the bot servers the request has
passed through, and a call past :data:`MAX_HOPS` is refused (:class:`UpstreamLoop`): bots
that ask each other in a loop end at once.  The whole answer has a deadline (``timeout``,
connecting included, not per read: a bot that drips its answer is cut off) and at most
:data:`MAX_ANSWER_BYTES`.  Credentials in the URL (``http://user:password@host``) are sent as
HTTP Basic authentication and never shown: the agent's name and errors carry ``user:***@``
(:func:`agents.registry.shown_spec`).
"""

from __future__ import annotations

import base64
import json
import math
import threading
import time
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

import httpcore

from sam_env.actions import NO_SAM, PASS, SAM, action_from_counts
from sam_env.cards import CardError, cards_str, parse_cards, rank_counts
from sam_env.game import Game

from ..base import Agent, AgentFailure, check_seat
from ..registry import shown_spec

#: The request header that counts the bot servers a ``/v1/act`` request has passed through.  A
#: client that does not send it is at 0; a server that asks an upstream sends what it got plus one.
HOPS_HEADER = "X-Samloc-Hops"
MAX_HOPS = 4                  # bot servers one request may pass through; past them a loop is assumed
MAX_ANSWER_BYTES = 64 * 1024  # an answer is an event and a little info: well under 1 KiB
LOOP_STATUS = 508             # Loop Detected (RFC 5842): what a bot server answers for an UpstreamLoop


class AgentError(AgentFailure):
    """A remote bot that failed to answer, or answered something not allowed (the bot server
    answers 503 with it)."""


class UpstreamLoop(AgentError):
    """A request that has passed through more than :data:`MAX_HOPS` bot servers, or an upstream
    that said so (the bot server answers :data:`LOOP_STATUS` with it)."""


def view_request(game: Game, seat: int) -> dict[str, Any]:
    """The PROTOCOL §4 request body for ``seat``'s decision in ``game``."""
    hand = game.hand(seat)
    if hand is None:
        raise ValueError(f"the cards of seat {seat} are hidden in this game")
    return {"format": "samloc/1", "rules": game.rules.to_record(), "players": game.players,
            "opener": game.opener, "seat": seat, "hand": cards_str(hand), "events": list(game.events)}


def event_action(game: Game, seat: int, event: object) -> int:
    """The action id of a bot's answer event; AgentError if it is not a legal decision of ``seat``."""
    if not isinstance(event, dict):
        raise AgentError(f"the answer's event must be an object, not {_short(event)}")
    if event.get("seat") != seat:
        raise AgentError(f"the answer is for seat {_short(event.get('seat'))}, not seat {seat}")
    typ = event.get("type")
    if typ == "sam":
        if not isinstance(event.get("declare"), bool):
            raise AgentError("a sam answer needs \"declare\": true or false")
        a = SAM if event["declare"] else NO_SAM
    elif typ == "pass":
        a = PASS
    elif typ == "play":
        try:
            cards = parse_cards(event.get("cards"), "the play")
        except CardError as exc:
            raise AgentError(f"bad play in the answer: {_short(str(exc))}") from None
        held = set(game.hand(seat) or [])
        missing = [c for c in cards if c not in held]
        if missing:
            raise AgentError(f"the answer plays {cards_str(missing)[0]}, which seat {seat} does not hold")
        a = action_from_counts(rank_counts(cards))
        if a < 0:
            raise AgentError(f"the answer plays {' '.join(cards_str(cards))}, which is not a combination")
    else:
        raise AgentError(f"the answer's event has unknown type {_short(typ)}")
    if a not in game.legal_actions():
        raise AgentError(f"the answer {_short(event)} is not a legal decision here")
    return a


def _short(value: object, limit: int = 200) -> str:
    """``value`` as one line of at most ``limit`` characters (an upstream's text goes into our errors)."""
    text = " ".join((value if isinstance(value, str) else repr(value)).split())
    return text if len(text) <= limit else text[:limit] + "..."


class _Deadline(threading.local):
    """The deadline (``time.monotonic()``) of the call the current thread is making."""

    at = math.inf

    def left(self, timeout: float | None) -> float:
        """What is left of it, at most ``timeout``; ReadTimeout when nothing is."""
        rest = self.at - time.monotonic()
        if rest <= 0:
            raise httpcore.ReadTimeout("the deadline passed")
        return rest if timeout is None else min(timeout, rest)


class _DeadlineStream(httpcore.NetworkStream):
    """A connection whose every read and write waits at most what is left of the call's deadline
    (httpcore's own timeouts apply to each read: an answer dripped a byte at a time never ends)."""

    def __init__(self, stream: httpcore.NetworkStream, deadline: _Deadline) -> None:
        self._stream, self._deadline = stream, deadline

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, self._deadline.left(timeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        for i in range(0, len(buffer), 16384):  # a request read slowly meets the deadline too
            self._stream.write(buffer[i:i + 16384], self._deadline.left(timeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        tls = self._stream.start_tls(ssl_context, server_hostname, self._deadline.left(timeout))
        return _DeadlineStream(tls, self._deadline)

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _DeadlineBackend(httpcore.SyncBackend):
    """httpcore's sockets, each bounded by the calling thread's :class:`_Deadline`."""

    def __init__(self) -> None:
        self.deadline = _Deadline()

    def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                    local_address: str | None = None, socket_options: Any = None) -> httpcore.NetworkStream:
        stream = super().connect_tcp(host, port, self.deadline.left(timeout), local_address, socket_options)
        return _DeadlineStream(stream, self.deadline)


class HttpAgent(Agent):
    """A bot behind ``http://host:port`` (the served bot, or anyone's); ``timeout``: the deadline
    of each whole answer, in seconds."""

    needs_obs = False

    def __init__(self, url: str, seed: int = 0, timeout: float = 10.0) -> None:
        super().__init__(seed)
        parts = urlsplit(url.rstrip("/"))
        #: the URL without its credentials (what errors name), and its Basic authorization, if any
        self.base_url = urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
        self._auth = (b"Basic " + base64.b64encode(f"{unquote(parts.username or '')}:"
                                                   f"{unquote(parts.password or '')}".encode())
                      if "@" in parts.netloc else None)
        self.name = shown_spec(url.rstrip("/"))
        self.timeout = timeout
        self._backend = _DeadlineBackend()
        self._pool = httpcore.ConnectionPool(network_backend=self._backend)

    def act(self, game: Game, seat: int, hops: int = 0) -> int:
        """``hops``: the bot servers this request has passed through (a server passing a request on
        counts itself); past :data:`MAX_HOPS`, UpstreamLoop and no call."""
        check_seat(game, seat)
        url = self.base_url + "/v1/act"
        if hops > MAX_HOPS:
            raise UpstreamLoop(f"not asking {url}: the request has passed through {hops} bot servers"
                               f" ({HOPS_HEADER}), more than {MAX_HOPS}: bots that ask each other in a loop?")
        status, raw = self._post(url, json.dumps(view_request(game, seat)).encode(), hops)
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        if status != 200:
            why = _short(body.get("error") if isinstance(body, dict) else raw.decode("utf-8", "replace"))
            if status == LOOP_STATUS:  # passed on as it is, so the first caller reads where the loop ended
                raise UpstreamLoop(why)
            raise AgentError(f"{url} answered {status}: {why}")
        if not isinstance(body, dict) or "event" not in body:
            raise AgentError(f"{url} answered without an event: {_short(raw.decode('utf-8', 'replace'))}")
        return event_action(game, seat, body["event"])

    def _post(self, url: str, body: bytes, hops: int) -> tuple[int, bytes]:
        """(status, body) of one call, within the deadline and the size limit, else AgentError."""
        headers = {"Content-Type": "application/json", HOPS_HEADER: str(hops)}
        if self._auth is not None:
            headers["Authorization"] = self._auth.decode()
        deadline = self._backend.deadline
        deadline.at = time.monotonic() + self.timeout
        try:
            with self._pool.stream("POST", url, headers=headers, content=body,
                                   extensions={"timeout": {"pool": self.timeout}}) as resp:
                length = dict((k.lower(), v) for k, v in resp.headers).get(b"content-length", b"0")
                if not length.isdigit() or int(length) > MAX_ANSWER_BYTES:
                    raise AgentError(f"{url} answered with a body of {_short(length.decode('latin-1'), 40)}"
                                     f" bytes, more than {MAX_ANSWER_BYTES}")
                chunks, size = [], 0
                for chunk in resp.iter_stream():
                    size += len(chunk)
                    if size > MAX_ANSWER_BYTES:
                        raise AgentError(f"{url} answered with more than {MAX_ANSWER_BYTES} bytes")
                    chunks.append(chunk)
                return resp.status, b"".join(chunks)
        except httpcore.TimeoutException:
            raise AgentError(f"{url} did not answer within {self.timeout:g} s") from None
        except (httpcore.NetworkError, httpcore.ProtocolError, httpcore.UnsupportedProtocol, OSError) as exc:
            raise AgentError(f"cannot reach {url}: {_short(str(exc) or type(exc).__name__)}") from None
        finally:
            deadline.at = math.inf

    def close(self) -> None:
        self._pool.close()
