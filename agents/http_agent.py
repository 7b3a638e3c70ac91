"""``HttpAgent``: a remote bot that speaks the bot protocol (PROTOCOL §4).

Each decision is one ``POST /v1/act`` with the seat's view — rules, players,
opener, seat, the seat's cards now and every public event so far — so the
remote side never sees another seat's cards.  The answer is checked: it must
be an event of this seat that is legal here.
"""

from __future__ import annotations

from typing import Any

import httpx

from sam_env.actions import NO_SAM, PASS, SAM, action_from_counts
from sam_env.cards import CardError, cards_str, parse_cards, rank_counts
from sam_env.game import Game

from .base import Agent, AgentFailure, check_seat


class AgentError(AgentFailure):
    """A remote bot that failed to answer, or answered something not allowed (the bot server
    answers 503 with it)."""


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
        raise AgentError(f"the answer's event must be an object, not {event!r}")
    if event.get("seat") != seat:
        raise AgentError(f"the answer is for seat {event.get('seat')!r}, not seat {seat}")
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
            raise AgentError(f"bad play in the answer: {exc}") from None
        held = set(game.hand(seat) or [])
        missing = [c for c in cards if c not in held]
        if missing:
            raise AgentError(f"the answer plays {cards_str(missing)[0]}, which seat {seat} does not hold")
        a = action_from_counts(rank_counts(cards))
        if a < 0:
            raise AgentError(f"the answer plays {' '.join(cards_str(cards))}, which is not a combination")
    else:
        raise AgentError(f"the answer's event has unknown type {typ!r}")
    if a not in game.legal_actions():
        raise AgentError(f"the answer {event} is not a legal decision here")
    return a


class HttpAgent(Agent):
    """A bot behind ``http://host:port`` (the served bot, or anyone's)."""

    needs_obs = False

    def __init__(self, url: str, seed: int = 0, timeout: float = 10.0,
                 transport: httpx.BaseTransport | None = None) -> None:
        super().__init__(seed)
        self.base_url = url.rstrip("/")
        self.name = self.base_url
        self.timeout = timeout
        self._client = httpx.Client(timeout=timeout, transport=transport)

    def act(self, game: Game, seat: int) -> int:
        check_seat(game, seat)
        url = self.base_url + "/v1/act"
        try:
            resp = self._client.post(url, json=view_request(game, seat))
        except httpx.TimeoutException:
            raise AgentError(f"{url} did not answer within {self.timeout:g} s") from None
        except httpx.HTTPError as exc:
            raise AgentError(f"cannot reach {url}: {exc}") from None
        try:
            body = resp.json()
        except ValueError:
            body = None
        if resp.status_code != 200:
            why = body.get("error") if isinstance(body, dict) else resp.text[:200]
            raise AgentError(f"{url} answered {resp.status_code}: {why}")
        if not isinstance(body, dict) or "event" not in body:
            raise AgentError(f"{url} answered without an event: {resp.text[:200]}")
        return event_action(game, seat, body["event"])

    def close(self) -> None:
        self._client.close()
