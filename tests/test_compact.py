"""Compact rollouts: the learner sees exactly the observation, mask and hands the worker encoded."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sam_env.obs import FULL_EXTRA, OBS_SIZE, encode_hidden_batch
from sam_env.rules import PRESET_NAMES, RuleSet
from sam_env.vector import SelfPlayBatch
from training.run import compact

CPU = torch.device("cpu")


def random_states(rules: str, players: int, games: int, steps: int, seed: int) -> dict[str, np.ndarray]:
    """Observations, masks and hidden hands of every decision in ``games`` x ``steps`` of random legal
    play."""
    rng = np.random.default_rng(seed)
    env = SelfPlayBatch(rules, players, games, seed)
    seat, obs, mask = env.reset(seed=seed)
    out: dict[str, list[np.ndarray]] = {"obs": [], "mask": [], "hid": []}
    for _ in range(steps):
        hid = np.zeros((games, FULL_EXTRA), dtype=np.uint8)
        encode_hidden_batch(env.game_batch.states, seat.astype(np.int64), hid)
        out["obs"].append(obs.copy())
        out["mask"].append(mask.copy())
        out["hid"].append(hid)
        act = np.array([rng.choice(np.flatnonzero(m)) for m in mask])
        seat, obs, mask, _, _ = env.step(act)
    return {k: np.concatenate(v) for k, v in out.items()}


def round_trip(obs: np.ndarray, mask: np.ndarray, hid: np.ndarray) -> dict[str, torch.Tensor]:
    n = len(obs)
    rng = np.random.default_rng(n)
    plain = {"logp": rng.standard_normal(n).astype(np.float32),
             "val": rng.standard_normal(n).astype(np.float32),
             "adv": rng.standard_normal(n).astype(np.float32),
             "ret": rng.standard_normal(n).astype(np.float32),
             "teach": rng.integers(-1, 201, n).astype(np.int16)}
    act = rng.integers(0, 201, n)
    packed = compact.pack(obs, mask, hid, act, plain)
    got = compact.expand(compact.to_device(packed, CPU))
    assert torch.equal(got["act"], torch.from_numpy(act))
    for k, v in plain.items():
        assert torch.equal(got[k], torch.from_numpy(v)), k
    return got


def same_bits(a: torch.Tensor, b: np.ndarray) -> bool:
    return a.dtype == torch.float32 and torch.equal(a.view(torch.int32),
                                                    torch.from_numpy(b).view(torch.int32))


@pytest.mark.parametrize("rules", PRESET_NAMES)
def test_the_learner_sees_the_workers_observation_bit_for_bit(rules: str) -> None:
    players = range(2, RuleSet.parse(rules).max_players + 1)
    for p in players:
        s = random_states(rules, p, games=48, steps=48, seed=p)  # 2,304 states per table
        got = round_trip(s["obs"], s["mask"], s["hid"])
        assert same_bits(got["obs"], s["obs"]), (rules, p)
        assert torch.equal(got["mask"], torch.from_numpy(s["mask"]))
        assert torch.equal(got["hid"], torch.from_numpy(s["hid"]))


def test_every_code_of_the_real_valued_cells_expands_exactly() -> None:
    """Each coded cell set to each value the encoder can write (clipped amounts included)."""
    s = random_states("hoi_quan_bai", 4, games=8, steps=4, seed=0)
    lay = compact.layout()
    cells = [(lay.quarters, np.arange(5) * 0.25)]
    cells += [(c.cols, np.arange(c.lo, c.hi + 1) / c.denom) for c in lay.coded]
    for cols, values in cells:
        obs = np.repeat(s["obs"][:1], len(values), axis=0)
        obs[:, cols] = values.astype(np.float32)[:, None]  # numpy rounds the float64 quotient like numba
        got = round_trip(obs, s["mask"][:1].repeat(len(values), 0), s["hid"][:1].repeat(len(values), 0))
        assert same_bits(got["obs"], obs)


def test_a_rollout_ships_under_300_bytes_per_decision() -> None:
    s = random_states("online", 3, games=16, steps=8, seed=1)
    n = len(s["obs"])
    plain = {k: np.zeros(n, np.float32) for k in ("logp", "val",
                                                  "adv", "ret")} | {"teach": np.zeros(n, np.int16)}
    packed = compact.pack(s["obs"], s["mask"], s["hid"], np.zeros(n, np.int64), plain)
    assert compact.nbytes(packed) / n <= 300
    # the float32 batch it replaces
    float_bytes = OBS_SIZE * 4 + s["mask"].shape[1] + FULL_EXTRA + 8 + 4 * 4 + 2
    assert float_bytes == 4459
    no_critic = compact.pack(s["obs"], s["mask"], s["hid"][:, :0], np.zeros(n, np.int64), plain)
    assert compact.expand(compact.to_device(no_critic, CPU))["hid"].shape == (n, 0)
