"""The network parts (agents/nets/parts.py) and the fewest-moves table under them (sam_env/hand_moves.py).

The table is held to an independent brute-force split of random hands and to scripted hands; each part
(``moves``, ``history``, ``shape``, ``combined``) to the interface's contract: logits at the legal moves only,
the same numbers from dense, sparse and traced inputs, gradients through the sparse path, the blind-policy
guard, a checkpoint round trip and an ONNX export that agrees with PyTorch; the shipped move head
(``checkpoints/moves``, the default served bot) to its files, its export and its lineage.
"""

from __future__ import annotations

import json
import random
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from agents.nets.checkpoint import load_checkpoint, save_checkpoint  # noqa: E402
from agents.nets.export import TOLERANCE, Served, _check, _positions, export  # noqa: E402
from agents.nets.factory import NETWORKS, build_network  # noqa: E402
from agents.nets.format import SIZED_KINDS  # noqa: E402
from agents.nets.guards import check_blind_policy  # noqa: E402
from agents.nets.interface import MASK_LOGIT  # noqa: E402
from agents.nets.parts import MOVES_ONE_HOT, Hand, PartsNet  # noqa: E402
from agents.nets.sparse import SparseRows  # noqa: E402
from agents.players.onnx_agent import OnnxAgent  # noqa: E402
from agents.players.policy_agent import PolicyAgent  # noqa: E402
from agents.players.search import SearchAgent  # noqa: E402
from sam_env import hand_moves  # noqa: E402
from sam_env.actions import (ACT_COUNTS, ACT_KIND, ACT_LEN, ACT_RANK, ACTION_TABLE_VERSION,  # noqa: E402
                             K_DQUAD, K_STRAIGHT, NUM_ACTIONS, parse_move)
from sam_env.cards import NUM_RANKS, RANKS  # noqa: E402
from sam_env.game import Game  # noqa: E402
from sam_env.obs import FULL_EXTRA, OBS_SIZE, OBS_VERSION  # noqa: E402
from sam_env.rules import RuleSet  # noqa: E402
from sam_env.table import Table  # noqa: E402
from training.config_load import load_config  # noqa: E402

PARTS = ("moves", "history", "shape", "combined")
META = {"name": "parts", "rules": ["hoi_quan_bai"], "players": [4], "obs_version": OBS_VERSION,
        "action_table_version": ACTION_TABLE_VERSION}


def _counts(text: str) -> np.ndarray:
    c = np.zeros(NUM_RANKS, np.int64)
    for ch in text:
        c[RANKS.index(ch)] += 1
    return c


# ---- the fewest moves: an independent brute force ---------------------------------------------------------
def _brute(counts: tuple[int, ...], ace_low: bool) -> int:
    """The shortest split, by trying every group that holds a card of the lowest rank left."""
    moves = [a for a in range(NUM_ACTIONS) if ACT_KIND[a] in (K_STRAIGHT, K_DQUAD)
             and (ace_low or ACT_KIND[a] == K_DQUAD or ACT_RANK[a] - ACT_LEN[a] + 1 >= 3)]

    @lru_cache(maxsize=None)
    def best(c: tuple[int, ...]) -> int:
        if not any(c):
            return 0
        r = next(i for i, x in enumerate(c) if x)
        out = []
        for k in range(1, c[r] + 1):  # k cards of rank r as one group
            out.append(1 + best(c[:r] + (c[r] - k,) + c[r + 1:]))
        for a in moves:  # a straight or double quad that uses rank r
            used = ACT_COUNTS[a]
            if used[r] and all(u <= x for u, x in zip(used, c)):
                out.append(1 + best(tuple(x - u for x, u in zip(c, used))))
        return min(out)

    return best(tuple(int(x) for x in counts))


def _random_hands(n: int, seed: int) -> list[np.ndarray]:
    rng = random.Random(seed)
    deck = [r for r in range(NUM_RANKS) for _ in range(4)]
    hands = []
    for _ in range(n):
        c = np.zeros(NUM_RANKS, np.int64)
        for r in rng.sample(deck, rng.randint(0, hand_moves.MAX_CARDS)):
            c[r] += 1
        hands.append(c)
    return hands


@pytest.mark.parametrize("ace_low", [True, False])
def test_the_table_agrees_with_a_brute_force_split(ace_low: bool) -> None:
    for c in _random_hands(400, seed=7 + ace_low):
        assert hand_moves.min_moves(c, ace_low) == _brute(tuple(c), ace_low), (c, ace_low)


@pytest.mark.parametrize("hand, ace_low, moves", [
    ("", True, 0), ("3", True, 1), ("345", True, 1), ("334455", True, 2), ("A23", True, 1), ("A23", False, 3),
    ("KA2", True, 3), ("3456789TJQ", True, 1), ("33334444", True, 1), ("333344445", True, 2),
    ("2222", True, 1), ("345567", True, 2), ("3345566", True, 4), ("3344556", True, 2), ("JQKA2", True, 2),
    ("A2345", False, 3), ("A2345", True, 1),
])
def test_scripted_hands(hand: str, ace_low: bool, moves: int) -> None:
    assert hand_moves.min_moves(_counts(hand), ace_low) == moves


def test_every_hand_has_its_own_index() -> None:
    table = hand_moves.moves_table(True)
    assert table.shape == (hand_moves.TABLE_SIZE,) == (1_032_760,)
    # every entry was written: only the empty hand plays out in 0 moves, and none needs more than 10
    assert int((table == 0).sum()) == 1 and int(table.max()) <= hand_moves.MAX_CARDS
    hands = np.array(_random_hands(3000, seed=3))
    idx = hand_moves.hand_index(hands)
    keys = {tuple(h) for h in hands}
    assert len(set(idx.tolist())) == len(keys) and idx.max() < hand_moves.TABLE_SIZE
    with pytest.raises(ValueError, match="at most 10 cards"):
        hand_moves.hand_index(_counts("33334444555"))


# ---- the parts ---------------------------------------------------------------------------------------------
def _net(kind: str, critic: bool = True, seed: int = 0, scale: float = 0.0) -> PartsNet:
    torch.manual_seed(seed)
    net = build_network({"kind": kind, "obs_size": OBS_SIZE, "num_actions": NUM_ACTIONS, "hidden": 32,
                         "layers": 2, "critic_size": FULL_EXTRA if critic else 0, **_widths(kind)})
    if scale:  # trained-looking weights: no branch left at its initial zero
        with torch.no_grad():
            for p in net.parameters():
                p.add_(scale * torch.randn_like(p))
    return net


def _widths(kind: str) -> dict[str, int]:
    return {**({"move_width": 16} if kind in ("moves", "combined") else {}),
            **({"history_width": 8, "history_heads": 2} if kind in ("history", "combined") else {})}


@lru_cache(maxsize=1)
def _batch() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    obs, mask = _positions(Table(RuleSet.parse("hoi_quan_bai"), 4), 256, seed=5)
    hands = (torch.rand((256, FULL_EXTRA), generator=torch.Generator().manual_seed(1)) < 0.2).float()
    return torch.from_numpy(obs), torch.from_numpy(mask), hands


def test_the_registry_and_the_checkpoint_format_name_the_same_kinds() -> None:
    assert set(NETWORKS) == set(SIZED_KINDS)


@pytest.mark.parametrize("kind", PARTS)
def test_logits_at_the_legal_moves_only_and_the_same_from_every_input(kind: str) -> None:
    net = _net(kind, scale=0.05).eval()
    obs, mask, hands = _batch()
    with torch.no_grad():
        logits, value = net(obs, mask)
        assert logits.shape == (256, NUM_ACTIONS) and value.shape == (256,)
        assert torch.equal(logits == MASK_LOGIT, mask == 0) and torch.isfinite(logits).all()
        sparse_logits, sparse_value = net(SparseRows.from_dense(obs), mask)
        torch.testing.assert_close(sparse_logits, logits, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(sparse_value, value, rtol=1e-5, atol=1e-5)
        traced = torch.jit.trace(net, (obs[:4], mask[:4]), check_trace=False)  # the export's path
        traced_logits, _ = traced(obs, mask)
        torch.testing.assert_close(traced_logits, logits, rtol=1e-5, atol=1e-5)
        masked, v2, base = net.train_forward(obs, mask, hands)
        torch.testing.assert_close(masked, logits) and torch.testing.assert_close(v2, value)
        assert base.shape == (256,) and not torch.equal(base, value)
        # the search's rollout step: every move the hand can make is scored, the legal ones as forward scores
        full = net.policy_logits(obs)
        legal = mask > 0
        if net.use_moves:
            torch.testing.assert_close(full[legal], logits[legal], rtol=1e-5, atol=1e-5)
        assert (full[legal] > MASK_LOGIT).all()
        # given the legal moves (the search has them), the move head scores those alone, the same
        scored = net.policy_logits(obs, mask)
        torch.testing.assert_close(scored[legal], full[legal], rtol=1e-5, atol=1e-5)
        assert not net.use_moves or bool((scored[~legal] == MASK_LOGIT).all())


@pytest.mark.parametrize("kind", PARTS)
def test_the_sparse_path_gives_the_dense_gradients(kind: str) -> None:
    obs, mask, hands = _batch()
    grads = []
    for inp, hid in ((obs, hands), (SparseRows.from_dense(obs), SparseRows.from_dense(hands))):
        net = _net(kind, scale=0.05)
        logits, value, base = net.train_forward(inp, mask, hid)
        loss = (torch.log_softmax(logits, -1) * (mask > 0)).sum() + value.square().sum() + base.square().sum()
        loss.backward()
        grads.append({k: p.grad.clone() for k, p in net.named_parameters() if p.grad is not None})
    assert grads[0].keys() == grads[1].keys() and "inp.weight" in grads[0]
    for k in grads[0]:
        torch.testing.assert_close(grads[1][k], grads[0][k], rtol=1e-4, atol=1e-5, msg=k)


@pytest.mark.parametrize("kind", PARTS)
def test_each_part_passes_the_blind_policy_guard(kind: str) -> None:
    check_blind_policy(_net(kind, scale=0.1))


def test_a_moves_features_read_from_the_hand() -> None:
    """Hand 3 3 4 5 6 (ace-low straights): a single 3 breaks the pair, leaves 4 cards that go in one
    straight; the straight 3456 leaves one card; the pair leaves a straight of three."""
    net = _net("moves")
    counts = torch.from_numpy(_counts("33456")).float()
    acts = torch.tensor([parse_move("3"), parse_move("3456"), parse_move("33"), parse_move("pass")])
    ace_low = torch.ones(4, dtype=torch.bool)
    dyn = net.move_features(Hand(counts.expand(4, -1), ace_low, net.fewest_moves(counts, ace_low)), acts)
    left, after = dyn[:, :MOVES_ONE_HOT].argmax(-1), dyn[:, MOVES_ONE_HOT:2 * MOVES_ONE_HOT].argmax(-1)
    change, out, breaks = dyn[:, 2 * MOVES_ONE_HOT], dyn[:, 2 * MOVES_ONE_HOT + 1], dyn[:, -3:] * 2
    assert left.tolist() == [4, 1, 3, 5] and after.tolist() == [1, 1, 1, 2]
    torch.testing.assert_close(change * 3, torch.tensor([-1.0, -1.0, -1.0, 0.0]))
    assert out.tolist() == [0, 0, 0, 0]
    assert breaks.tolist() == [[1, 0, 0], [1, 0, 0], [0, 0, 0], [0, 0, 0]]


def test_the_network_looks_up_what_the_table_holds() -> None:
    net = _net("shape")
    hands = np.array(_random_hands(500, seed=11))
    for ace_low in (False, True):
        got = net.fewest_moves(torch.from_numpy(hands), torch.full((500,), ace_low))
        want = [hand_moves.min_moves(h, ace_low) for h in hands]
        assert got.tolist() == want


@pytest.mark.parametrize("kind", ["moves", "combined"])
def test_a_part_checkpoints_and_exports_with_onnx_parity(kind: str, tmp_path) -> None:
    pytest.importorskip("onnxruntime")
    net = _net(kind, scale=0.05)
    ckpt = save_checkpoint(tmp_path / kind, net, META)
    loaded, meta = load_checkpoint(ckpt)
    assert type(loaded) is type(net) and meta.model == net.hparams() and meta.model["kind"] == kind
    assert all(torch.equal(a, b) for a, b in zip(loaded.state_dict().values(), net.state_dict().values()))
    side = export(ckpt, tmp_path / "bot.onnx", samples=200)
    assert side["model"]["kind"] == kind and side["check"]["max_abs_diff"] < 1e-4
    # the server's loader takes it (its graph check allows the parts' operators) and plays legal moves
    agent = OnnxAgent(tmp_path / "bot.onnx")
    g = Game.new("hoi_quan_bai", 4, seed=2)
    while not g.finished:
        g.apply(agent.act(g, g.to_act))  # raises on an illegal move


def test_a_config_sizes_a_part_by_model_hidden_and_layers() -> None:
    cfg = load_config("quick", ["model.kind=combined", "model.hidden=64", "model.layers=3",
                                "model.kwargs.move_width=32"])
    hp = cfg.model.hparams()
    assert hp["kind"] == "combined" and (hp["hidden"], hp["layers"], hp["move_width"]) == (64, 3, 32)
    assert cfg.model.label() == "combined(64x3, move_width=32) critic=full"
    net = cfg.model.build()
    assert type(net).__name__ == "CombinedNet" and net.hidden == 64 and len(net.blocks) == 2


def test_the_search_plays_with_a_part() -> None:
    """The play-time search's rollouts (``policy_logits`` of the moves the hand can make) and leaves (the
    critic with sampled hands) run on a part as on the MLP."""
    net = _net("combined", scale=0.05).eval()
    agent = SearchAgent(PolicyAgent(net, name="combined"), candidates=3, worlds=4, horizon=1, critic=50)
    g = Game.new("hoi_quan_bai", 4, seed=9)
    for _ in range(8):
        g.apply(agent.act(g, g.to_act))  # raises on an illegal move
    assert len(g.events) >= 8


@pytest.mark.parametrize("kind", PARTS)
def test_a_run_of_a_part_resumes(tmp_path, capsys: pytest.CaptureFixture[str], kind: str) -> None:
    """A checkpoint records the built network's shape, its kind's default arguments too (``move_width``):
    ``--resume`` compares the config's shape the same way, so a run of a part resumes (it was refused)."""
    from samloc.commands.train import main
    from training.run.learner import Learner
    from training.run.runstate import RunState

    cfg = load_config("quick", [f"model.kind={kind}", "model.hidden=32", "model.layers=1",
                                "warm_start.decisions=0"])
    run = tmp_path / "run"
    state = RunState(cfg, run, "test", lambda line: None)
    state.write_run_files(False)
    state.save(Learner(cfg.model, cfg.learner, 1e-3), state.metadata(), {}, {})
    assert main(["--resume", str(run), "--more-minutes", "5", "--dry-run"]) == 0, capsys.readouterr().err
    assert "everything checks out" in capsys.readouterr().out


# ---- the shipped move head: checkpoints/moves, the default served bot ----------------------------------
SHIPPED_MOVES = Path(__file__).resolve().parents[1] / "checkpoints" / "moves"


def test_the_shipped_move_head_plays_as_its_export_and_passes_the_guard() -> None:
    """The default served bot is a ``moves`` network whose files verify (weights and export), that sees no
    hidden hand, and whose ONNX export scores real positions at every preset table as PyTorch does."""
    pytest.importorskip("onnxruntime")
    from agents.nets.format import verify
    meta = verify(SHIPPED_MOVES, served=True)
    net, _ = load_checkpoint(SHIPPED_MOVES)
    assert meta.model["kind"] == "moves" and isinstance(net, PartsNet) and len(meta.tables) == 14
    check_blind_policy(net)
    served = Served(net).eval()
    for i, table in enumerate(meta.tables):  # the export's own check, at every table the bot serves
        check = _check(served, SHIPPED_MOVES / "policy.onnx", table, 64, seed=i)
        assert max(check["positions"]["max_abs_diff_probs"], check["positions"]["max_abs_diff_value"]) \
            < TOLERANCE, (table, check)
        obs, mask = _positions(table, 8, seed=i)
        with torch.no_grad():
            probs = served(torch.from_numpy(obs), torch.from_numpy(mask))[0].numpy()
        assert (probs[mask == 0] == 0).all() and np.allclose(probs.sum(-1), 1.0, atol=1e-5)


def test_the_shipped_move_heads_lineage_names_every_command_that_made_it() -> None:
    """Its metadata: the run's own command and resumes, and each run it descends from by init_from."""
    raw = json.loads((SHIPPED_MOVES / "metadata.json").read_text())
    runs = [*raw["lineage"], {"command": raw["command"], "resumes": raw["resumes"]}]
    first = runs[0]["command"]
    assert first.startswith("samloc train --config strong") and "model.kind=moves" in first
    assert all(r["command"].startswith("samloc train ") for r in runs)
    assert all(r.startswith("samloc train --resume ") for run in runs for r in run["resumes"])
    assert raw["name"] == "moves" and raw["model"]["kind"] == "moves"
