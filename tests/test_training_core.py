"""Training building blocks without Ray: config, per-seat returns, the network, checkpoints, the agent."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from sam_env.actions import NUM_ACTIONS
from sam_env.game import Game
from sam_env.obs import OBS_SIZE
from sam_env.rules import RuleSet
from sam_env.table import Table
from agents.nets import checkpoint as ckpt
from agents.nets import format as ckfmt
from training.config import ConfigError, TrainConfig
from training.config_load import load_config
from agents.nets.policy import MASK_LOGIT, PolicyNet
from training.run import compact
from training.run.runlog import Board
from training.run.workers import waiting_reason
from training.algorithms.ppo import ppo_engine
from training.run.rollout import MAX_SEATS, compute_gae, record_step

torch.set_num_threads(1)
REPO = Path(__file__).resolve().parent.parent


def expanded(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A rollout's packed batch as the learner sees it (numpy, for the assertions)."""
    return {k: v.numpy() for k, v in compact.expand(compact.to_device(batch, torch.device("cpu"))).items()}


# ---- config -------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["quick", "standard", "cluster", "all_tables", "expert", "compare"])
def test_shipped_configs_load(name: str) -> None:
    cfg = load_config(REPO / "configs" / f"{name}.yaml")
    assert isinstance(cfg, TrainConfig) and cfg.name == name


def test_the_all_tables_config_plays_every_table_once() -> None:
    from training.config import table_weights, training_tables
    from training.run.rollout import slot_shares
    tables = training_tables(load_config(REPO / "configs" / "all_tables.yaml").env)
    assert sorted((t.rules.name, t.players) for t in tables) == sorted(
        (r, p) for r, top in (("hoi_quan_bai", 5), ("s666pg", 5), ("mien_bac", 4), ("online", 4))
        for p in range(2, top + 1))
    assert slot_shares(1400,
                       table_weights(load_config(REPO / "configs" / "all_tables.yaml").env)) == [100] * 14
    assert slot_shares(10, [1.0, 3.0]) == [3, 7] and slot_shares(3, [1.0, 1.0, 100.0]) == [1, 1, 1]


def test_overrides_apply_with_types() -> None:
    cfg = load_config("quick", ["ppo.lr=1e-4", "rollout.num_workers=2", "env.players=[3,4]"])
    assert cfg.section("ppo").lr == 1e-4 and cfg.rollout.num_workers == 2 and cfg.env.players == [3, 4]


@pytest.mark.parametrize("overrides, words", [
    (["ppo.lrr=1"], "lrr"),
    (["ppo.lr=fast"], "lr"),
    (["rollout.num_workers=0"], "num_workers"),
    (["env.rules=[nope]"], "nope"),
    (["env.players=[6]"], "players"),
    (["ppo.lr"], "key=value"),
    (["eval.opponents=[wizard]"], "wizard"),
    (["belief.deals=-5"], "belief.deals"),
    (["belief.epochs=0"], "belief.epochs"),
    (["env.tables=[{rules: mien_bac, players: [5]}]"],
     "players must be an integer from 2 to 4 under mien_bac"),
    (["env.tables=[{rules: {preset: online, chop_two: -1}, players: [3]}]"], "chop_two"),
    (["env.tables=[{rules: online, players: [3]}, {rules: online, players: [3, 4]}]"], "listed twice"),
    (["env.tables=[{rules: online, players: [3], weight: 0}]"], "weight must be positive"),
    # a house rule set that changes nothing is its preset's table
    (["env.tables=[{rules: online, players: [3]}, {rules: {preset: online, cong: 10}, players: [3]}]"],
     "env.tables: a table is listed twice"),
    (["env.rules=[mien_bac]", "eval.players=5"],
     "eval.players: players must be an integer from 2 to 4 under mien_bac"),
    # issue #60: a player count the rules forbid names the players key, not env.rules
    (["env.rules=mien_bac", "env.players=5"],
     "env.players: players must be an integer from 2 to 4 under mien_bac"),
    (["env.tables=[{rules: online, players: [3]}, {rules: mien_bac, players: [3, 5]}]"],
     "env.tables[1].players: players must be an integer from 2 to 4 under mien_bac"),
    (["eval.rules=mien_bac", "env.players=[5]"],
     "eval.rules: players must be an integer from 2 to 4 under mien_bac"),
    (["eval.rules=nowhere"], "eval.rules: unknown preset 'nowhere'"),
    (["init_from=nowhere"], "init_from"),
    (["seed=99999999999999999999999"], "seed"),
    (["rollout.num_workers=100000"], "num_workers"),
    (["rollout.envs_per_worker=1e9"], "envs_per_worker"),
    (["rollout.envs_per_worker=1000000000"], "envs_per_worker"),
    (["ppo.lr=1e999"], "ppo.lr"),
    (["ppo.batch_decisions=100000000"], "batch_decisions"),
    (["learner.device=tpu"], "learner.device"),
    (["learner.precision=fp8"], "learner.precision"),
])
def test_bad_configs_are_refused_in_one_line(overrides: list[str], words: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config("quick", overrides)
    msg = str(err.value)
    assert words in msg and "\n" not in msg


@pytest.mark.slow
def test_a_config_that_is_a_yaml_list_is_refused_in_one_line(tmp_path: Path) -> None:
    f = tmp_path / "list.yaml"
    f.write_text("- name: quick\n- seed: 1\n")
    r = subprocess.run([sys.executable, "-m", "samloc", "train", "--config", str(f)],
                       capture_output=True, text=True, cwd=REPO, timeout=60)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "not a list" in r.stderr, r.stderr


@pytest.mark.slow
def test_cli_usage_error_exit_2() -> None:
    r = subprocess.run([sys.executable, "-m", "samloc", "train", "--config", "quick", "ppo.clip=-1"],
                       capture_output=True, text=True, cwd=REPO, timeout=60)
    assert r.returncode == 2
    assert r.stderr.strip().startswith("samloc train:") and len(r.stderr.strip().splitlines()) == 1


# ---- per-seat trajectories: an independent brute force -----------------------------------------------
def _brute_returns(seat, learner, rewards, done, boot_of, scale, gamma):
    """Discounted return of every learner decision, by walking forward through the raw steps."""
    T, N = seat.shape
    ret = np.zeros((T, N))
    for e in range(N):
        for t in range(T):
            if not learner[t, e]:
                continue
            s = seat[t, e]
            total, disc, k = 0.0, 1.0, t
            while True:
                total += disc * rewards[k, e, s] / scale
                if done[k, e]:
                    break
                k += 1
                if k == T:  # still open: bootstrap
                    total += disc * gamma * boot_of(e, s)
                    break
                if learner[k, e] and seat[k, e] == s:  # the seat's next decision: discount once more
                    disc *= gamma
            ret[t, e] = total
    return ret


@pytest.mark.parametrize("gamma", [1.0, 0.9])
def test_per_seat_returns_match_brute_force(gamma: float) -> None:
    rng = np.random.default_rng(5)
    T, N, scale = 40, 6, 20.0
    seat = rng.integers(0, 4, (T, N))
    learner = rng.random((T, N)) < 0.8
    rewards = np.where(rng.random((T, N, MAX_SEATS)) < 0.2, rng.integers(-30, 30, (T, N, MAX_SEATS)), 0)
    rewards = rewards.astype(np.float32)
    done = rng.random((T, N)) < 0.1
    val = rng.normal(size=(T, N)).astype(np.float32)
    pend = np.full((N, MAX_SEATS), -1, dtype=np.int64)
    nxt = np.full((T, N), -1, dtype=np.int64)
    term = np.zeros((T, N), dtype=np.uint8)
    rew = np.zeros((T, N), dtype=np.float32)
    for t in range(T):
        record_step(t, seat[t], learner[t], rewards[t], done[t], np.float32(scale), pend, nxt, term, rew)
    boot_table = rng.normal(size=(N, MAX_SEATS)).astype(np.float32)
    boot = np.zeros((T, N), dtype=np.float32)
    for e, s in zip(*np.nonzero(pend >= 0)):
        boot[pend[e, s], e] = boot_table[e, s]
    adv = np.zeros((T, N), dtype=np.float32)
    # lambda = 1: advantage + value is the plain discounted return
    compute_gae(val, rew, nxt, term, boot, learner, np.float32(gamma), np.float32(1.0), adv)
    want = _brute_returns(seat, learner, rewards, done, lambda e, s: boot_table[e, s], scale, gamma)
    np.testing.assert_allclose((adv + val)[learner], want[learner], rtol=1e-4, atol=1e-4)
    # lambda = 0: one-step TD error against the seat's next value
    compute_gae(val, rew, nxt, term, boot, learner, np.float32(gamma), np.float32(0.0), adv)
    for t, e in zip(*np.nonzero(learner)):
        nv = 0.0 if term[t, e] else (val[nxt[t, e], e] if nxt[t, e] >= 0 else boot[t, e])
        assert adv[t, e] == pytest.approx(rew[t, e] + gamma * nv - val[t, e], abs=1e-5)


def test_rollout_credits_every_final_score() -> None:
    """With gamma = lambda = 1 and pure self-play, the returns of each game's first decisions
    are exactly the seats' final scores (zero-sum over a game)."""
    cfg = load_config("quick", ["rollout.envs_per_worker=16", "rollout.steps_per_rollout=64",
                                "rollout.opponent_fraction=0", "ppo.gamma=1.0", "ppo.gae_lambda=1.0"])
    eng = ppo_engine(cfg, 0, seed=3)
    res = eng.rollout()
    st, out = res["stats"], expanded(res["batch"])
    assert st["decisions"] == 16 * 64 == st["learner_decisions"] == len(out["act"])
    assert st["games"] > 10
    assert np.isfinite(out["adv"]).all() and np.isfinite(out["ret"]).all()
    # every sampled action was legal
    assert (out["mask"][np.arange(len(out["act"])), out["act"]] == 1).all()


# ---- the network -----------------------------------------------------------------------------
def test_masking_gives_illegal_actions_zero_probability() -> None:
    net = PolicyNet(OBS_SIZE, hidden=32, layers=2)
    obs = torch.randn(64, OBS_SIZE)
    mask = (torch.rand(64, NUM_ACTIONS) < 0.05).to(torch.int8)
    mask[:, 0] = 1
    with torch.no_grad():
        logits, value = net(obs, mask)
    assert value.shape == (64,) and logits.shape == (64, NUM_ACTIONS)
    assert torch.isfinite(logits).all()
    assert (logits[mask == 0] == MASK_LOGIT).all()
    p = torch.softmax(logits, -1)
    assert float(p[mask == 0].max()) == 0.0
    assert torch.allclose(p.sum(-1), torch.ones(64))


# ---- checkpoints -----------------------------------------------------------------------------
def _save(tmp: Path, step: int, net: PolicyNet) -> Path:
    return ckpt.save_checkpoint(tmp / "checkpoints" / f"ckpt_{step:08d}", net, {"updates": step},
                                {"t": torch.arange(4.0)}, {"counters": {"updates": step}})


def test_checkpoint_roundtrip_and_corruption(tmp_path: Path) -> None:
    torch.manual_seed(0)
    a, b = PolicyNet(OBS_SIZE, hidden=16, layers=2), PolicyNet(OBS_SIZE, hidden=16, layers=2)
    _save(tmp_path, 1, a)
    p2 = _save(tmp_path, 2, b)
    assert not [p for p in (tmp_path / "checkpoints").iterdir() if ".tmp" in p.name]
    net, meta = ckpt.load_checkpoint(tmp_path)  # a run folder → its newest checkpoint
    assert meta.updates == 2
    for k, v in b.state_dict().items():
        assert torch.equal(net.state_dict()[k], v)
    # truncate the newest weights: refused with a clear error, the previous one is used
    f = p2 / ckfmt.MODEL_FILE
    f.write_bytes(f.read_bytes()[:100])
    with pytest.raises(ckfmt.CheckpointError, match="truncated or corrupt"):
        ckpt.load_checkpoint(p2)
    warnings: list[str] = []
    good = ckfmt.latest_good(tmp_path, trainer=True, warn=warnings.append)
    assert good.name == "ckpt_00000001" and len(warnings) == 1 and "ckpt_00000002" in warnings[0]
    (good / ckfmt.META_FILE).write_text("{not json")
    with pytest.raises(ckfmt.CheckpointError, match="no usable checkpoint"):
        ckfmt.latest_good(tmp_path)


def test_policy_agent_plays_legal_moves_from_a_checkpoint(tmp_path: Path) -> None:
    from agents import make_agent
    from agents.evaluation.evaluate import evaluate
    from agents.players.policy_agent import load_policy_agent

    net = PolicyNet(OBS_SIZE, hidden=16, layers=2)
    p = ckpt.save_checkpoint(tmp_path / "c", net, {"obs_version": 1, "name": "tiny"})
    agent = load_policy_agent(p)
    assert make_agent(str(p)).name == "tiny"
    for seed in range(5):
        g = Game.new("hoi_quan_bai", 4, seed=seed)
        while g.result is None:
            a = agent.act(g, g.to_act)
            assert a in g.legal_actions()
            g.apply(a)
    res = evaluate(agent, "random", Table(RuleSet.preset("hoi_quan_bai"), 4), deals=20, seed=1)
    assert res["zero_sum"] and res["games"] == 80
    bad = ckpt.save_checkpoint(tmp_path / "old", net, {"obs_version": 999})
    with pytest.raises(ValueError, match="obs_version"):
        load_policy_agent(bad)
    assert json.loads((p / ckfmt.META_FILE).read_text())["model"]["hidden"] == 16


# ---- the perfect-information critic and the Sâm lesson -------------------------------------------
def test_hidden_hands_vector_is_the_tail_of_the_full_vector() -> None:
    from sam_env.obs import FULL_EXTRA, encode_full, encode_hidden_batch

    for seed in range(20):
        g = Game.new("hoi_quan_bai", 2 + seed % 4, seed=seed)
        rng = np.random.default_rng(seed)
        for _ in range(rng.integers(0, 12)):
            if g.result is not None:
                break
            g.apply(int(rng.choice(g.legal_actions())))
        for seat in range(g.players):
            out = np.zeros((1, FULL_EXTRA), dtype=np.uint8)
            encode_hidden_batch(g.state[None, :], np.array([seat]), out)
            np.testing.assert_array_equal(out[0], encode_full(g, seat)[OBS_SIZE:])


def test_the_critic_never_moves_the_policy() -> None:
    """Hidden hands change the training baseline, never the logits or the exported value."""
    from agents.nets.factory import build_network
    from agents.nets.policy import build_net

    torch.manual_seed(0)
    net = build_net(32, 2, "full")
    obs = torch.randn(8, OBS_SIZE)
    mask = torch.ones(8, NUM_ACTIONS, dtype=torch.int8)
    h1, h2 = torch.zeros(8, net.critic_size), torch.ones(8, net.critic_size)
    with torch.no_grad():
        l1, v1, b1 = net.train_forward(obs, mask, h1)
        l2, v2, b2 = net.train_forward(obs, mask, h2)
        lf, vf = net(obs, mask)
    assert torch.equal(l1, l2) and torch.equal(l1, lf) and torch.equal(v1, vf)
    assert not torch.allclose(b1, b2)
    assert build_network(net.hparams()).critic_size == net.critic_size
    old = {k: v for k, v in net.hparams().items() if k not in ("critic_size", "kind")}  # before the critic
    assert build_network(old).critic is None


def test_rollout_asks_the_heuristic_at_sam_decisions_only() -> None:
    from agents.players.heuristic import HeuristicAgent
    from sam_env.actions import NO_SAM, SAM

    cfg = load_config("quick", ["rollout.envs_per_worker=64", "rollout.steps_per_rollout=24",
                                "rollout.opponent_fraction=0", "ppo.sam_lesson_coef=1.0"])
    out = expanded(ppo_engine(cfg, 0, seed=5).rollout()["batch"])
    teach, mask = out["teach"], out["mask"]
    sam_phase = mask[:, SAM] > 0
    assert (teach[sam_phase] >= 0).all()
    assert set(np.unique(teach[sam_phase])) <= {SAM, NO_SAM}
    asked = teach >= 0
    assert (mask[np.flatnonzero(asked), teach[asked]] == 1).all()  # a legal lesson
    assert out["hid"].shape == (len(out["act"]), 260) and out["hid"].dtype == np.uint8
    # the teacher answers a fresh deal's Sâm question with one of the two Sâm actions
    g = Game.new("hoi_quan_bai", 4, seed=11)
    h = HeuristicAgent(seed=0)
    assert h.act(g, g.to_act) in (SAM, NO_SAM)
    off = expanded(ppo_engine(load_config("quick", ["rollout.envs_per_worker=8",
                                                    "rollout.steps_per_rollout=8",
                                                    "ppo.sam_lesson_coef=0"]), 0, seed=5).rollout()["batch"])
    assert (off["teach"] == -1).all()


def test_the_sam_lesson_pulls_the_policy_towards_the_teacher() -> None:
    from sam_env.actions import NO_SAM, SAM
    from training.run.learner import Learner
    from training.algorithms.ppo import ppo_update

    torch.manual_seed(0)
    cfg = load_config("quick", ["ppo.sam_lesson_coef=1.0", "ppo.minibatch=256", "ppo.epochs=4", "ppo.lr=1e-3",
                                "model.hidden=32", "model.layers=2", "model.critic=full"])
    learner = Learner(cfg.model, cfg.learner, cfg.section("ppo").lr)
    net = learner.net
    n = 256
    rng = np.random.default_rng(0)
    mask = np.zeros((n, NUM_ACTIONS), dtype=np.int8)
    mask[:, [SAM, NO_SAM]] = 1
    batch = {"obs": rng.standard_normal((n, OBS_SIZE)).astype(np.float32), "mask": mask,
             "act": np.full(n, NO_SAM), "logp": np.full(n, np.log(0.5), dtype=np.float32),
             "val": np.zeros(n, np.float32), "adv": np.zeros(n, np.float32), "ret": np.zeros(n, np.float32),
             "hid": np.zeros((n, net.critic_size), np.uint8), "teach": np.full(n, SAM, np.int16),
             "lag": np.zeros(n, np.int64)}
    batch = {k: torch.from_numpy(v) for k, v in batch.items()}
    obs, m = batch["obs"], batch["mask"]

    def p_sam() -> float:
        with torch.no_grad():
            return float(torch.softmax(net(obs, m)[0], -1)[:, SAM].mean())

    before = p_sam()
    for _ in range(20):
        pp = cfg.section("ppo")
        losses = ppo_update(net, lambda loss: learner.step(loss, pp.max_grad_norm), batch, pp, cfg.learner,
                            torch.Generator().manual_seed(0))
    assert before < 0.1 and p_sam() > 0.5 and losses["sam_lesson"] > 0


# ---- the learner: devices, checkpoints, the queue between workers and learner ----------------------------
@pytest.mark.slow
def test_cuda_is_refused_in_one_line_without_it() -> None:
    from training.run.learner import DeviceError, resolve_device

    assert resolve_device("cpu") == torch.device("cpu")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    assert resolve_device("auto") == torch.device("cpu")
    for spec in ("cuda", "cuda:1"):
        with pytest.raises(DeviceError, match="no CUDA") as err:
            resolve_device(spec)
        assert "\n" not in str(err.value)
    r = subprocess.run([sys.executable, "-m", "samloc", "bench", "--learner", "--device", "cuda", "--json"],
                       capture_output=True, text=True, cwd=REPO, timeout=120)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "learner.device=cuda" in r.stderr, r.stderr


def _recorded(cfg: TrainConfig, seed: int = 0) -> dict[str, np.ndarray]:
    return ppo_engine(cfg, 0, seed).rollout()["batch"]


def test_checkpoints_are_device_independent(tmp_path: Path) -> None:
    """The optimizer state is written as CPU tensors, and a restored learner moves it with the network
    (to the "meta" device here: any device but the CPU takes the same path as CUDA)."""
    from training.algorithms.ppo import update
    from training.run.learner import Learner

    cfg = load_config("quick", ["warm_start.decisions=0", "model.hidden=32", "rollout.envs_per_worker=32",
                                "rollout.steps_per_rollout=8",
                                "ppo.minibatch=64", "ppo.epochs=1"])
    batch = _recorded(cfg)
    torch.manual_seed(0)
    a = Learner(cfg.model, cfg.learner, cfg.section("ppo").lr)
    update(a, cfg.section("ppo"), [batch], [0], torch.Generator().manual_seed(1))
    st = a.state()
    tensors = {f"opt.{i}.{k}": v for i, s in st["state"].items() for k, v in s.items()}
    p = ckpt.save_checkpoint(tmp_path / "c", a.net, {"updates": 1}, tensors,
                             {"param_groups": st["param_groups"]})
    loaded, state = ckpt.load_trainer_state(p)
    assert all(v.device.type == "cpu" for v in loaded.values())

    def restored() -> Learner:
        b = Learner(cfg.model, cfg.learner, cfg.section("ppo").lr)
        b.net.load_state_dict(ckpt.load_checkpoint(p)[0].state_dict())
        opt: dict = {"state": {}, "param_groups": state["param_groups"]}
        for key, v in loaded.items():
            _, i, k = key.split(".", 2)
            opt["state"].setdefault(int(i), {})[k] = v
        b.opt.load_state_dict(opt)
        return b

    moved = restored()
    moved.to(torch.device("meta"))
    assert all(q.device.type == "meta" for q in moved.net.parameters())
    moments = [v for s in moved.opt.state.values() for k, v in s.items() if k != "step"]
    assert moments and all(v.device.type == "meta" for v in moments)
    b = restored()
    b.to(torch.device("cpu"))
    la = update(a, cfg.section("ppo"), [batch], [0], torch.Generator().manual_seed(2))
    lb = update(b, cfg.section("ppo"), [batch], [0], torch.Generator().manual_seed(2))
    assert la == lb  # the resumed learner continues exactly


def test_the_queue_bounds_the_policy_lag_and_counts_what_it_drops() -> None:
    from training.run.scheduler import RolloutQueue

    def roll(version: int, n: int = 10) -> dict:
        return {"version": version, "batch": {"act": np.zeros(n)}}

    q = RolloutQueue(max_lag=2)
    for v in (0, 1, 2, 3):
        q.put(roll(v))
    assert q.take(updates=2, decisions=45) == ([], 0)   # 40 decisions held, none too old
    got, dropped = q.take(updates=4, decisions=15)       # versions 0 and 1 lag 4 and 3 updates: dropped
    assert dropped == 2 and [r["version"] for r in got] == [2, 3] and len(q) == 0  # the rest, all of it
    q.put(roll(4, n=10))
    assert q.take(updates=4, decisions=15) == ([], 0) and len(q) == 1  # not a batch yet: it waits
    q.put(roll(5, n=10))
    got, dropped = q.take(updates=5, decisions=15)
    assert dropped == 0 and [r["version"] for r in got] == [4, 5]


def test_stale_rows_are_learned_with_truncated_importance_weights() -> None:
    """Rows at least correct_from_lag old are weighted by min(rho_bar, proximal / behaviour); younger rows,
    and every row when none is that old, give plain PPO."""
    from training.algorithms.ppo import update
    from training.run.learner import Learner

    cfg = load_config("quick", ["warm_start.decisions=0", "model.hidden=32", "rollout.envs_per_worker=32",
                                "rollout.steps_per_rollout=8",
                                "ppo.minibatch=64", "ppo.epochs=1", "ppo.correct_from_lag=3",
                                "ppo.is_clip=1.0"])
    batch = _recorded(cfg)
    batch["logp"] = batch["logp"] - 1.0  # a behaviour policy far from the learner's
    runs = {}
    for lag in (0, 2, 3):
        torch.manual_seed(0)
        runs[lag] = update(Learner(cfg.model, cfg.learner, cfg.section("ppo").lr), cfg.section("ppo"),
                           [batch], [lag], torch.Generator().manual_seed(1))
    assert runs[0] == runs[2] and runs[0]["stale_fraction"] == 0 and runs[0]["is_weight"] == 1
    stale = runs[3]
    assert stale["stale_fraction"] == 1 and stale["is_weight"] == pytest.approx(1.0)  # e^+1 truncated at 1
    assert stale["approx_kl"] < runs[0]["approx_kl"]  # the clip is centred on the learner's own policy


def test_the_ppo_loss_is_the_clipped_objective_written_out() -> None:
    """One step over the whole batch: the update's figures are those of the loss written out here from
    its definition (docs/training.md): fresh rows with the plain ratio against the behaviour policy and
    its clip, stale rows centred on the learner's own policy and weighted by the truncated importance
    weight, the value loss of both heads, the entropy over the legal moves, the Sâm lesson."""
    from training.algorithms.ppo import update
    from training.run.learner import Learner

    cfg = load_config("quick", ["warm_start.decisions=0", "model.hidden=32", "model.critic=full",
                                "rollout.envs_per_worker=32", "rollout.steps_per_rollout=8",
                                "ppo.minibatch=100000",
                                "ppo.epochs=1", "ppo.correct_from_lag=2", "ppo.is_clip=1.3", "ppo.clip=0.2"])
    batch = _recorded(cfg)
    batch["logp"] = batch["logp"] - 0.3  # the behaviour policy: ratios of e^0.3 on fresh rows, past the clip
    s = cfg.section("ppo")
    torch.manual_seed(0)
    learner = Learner(cfg.model, cfg.learner, s.lr)
    data = learner.batch([batch, batch], [3, 0])  # the first copy stale, the second fresh
    with torch.no_grad():
        logits, value, base = learner.net.train_forward(data["obs"], data["mask"], data["hid"])
        logp_all = torch.log_softmax(logits, -1)
        logp = logp_all.gather(1, data["act"][:, None]).squeeze(-1)
        stale = data["lag"] >= 2
        prox = torch.where(stale, logp, data["logp"])
        weight = (prox - data["logp"]).exp().clamp(max=1.3)
        ratio = (logp - prox).exp()
        adv = (data["adv"] - data["adv"].mean()) / (data["adv"].std() + 1e-8)
        policy = -(weight * torch.min(ratio * adv, ratio.clamp(0.8, 1.2) * adv)).mean()
        value_loss = 0.5 * (value - data["ret"]).pow(2).mean() + 0.5 * (base - data["ret"]).pow(2).mean()
        entropy = -(logp_all.exp() * logp_all.masked_fill(data["mask"] <= 0, 0)).sum(-1).mean()
        asked = data["teach"] >= 0
        lesson = -logp_all[asked].gather(1, data["teach"][asked].long()[:, None]).mean()
    out = update(learner, s, [batch, batch], [3, 0], torch.Generator().manual_seed(1))
    assert bool(asked.any()) and float(((ratio - 1).abs() > 0.2).float().mean()) == pytest.approx(0.5)
    expect = {"policy": policy, "value": value_loss, "entropy": entropy, "sam_lesson": lesson,
              "clipfrac": ((ratio - 1).abs() > 0.2).float().mean(),
              "approx_kl": ((ratio - 1) - ratio.log()).mean(),
              "is_weight": weight.mean(), "stale_fraction": 0.5}
    assert {k: out[k] for k in expect} == pytest.approx({k: float(v) for k, v in expect.items()},
                                                        rel=1e-5, abs=1e-7)

def test_explained_variance_and_the_gradient_norm_of_an_update() -> None:
    from training.algorithms.ppo import update
    from training.run.learner import Learner
    from training.algorithms.losses import explained_variance

    ret = torch.tensor([1.0, -2.0, 0.5, 3.0])
    assert explained_variance(ret, ret) == 1.0
    assert explained_variance(torch.full_like(ret, ret.mean()), ret) == pytest.approx(0.0)
    assert np.isnan(explained_variance(ret, torch.ones(4)))  # returns without variance: nothing to explain
    cfg = load_config("quick", ["warm_start.decisions=0", "model.hidden=32", "rollout.envs_per_worker=32",
                                "rollout.steps_per_rollout=8",
                                "ppo.minibatch=64", "ppo.epochs=1"])
    batch = _recorded(cfg)
    out = update(Learner(cfg.model, cfg.learner, cfg.section("ppo").lr), cfg.section("ppo"), [batch], [0],
                 torch.Generator().manual_seed(1))
    assert out["grad_norm"] > 0 and np.isfinite(out["grad_norm"])
    v, r = batch["val"], batch["adv"] + batch["val"]
    assert out["explained_variance"] == pytest.approx(1 - np.var(r - v) / np.var(r), rel=1e-4)


@pytest.mark.slow
def test_a_run_started_from_a_checkpoint_records_the_runs_it_descends_from(tmp_path: Path) -> None:
    """init_from keeps the ancestry's commands and wall times (a stage trained over several runs, each from
    the last one's shipped bot), oldest first; a resume keeps it; a malformed one is refused in one line."""
    from training.errors import TrainError
    from training.launch import new_loop
    tiny = ["model.hidden=16", "model.layers=1", "warm_start.decisions=0"]
    paths = []
    for gen in range(3):
        over = tiny + ([f"init_from={paths[-1]}"] if paths else [])
        tr = new_loop(load_config("quick", over), tmp_path / f"run{gen}", command=f"samloc train gen{gen}",
                     log=lambda m: None)
        tr.counters.wall_s, tr.counters.updates = 100.0 * (gen + 1), gen + 1
        paths.append(tr.save())
    meta = ckfmt.read_metadata(paths[2])
    lineage = meta.raw["lineage"]
    assert [e["command"] for e in lineage] == ["samloc train gen0", "samloc train gen1"]
    assert [e["wall_time_s"] for e in lineage] == [100.0, 200.0] and [e["updates"] for e in lineage] == [1, 2]
    assert lineage[0]["init_from"] == "" and lineage[1]["init_from"] == str(paths[0])
    assert lineage[1]["checkpoint"] == str(paths[1]) and meta.wall_time_s == 300.0
    resumed = new_loop(load_config("quick", tiny), tmp_path / "run2", resume=True,
                      command="samloc train --resume", log=lambda m: None)
    assert resumed.metadata()["lineage"] == lineage and resumed.state.resumes == ["samloc train --resume"]
    bad = json.loads((paths[2] / ckfmt.META_FILE).read_text())
    bad["lineage"] = "gen0, gen1"
    # a consistent edit: the later check
    (paths[2] / ckfmt.META_FILE).write_text(json.dumps(ckfmt.sealed(bad)))
    with pytest.raises(TrainError, match="lineage is not a list"):
        new_loop(load_config("quick", tiny + [f"init_from={paths[2]}"]), tmp_path / "run3",
                 log=lambda m: None)


@pytest.mark.parametrize("mean, ci, words", [
    (0.52, (0.21, 0.83), "beats the heuristic (+0.52 lá/game, 95% CI +0.21 … +0.83)"),
    (0.20, (-0.10, 0.50), "is ahead of the heuristic, but not beyond the evaluation's CI"),
    (-0.05, (-0.35, 0.25), "is level with the heuristic within the evaluation's CI"),
    (-0.40, (-0.70, -0.10), "loses to the heuristic"),
])
def test_the_final_evaluation_ends_with_a_verdict_against_the_heuristic(mean: float,
                                                                        ci: tuple, words: str) -> None:
    from training.tools.pipeline import final_lines

    row = {"mean_score": mean, "ci95": list(ci), "win_rate": 0.25, "sam_declared": 0, "sam_success_rate": 0.0}
    lines = final_lines(Table.default(), 1000,
                        {"results": {"random": row | {"mean_score": 9.0}, "heuristic": row}})
    assert lines[-1].startswith("verdict: the policy ") and words in lines[-1]
    assert not any(ln.startswith("verdict") for ln in final_lines(Table.default(), 1000,
                                                                  {"results": {"random": row}}))


def test_a_slow_worker_start_is_not_blamed_on_cpus_the_starting_workers_hold() -> None:
    """Two one-CPU workers on a two-CPU Ray hold both CPUs while their processes start: no shortage."""
    assert waiting_reason(2, 2) == "their processes are starting; Ray has the 2 CPUs they ask for"
    assert waiting_reason(2, 3) == "Ray has 2 CPUs in all, the workers ask for 3"


def test_the_board_writes_cleanrls_tags_beside_the_trainers_own(tmp_path: Path) -> None:
    """A dashboard made for CleanRL reads a run: its loss names beside ours, charts/SPS, and the episode
    figures (the learning seat's lá per game, decisions per game)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # as the other tests

    state = SimpleNamespace(run_dir=tmp_path, resumed_from=None, counters=SimpleNamespace(updates=1))
    board = Board(load_config("quick"), state, 0)
    board.scalar("losses/policy", -0.5, 100)
    board.scalar("losses/value", 2.0, 100)
    board.scalar("losses/approx_kl", 0.01, 100)
    board.episodes({"games": 4, "return_sum": -6.0, "decisions": 160}, 100)
    board.writer.close()
    acc = EventAccumulator(str(tmp_path), size_guidance={"scalars": 0})
    acc.Reload()
    got = {t: [e.value for e in acc.Scalars(t)] for t in acc.Tags()["scalars"]}
    assert got["losses/policy_loss"] == got["losses/policy"] == [-0.5]
    assert got["losses/value_loss"] == got["losses/value"] == [2.0]
    assert got["charts/episodic_return"] == [-1.5] and got["charts/episodic_length"] == [40.0]


def test_weights_no_longer_finite_are_not_checkpointed_and_the_last_good_one_stays(tmp_path: Path) -> None:
    """A diverged network stops the run at its next checkpoint, in one line naming the last good one
    (a NaN checkpoint would be the newest, and --resume would take it)."""
    from training.errors import TrainError
    from training.run.learner import Learner
    from training.run.runstate import RunState

    cfg = load_config("quick", ["warm_start.decisions=0", "model.hidden=16", "model.layers=1"])
    state = RunState(cfg, tmp_path / "run", "test", print)
    learner = Learner(cfg.model, cfg.learner, cfg.section("ppo").lr)
    state.counters.updates = 3
    first = state.save(learner, state.metadata(), {}, {})
    with torch.no_grad():
        next(learner.net.parameters()).view(-1)[5] = float("nan")
    state.counters.updates = 1234
    with pytest.raises(TrainError) as err:
        state.save(learner, state.metadata(), {}, {})
    assert str(err.value) == ("update 1,234: the network's weights are no longer finite (training diverged);"
                              f" checkpoint ckpt_00001234 not written, the last good one stays: {first}"
                              " (resume from it with a lower learning rate)")
    assert ckfmt.list_checkpoints(tmp_path / "run") == [first]
