"""Cards as integers and as text (PROTOCOL §1).

A card is ``rank * 4 + suit``.  Ranks run ``3 4 5 6 7 8 9 T J Q K A 2`` (0…12),
so the 2 (heo) is rank 12.  Suits are numbered ♣ ♠ ♦ ♥ (0…3): that is the
tie-break order of the ``lowest_card`` opener rule, so the lowest card is
simply the smallest integer.
"""

from __future__ import annotations

from typing import Iterable

RANKS = "3456789TJQKA2"
SUITS = "csdh"  # ♣ ♠ ♦ ♥, in tie-break order
NUM_RANKS = 13
NUM_CARDS = 52
HAND_SIZE = 10
MAX_PLAYERS = NUM_CARDS // HAND_SIZE  # 5: every seat is dealt HAND_SIZE cards from one deck
MIN_PLAYERS = 2      # a game needs an opponent
DEFAULT_PLAYERS = 4  # the table every command, environment and config plays unless told otherwise
RANK_T = 7   # the 10
RANK_K = 10
RANK_A = 11
RANK_2 = 12  # the heo

_SUIT_ALIASES = {"c": 0, "s": 1, "d": 2, "h": 3, "♣": 0, "♠": 1, "♦": 2, "♥": 3,
                 "♧": 0, "♤": 1, "♢": 2, "♡": 3}
_RANK_ALIASES = {c: i for i, c in enumerate(RANKS)} | {"10": RANKS.index("T")}


class CardError(ValueError):
    """A card or move written in a way PROTOCOL §1 does not allow."""


def parse_card(text: object) -> int:
    """``"Ts"``, ``"10♠"``, ``"th"`` → card integer; anything else is a CardError."""
    if not isinstance(text, str):
        raise CardError(f"a card must be a string like 'Ts', not {text!r}")
    t = text.strip()
    if len(t) < 2 or t[-1].lower() not in _SUIT_ALIASES or t[:-1].upper() not in _RANK_ALIASES:
        raise CardError(f"unknown card {text!r} (expected rank 3-9, T/10, J, Q, K, A, 2"
                        " then suit s, c, d, h)")
    return _RANK_ALIASES[t[:-1].upper()] * 4 + _SUIT_ALIASES[t[-1].lower()]


def card_str(card: int) -> str:
    return RANKS[card // 4] + SUITS[card % 4]


def parse_cards(items: object, what: str = "cards") -> list[int]:
    """A list of card strings, each card at most once."""
    if not isinstance(items, list):
        raise CardError(f"{what} must be a list of cards")
    cards = [parse_card(c) for c in items]
    seen: set[int] = set()
    for c in cards:
        if c in seen:
            raise CardError(f"{what} has {card_str(c)} twice")
        seen.add(c)
    return cards


def cards_str(cards: Iterable[int]) -> list[str]:
    return [card_str(c) for c in sorted(cards)]


def rank_counts(cards: Iterable[int]) -> list[int]:
    counts = [0] * NUM_RANKS
    for c in cards:
        counts[c // 4] += 1
    return counts
