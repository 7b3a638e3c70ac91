"""A table is one parsed rule set and a player count it allows: its name, its parsers, its checks, its
key; the player counts are named once (sam_env/cards.py)."""

from __future__ import annotations

import pytest

from agents.evaluation.evaluate import off_tables
from sam_env import obs_layout
from sam_env.cards import DEFAULT_PLAYERS, HAND_SIZE, MAX_PLAYERS, MIN_PLAYERS, NUM_CARDS
from sam_env.rule_params import PARAMS
from sam_env.rules import DEFAULT_PRESET, PRESET_NAMES, RuleSet, RulesError
from sam_env.table import Table, preset_tables


def test_a_table_is_named_rules_slash_players_and_parsed_back():
    t = Table.parse(" mien_bac/3 ")
    assert (t.rules, t.players) == (RuleSet.preset("mien_bac"), 3)
    assert t.name == str(t) == "mien_bac/3" and Table.parse(t.name) == t
    assert t.to_record() == {"rules": "mien_bac", "players": 3}
    assert Table.from_record(t.to_record()) == t
    house = Table(RuleSet.parse({"preset": "online", "cong": 5}), 2)
    assert house.name == "online+cong=5/2"
    assert house.to_record() == {"rules": {"preset": "online", "cong": 5}, "players": 2}
    assert Table.from_record(house.to_record()) == house


@pytest.mark.parametrize("text, problem", [
    ("hoi_quan_bai", "'hoi_quan_bai' is not RULES/PLAYERS (e.g. hoi_quan_bai/4)"),
    ("hoi_quan_bai/x", "'hoi_quan_bai/x' is not RULES/PLAYERS"),
    ("hoi_quan_bai/-4", "'hoi_quan_bai/-4' is not RULES/PLAYERS"),
    ("hoi_quan_bai/٤", "is not RULES/PLAYERS"),          # a digit, but not an ASCII one
    ("hoi_quan_bai/99999999999999999999", "is not RULES/PLAYERS"),
    ("mien_bac/5", "players must be an integer from 2 to 4 under mien_bac"),
    ("s666pg/1", "players must be an integer from 2 to 5 under s666pg"),
    ("nowhere/4", "unknown preset 'nowhere'"),
])
def test_a_bad_table_is_refused_in_one_line(text, problem):
    with pytest.raises(RulesError) as err:
        Table.parse(text)
    assert problem in str(err.value) and "\n" not in str(err.value)


def test_a_table_is_checked_when_built_whatever_builds_it():
    rs = RuleSet.preset("online")
    for players in (1, 5, True, 4.0, "4"):
        with pytest.raises(RulesError, match="players must be an integer from 2 to 4 under online"):
            Table(rs, players)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="rules must be a RuleSet"):
        Table("online", 4)  # type: ignore[arg-type]
    with pytest.raises(RulesError, match="a table is"):
        Table.from_record({"rules": "online"})
    with pytest.raises(RulesError, match="players must be an integer"):
        Table.from_record({"rules": "online", "players": "4"})


def test_the_key_is_what_is_played_not_how_the_rules_were_written():
    plain = Table(RuleSet.preset("online"), 4)
    same = Table(RuleSet.parse({"preset": "online", "cong": 10}), 4)   # online's own cóng
    assert same != plain and same.name == "online+cong=10/4"          # written differently ...
    assert same.key == plain.key                                      # ... the same game
    assert Table(RuleSet.preset("online"), 3).key != plain.key
    assert off_tables([plain],
                      [same, Table(RuleSet.preset("online"), 3)]) == [Table(RuleSet.preset("online"), 3)]
    assert off_tables(None, [plain]) == []  # a rule-based agent plays every table


def test_the_default_table_and_the_preset_tables():
    assert Table.default() == Table(RuleSet.preset(DEFAULT_PRESET),
                                    DEFAULT_PLAYERS) == Table.parse("hoi_quan_bai/4")
    every = preset_tables()
    assert [t.name for t in every][:4] == ["hoi_quan_bai/2", "hoi_quan_bai/3", "hoi_quan_bai/4",
                                           "hoi_quan_bai/5"]
    assert len(every) == 14 and len({t.key for t in every}) == 14
    assert {t.rules.name for t in every} == set(PRESET_NAMES)


def test_the_player_counts_are_named_once():
    assert MAX_PLAYERS == NUM_CARDS // HAND_SIZE == 5 and MIN_PLAYERS == 2
    assert MIN_PLAYERS <= DEFAULT_PLAYERS <= min(RuleSet.preset(n).max_players for n in PRESET_NAMES)
    row = next(p for p in PARAMS if p.name == "max_players")
    assert (row.type.lo, row.type.hi, row.default) == (MIN_PLAYERS, MAX_PLAYERS, MAX_PLAYERS)
    assert RuleSet.preset("mien_bac").player_counts == range(2, 5)
    assert obs_layout.SECTION["players"].shape == (MAX_PLAYERS - MIN_PLAYERS + 1,)
