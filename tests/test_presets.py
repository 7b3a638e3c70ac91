"""The preset files list only what differs from the parameters' defaults, and every preset parses to
exactly the rule set it was before they were cut down (#42)."""

from __future__ import annotations

import json
from importlib import resources

import pytest
import yaml

from sam_env.rule_params import PARAMS
from sam_env.rules import DEFAULT_PRESET, PRESET_NAMES, RuleSet
from samloc.commands.rules import main as rules_main

# Every parameter of every preset as the full preset files gave them before #42 (RULES §9).
FROZEN = {
    "hoi_quan_bai": dict(
        max_players=5, first_opener='random', ace_low_straights=True, quad_chops_single_two=True,
        double_quad_chops_pair_two=False, passed_can_chop=True, finish_with_two='allowed',
        bao_mot='penalty',
        instant_wins=['dragon', 'four_twos', 'same_color', 'three_triples', 'five_pairs'],
        sam_declaration=True, cong=20, two_left=10, quad_left=20, chop_two=10, chop_quad=0, sam_win=20,
        sam_fail=20, sam_fail_to_blocker=False, sam_success_den=False, instant_win=20,
        instant_win_adds_penalties=False,
    ),
    "mien_bac": dict(
        max_players=4, first_opener='lowest_card', ace_low_straights=True, quad_chops_single_two=True,
        double_quad_chops_pair_two=False, passed_can_chop=False, finish_with_two='forbidden',
        bao_mot='penalty',
        instant_wins=['dragon', 'four_twos', 'same_color', 'three_triples', 'five_pairs'],
        sam_declaration=True, cong=15, two_left=5, quad_left=20, chop_two=15, chop_quad=15, sam_win=20,
        sam_fail=20, sam_fail_to_blocker=False, sam_success_den=False, instant_win=20,
        instant_win_adds_penalties=True,
    ),
    "online": dict(
        max_players=4, first_opener='random', ace_low_straights=True, quad_chops_single_two=True,
        double_quad_chops_pair_two=True, passed_can_chop=False, finish_with_two='forbidden',
        bao_mot='penalty',
        instant_wins=['dragon', 'four_twos', 'same_color', 'three_triples', 'five_pairs'],
        sam_declaration=True, cong=10, two_left=5, quad_left=10, chop_two=5, chop_quad=10, sam_win=10,
        sam_fail=20, sam_fail_to_blocker=True, sam_success_den=True, instant_win=10,
        instant_win_adds_penalties=False,
    ),
    "s666pg": dict(
        max_players=5, first_opener='random', ace_low_straights=False, quad_chops_single_two=True,
        double_quad_chops_pair_two=False, passed_can_chop=False, finish_with_two='forbidden',
        bao_mot='enforce', instant_wins=[], sam_declaration=True, cong=None, two_left=0, quad_left=0,
        chop_two=0, chop_quad=0, sam_win=20, sam_fail=20, sam_fail_to_blocker=False, sam_success_den=False,
        instant_win=None, instant_win_adds_penalties=False,
    ),
}


def _file(name: str) -> dict:
    text = resources.files("sam_env").joinpath("presets", f"{name}.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text) or {}


def test_the_frozen_copy_names_every_preset_and_parameter():
    assert sorted(FROZEN) == sorted(PRESET_NAMES)
    assert all(list(v) == [p.name for p in PARAMS] for v in FROZEN.values())


@pytest.mark.parametrize("name", PRESET_NAMES)
def test_every_preset_parses_to_the_rule_set_it_was(name):
    full = RuleSet.preset(name).to_dict()
    assert full.pop("name") == name
    # JSON tells true from 1 and keeps the order: the values, their types and the order are today's
    assert json.dumps(full) == json.dumps(FROZEN[name])


@pytest.mark.parametrize("name", PRESET_NAMES)
def test_a_preset_file_lists_only_what_differs_from_the_defaults(name):
    default = {p.name: json.dumps(list(p.default) if isinstance(p.default, tuple) else p.default)
               for p in PARAMS}
    differ = [k for k, v in FROZEN[name].items() if json.dumps(v) != default[k]]
    assert list(_file(name)) == differ  # in the parameters' order, as `samloc rules` shows them


def test_the_defaults_are_the_default_preset():
    assert _file(DEFAULT_PRESET) == {}
    assert RuleSet() == RuleSet.preset(DEFAULT_PRESET)


@pytest.mark.parametrize("name", PRESET_NAMES)
def test_samloc_rules_shows_the_whole_resolved_rule_set(name, capsys):
    assert rules_main([name]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"# rule set {name}")
    assert json.dumps(yaml.safe_load(out)) == json.dumps(FROZEN[name])
