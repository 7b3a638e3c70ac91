"""One seeding convention (sam_env/seeding.py): a seed names one sequence of deals,
and Game.new, GameBatch, the self-play batch, the Gymnasium and PettingZoo envs and
samloc eval all deal from it; the mixers keep their numbers."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from sam_env import core, seeding
from sam_env.cards import HAND_SIZE, parse_card
from sam_env.game import Game
from sam_env.rules import RuleSet
from sam_env.table import Table

RULES, PLAYERS = "hoi_quan_bai", 4  # every instant win a random lead could end a game with is enabled


def deal_of(game) -> tuple[list[list[int]], int]:
    return [game.hand(s) for s in range(game.players)], game.opener


def playable(seed: int, count: int, rules: str = RULES, players: int = PLAYERS) -> list[tuple]:
    """The first ``count`` deals of ``seed`` that need a decision, through Game.new."""
    out, k = [], 0
    while len(out) < count:
        g = Game.new(rules, players, seed=seed, deal=k)
        if not g.finished:
            out.append(deal_of(g))
        k += 1
    return out


def rows(hands: np.ndarray, openers, players: int = PLAYERS) -> list[tuple]:
    return [([sorted(int(c) for c in hands[g, s]) for s in range(players)], int(openers[g]))
            for g in range(len(openers))]


def test_game_new_walks_the_seed_stream():
    rng = seeding.stream(5)
    rule_array = RuleSet.parse(RULES).to_array()
    arr = np.zeros((core.MAX_PLAYERS, HAND_SIZE), dtype=np.int64)
    for k in range(6):
        opener = int(core.random_deal(rng, 0, rule_array, PLAYERS, arr))
        assert deal_of(Game.new(RULES, PLAYERS, seed=5, deal=k)) == rows(arr[None], [opener])[0]
    assert Game.new(RULES, PLAYERS, seed=5, opener=2).opener == 2
    assert deal_of(Game.new(RULES, PLAYERS, seed=5)) != deal_of(Game.new(RULES, PLAYERS, seed=6))
    assert Game.new(RULES, PLAYERS).players == PLAYERS  # seed=None: a seed from the OS
    for bad in (-1, 1.5, "7"):
        with pytest.raises(ValueError, match="seed"):
            Game.new(RULES, PLAYERS, seed=bad)
    with pytest.raises(ValueError, match="deal"):
        Game.new(RULES, PLAYERS, seed=1, deal=-1)


def test_batches_and_envs_give_game_g_the_deals_of_seed_plus_g():
    from sam_env.batch import GameBatch
    from sam_env.gym_env import SamLocEnv, SamLocVectorEnv
    from sam_env.vector import SelfPlayBatch

    seed, n = 40, 6
    want = [playable(seed + g, 1)[0] for g in range(n)]
    gb = GameBatch(RuleSet.parse(RULES), PLAYERS, num_games=n, seed=seed)
    assert rows(gb.hands, gb.states[:, core.O_OPENER]) == want
    sp = SelfPlayBatch(RULES, PLAYERS, num_envs=n, seed=seed).game_batch
    assert rows(sp.hands, sp.states[:, core.O_OPENER]) == want
    for opponents in ("random", lambda obs, mask: int(np.flatnonzero(mask)[0])):  # compiled and Python paths
        venv = SamLocVectorEnv(n, RULES, PLAYERS, opponents=opponents)
        venv.reset(seed=seed)
        assert rows(venv.games.hands, venv.games.states[:, core.O_OPENER]) == want
    for g in range(n):
        env = SamLocEnv(RULES, PLAYERS)
        env.reset(seed=seed + g)
        assert rows(env.games.hands, env.games.states[:, core.O_OPENER]) == [want[g]]


def _episodes(env_reset, read, count: int, step) -> list[tuple]:
    """Play ``count`` episodes of an env with first-legal actions; the deal of each."""
    out = []
    env_reset(seed=12)
    for _ in range(count):
        out.append(read())
        while not step():
            pass
        env_reset()
    return out


def test_one_env_plays_the_deals_of_samloc_eval_one_per_episode(tmp_path):
    from agents.evaluation.evaluate import evaluate
    from sam_env.gym_env import SamLocEnv
    from sam_env.pettingzoo_env import raw_env

    count = 12
    path = tmp_path / "games.jsonl"
    evaluate("random", "random", Table(RuleSet.parse(RULES), PLAYERS), count, seed=12, save_games=str(path))
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(records) == count * PLAYERS  # each deal once per rotation, rotations together
    dealt = [([sorted(parse_card(c) for c in h) for h in r["hands"]], r["opener"]) for r in records]
    assert all(dealt[i] == dealt[i - i % PLAYERS] for i in range(len(dealt)))
    eval_deals = dealt[::PLAYERS]
    assert eval_deals == playable(12, count)

    env = SamLocEnv(RULES, PLAYERS, learner_seat=1)
    state = {}

    def gym_reset(seed=None):
        state["obs"], _ = env.reset(seed=seed)

    def gym_step():
        a = int(np.flatnonzero(state["obs"]["action_mask"])[0])
        state["obs"], _, term, _, _ = env.step(a)
        return term

    gym = _episodes(gym_reset, lambda: rows(env.games.hands, env.games.states[:, core.O_OPENER])[0],
                    count, gym_step)
    assert gym == eval_deals

    aec = raw_env(rules=RULES, players=PLAYERS)

    def aec_step():
        agent = aec.agent_selection
        aec.step(int(np.flatnonzero(aec.observe(agent)["action_mask"])[0]))
        return all(aec.terminations.values())

    pz = _episodes(aec.reset, lambda: rows(aec._hands[None], [aec.state_row[core.O_OPENER]])[0],
                   count, aec_step)
    assert pz == eval_deals


def test_samloc_eval_deals_never_change():
    """The README's published evaluations (seed 12345) were made on exactly these deals."""
    rule_array = RuleSet.parse(RULES).to_array()
    hands = np.zeros((1000, core.MAX_PLAYERS, HAND_SIZE), dtype=np.int64)
    openers = np.zeros(1000, dtype=np.int64)
    skipped = core.playable_deals(seeding.stream(12345), 0, rule_array, PLAYERS, hands, openers)
    digest = hashlib.sha256(np.sort(hands[:, :PLAYERS], axis=2).astype(np.int8).tobytes()
                            + openers.astype(np.int8).tobytes()).hexdigest()
    assert (skipped, digest) == (8, "aac58f1e1c4ae164a5d8e32f3fcd0f442c4fc58eb1c34bb678b26fc3a4b64ca3")
    assert sorted(hands[0, 0].tolist()) == [8, 12, 21, 28, 29, 33, 34, 37, 48, 49] and openers[0] == 3


def test_mix_keeps_the_trainers_seeds():
    """``seeding.mix`` returns what the trainer's former ``_mix`` returned, so runs stay reproducible."""
    pinned = {(0,): 6229623725594924965, (1,): 1665146963891722970, (0, 1): 5232054368819540721,
              (12345, 7, 3): 2808595538189091976, (2 ** 63 + 5, -1, 99): 2110111105840137305,
              (): 2177342782468422677, (42, 0, 0): 3144793267856379056}
    for args, value in pinned.items():
        assert seeding.mix(*args) == value
    assert all(0 <= seeding.mix(i, 3) < 2 ** 63 for i in range(100))


def test_mix64_is_splitmix64():
    """The streams are splitmix64 (Steele, Lea & Flood): its published first outputs from state 0."""
    rng = np.zeros(1, dtype=np.uint64)
    got = [int(seeding.rng_next(rng, 0)) for _ in range(3)]
    assert got == [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F]
    assert int(rng[0]) == 3 * seeding.GOLDEN % 2 ** 64
    assert seeding.rng_below(np.zeros(1, dtype=np.uint64), 0, 10) == 0xE220A8397B1DCDAF % 10
