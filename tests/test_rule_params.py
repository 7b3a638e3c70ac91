"""The rule parameter table is the one declaration: every derived place sees a new row, and the
derived rule arrays and observation rules blocks of the presets stay what they were."""

from __future__ import annotations

import dataclasses
import shutil

import numpy as np
import pytest

from sam_env import jitcache, obs, obs_layout, rule_params
from sam_env.rule_params import AMOUNT, PARAMS, Amount, Cell, Param
from sam_env.rules import PRESET_NAMES, RuleSet, RulesError, rule_set_class

DUMMY = Param("dummy_fee", Amount(), 7, slot=len(PARAMS), obs_order=len(PARAMS),
              cells=(Cell("dummy_fee", AMOUNT),), doc="a fee no game has")
TABLE = (*PARAMS, DUMMY)


def test_a_new_row_reaches_every_derived_place():
    cls = rule_set_class(TABLE)
    assert [f.name for f in dataclasses.fields(cls)][-1] == "dummy_fee"
    r = cls.preset("hoi_quan_bai")
    assert r.dummy_fee == 7  # the preset files do not set it: the default
    r = r.with_overrides({"dummy_fee": 9})
    assert r.overrides() == {"dummy_fee": 9} and r.to_record() == {"preset": "hoi_quan_bai", "dummy_fee": 9}
    assert "dummy_fee: 9" in r.to_yaml()
    with pytest.raises(RulesError, match="dummy_fee must be a whole number of lá"):
        r.with_overrides({"dummy_fee": -1})
    # the kernel's rule array
    assert rule_params.slots(TABLE)["dummy_fee"] == len(PARAMS)
    arr = r.to_array()
    assert len(arr) == len(PARAMS) + 1 and arr[-1] == 9
    assert np.array_equal(arr[:-1], RuleSet.preset("hoi_quan_bai").to_array())
    # the observation's rules block: names, kinds, bounds, the kernel that writes it
    secs = obs_layout.sections(TABLE)
    rules = {s.name: s for s in secs}["rules"]
    names = [label for label, _, _ in rules.parts]
    assert names == [*obs.RULE_FEATURES[:-1], "dummy_fee/20", obs.RULE_FEATURES[-1]]
    assert obs_layout.offsets(secs)["_end"] == obs.OBS_SIZE + 1
    at = obs_layout.offsets(secs)["rules"] + names.index("dummy_fee/20")
    assert obs_layout.cell_kinds(secs)[at] == obs_layout.AMOUNT_LA
    assert obs_layout.obs_bounds(secs)[1][at] == obs_layout.AMOUNT_CLIP
    out = np.zeros(len(names), dtype=np.float32)
    obs.write_rules(arr, *obs.rule_spec(obs_layout.rule_cells(TABLE)), out, 0)
    assert out[names.index("dummy_fee/20")] == np.float32(9 / 20)
    base = np.zeros(len(obs.RULE_FEATURES), dtype=np.float32)
    obs.write_rules(arr[:-1], obs.RULE_SLOT, obs.RULE_KIND, obs.RULE_ARG, base, 0)
    assert np.array_equal(np.delete(out, names.index("dummy_fee/20")), base)


def test_the_table_is_checked():
    with pytest.raises(ValueError, match="slots"):
        rule_params.slots((*PARAMS, dataclasses.replace(DUMMY, slot=0)))
    with pytest.raises(ValueError, match="obs_order"):
        rule_params.obs_cells((*PARAMS, dataclasses.replace(DUMMY, obs_order=3)))


# Today's values, written out: the shipped checkpoints read these blocks (OBS_VERSION 1).
PINNED = {
    "hoi_quan_bai": ([5, 1, 1, 0, 1, 0, 0, 31, 1, 20, 10, 20, 10, 0, 20, 20, 0, 0, 20, 0, 0],
                     [1, 1, 0, 1, 0, 0, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, .5, 1, .5, 0, 1, 1, 0, 0,
                      1, 0, 0, 1, 1]),
    "s666pg": ([5, 0, 1, 0, 0, 1, 1, 0, 1, -1, 0, 0, 0, 0, 20, 20, 0, 0, 0, 0, 0],
               [0, 1, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 1, 1]),
    "mien_bac": ([4, 1, 1, 0, 0, 1, 0, 31, 1, 15, 5, 20, 15, 15, 20, 20, 0, 0, 20, 1, 1],
                 [1, 1, 0, 0, 1, 0, 1, 1, 1, 1, 1, 0, 0, 1, 1, .75, .25, 1, .75, .75, 1, 1, 0, 0,
                  1, 1, 1, .8, 1]),
    "online": ([4, 1, 1, 1, 0, 1, 0, 31, 1, 10, 5, 10, 5, 10, 10, 20, 1, 1, 10, 0, 0],
               [1, 1, 1, 0, 1, 0, 1, 1, 1, 1, 1, 0, 0, 1, 1, .5, .25, .5, .25, .5, .5, 1, 1, 1,
                .5, 0, 0, .8, 1]),
}


@pytest.mark.parametrize("name", PRESET_NAMES)
def test_every_presets_rule_array_and_rules_block_are_pinned(name):
    array, block = PINNED[name]
    rs = RuleSet.preset(name)
    assert rs.to_array().dtype == np.int32 and rs.to_array().tolist() == array
    out = np.zeros(obs.OBS_SIZE, dtype=np.float32)
    obs.write_rules(rs.to_array(), obs.RULE_SLOT, obs.RULE_KIND, obs.RULE_ARG, out, obs.F_RULES)
    assert out[obs.F_RULES:obs.F_RULES + len(block)].tobytes() == np.array(block, dtype=np.float32).tobytes()


def test_an_edited_table_invalidates_the_compiled_kernels(tmp_path):
    """numba freezes the slots into the kernels: the cache fingerprint covers the table's file."""
    src = jitcache.package_dir("sam_env")
    copy = tmp_path / "sam_env"
    copy.mkdir()
    for f in src.glob("*.py"):
        shutil.copy(f, copy / f.name)
    before = jitcache.fingerprint([copy])
    table = copy / "rule_params.py"
    table.write_text(table.read_text().replace('"cong", Amount(none=-1), 20, 9,',
                                               '"cong", Amount(none=-1), 20, 18,'))
    assert jitcache.fingerprint([copy]) != before
