"""Guards on what a network sees: a network whose acting logits read the hidden hands (the critic's
input alone) is refused in one line, naming its kind, when it is built for training; the MLP and a
user's network that keeps the hands in its critic pass.  Two cheats that pass a fresh network's probe (a
branch initialised to zero; a module global the critic call sets) are caught once trained: at every
load (resume, init_from, eval, serve, export), at --dry-run, and every learner.guard_every updates."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from agents.nets.checkpoint import load_checkpoint  # noqa: E402
from agents.nets.factory import NetworkError, build_network  # noqa: E402
from agents.nets.format import CheckpointError, list_checkpoints  # noqa: E402
from agents.nets.guards import BlindPolicyError, check_blind_policy  # noqa: E402
from agents.players.policy_agent import load_policy_agent  # noqa: E402
from samloc.commands import eval as eval_cmd, export as export_cmd, train  # noqa: E402
from sam_env.actions import NUM_ACTIONS  # noqa: E402
from sam_env.obs import FULL_EXTRA, OBS_SIZE  # noqa: E402
from tests.custom_net import GlobalPeekNet, PeekingNet, TinyNet, ZeroPeekNet  # noqa: E402
from training.config_load import load_config  # noqa: E402
from training.errors import TrainError  # noqa: E402
from training.run.learner import Learner  # noqa: E402
from training.launch import new_loop  # noqa: E402
from training.run.runstate import RunState  # noqa: E402

PEEK = "tests.custom_net:PeekingNet"
REFUSAL = (f"model.kind={PEEK}: its acting logits change with the hidden hands (by up to ")


def test_the_mlp_and_a_network_that_keeps_the_hands_in_its_critic_pass() -> None:
    for hp in ({"kind": "mlp", "obs_size": OBS_SIZE, "num_actions": NUM_ACTIONS, "hidden": 32, "layers": 2,
                "critic_size": FULL_EXTRA},
               {"kind": "tests.custom_net:TinyNet", "obs_size": OBS_SIZE, "num_actions": NUM_ACTIONS,
                "critic_size": FULL_EXTRA, "width": 8}):
        net = build_network(hp).train()
        state = torch.random.get_rng_state()
        check_blind_policy(net)
        assert torch.equal(torch.random.get_rng_state(), state)  # the probe draws from its own generator
        assert net.training  # left as it was
    default = load_config("quick", ["model.hidden=32"])
    Learner(default.model, default.learner, 1e-3)  # the default network, built for training


def test_a_network_whose_policy_reads_the_hidden_hands_is_refused_naming_its_kind() -> None:
    net = PeekingNet(OBS_SIZE, NUM_ACTIONS, FULL_EXTRA, width=8)
    with pytest.raises(NetworkError) as err:
        check_blind_policy(net)
    assert str(err.value).startswith(REFUSAL) and "\n" not in str(err.value)
    # the same weights without the peek are accepted: the probe sees the hands' effect, nothing else
    with torch.no_grad():
        net.peek.weight.zero_()
        net.peek.bias.zero_()
    check_blind_policy(net)
    with pytest.raises(NetworkError, match="its acting logits change with the hidden hands"):
        peek = load_config("quick", [f"model.kind={PEEK}", "model.kwargs.width=8"])
        Learner(peek.model, peek.learner, 1e-3)
    check_blind_policy(TinyNet(OBS_SIZE, NUM_ACTIONS, 0, width=8))  # no critic: no hands to read


def test_samloc_train_refuses_it_in_one_line_before_ray_starts(tmp_path: Path, capsys) -> None:
    code = train.main(["--config", "quick", "--run-dir", str(tmp_path / "run"), f"model.kind={PEEK}",
                       "model.kwargs.width=8", "display=none"])
    err = capsys.readouterr().err
    assert code == 1 and err.startswith(f"samloc train: {REFUSAL}") and err.count("\n") == 1, err
    assert not (tmp_path / "run" / "checkpoints").exists()


# ---- cheats that pass a fresh network's probe, caught once they have learned to peek -----------------------
CHEATS = {"zero-branch": ZeroPeekNet, "global": GlobalPeekNet}
ROOT = Path(__file__).resolve().parent.parent
TINY_RUN = ["warm_start.decisions=0", "rollout.num_workers=1", "rollout.envs_per_worker=16",
            "rollout.steps_per_rollout=8", "ppo.batch_decisions=100", "ppo.minibatch=50", "ppo.epochs=1",
            "eval.every_updates=0", "eval.every_minutes=0", "eval.final_deals=0", "belief.deals=0",
            "learner.device=cpu", "display=none", "max_minutes=0", "total_decisions=2000"]


def _kind(cls: type) -> str:
    return f"tests.custom_net:{cls.__name__}"


def _teach_to_peek(net: torch.nn.Module, steps: int = 5) -> None:
    """A few Adam steps towards an action the hidden hands decide: the zero branch becomes nonzero."""
    gen = torch.Generator().manual_seed(1)
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    for _ in range(steps):
        obs = torch.rand((32, OBS_SIZE), generator=gen)
        hands = (torch.rand((32, FULL_EXTRA), generator=gen) < 0.5).to(torch.uint8)
        mask = torch.ones((32, NUM_ACTIONS))
        net.train_forward(obs, mask, hands)  # (a global set here is read by the next call)
        logits = net.train_forward(obs, mask, hands)[0]
        loss = torch.nn.functional.cross_entropy(logits, hands[:, 0].long())
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert net.peek.weight.abs().max() > 0  # the branch reads the hands now


@pytest.fixture(params=list(CHEATS))
def trained_cheat(request, tmp_path: Path) -> tuple[type, Path, Path]:
    """(the cheat's class, a run folder whose checkpoint holds it trained to peek, that checkpoint): written
    as an older version would have written it, without the probe."""
    cls = CHEATS[request.param]
    cfg = load_config("quick", [f"model.kind={_kind(cls)}", "model.kwargs.width=8", *TINY_RUN])
    run = tmp_path / "run"
    learner = Learner(cfg.model, cfg.learner, 1e-3)  # the fresh network passes: its branch is zero
    _teach_to_peek(learner.net)
    state = RunState(cfg, run, "test", lambda line: None)
    state.write_run_files(False)
    ckpt = state.save(learner, state.metadata(), {}, {})
    return cls, run, ckpt


@pytest.mark.parametrize("cls", list(CHEATS.values()), ids=list(CHEATS))
def test_a_cheat_passes_fresh_and_is_caught_once_trained(cls: type) -> None:
    torch.manual_seed(0)
    net = cls(OBS_SIZE, NUM_ACTIONS, FULL_EXTRA, width=8)
    check_blind_policy(net)  # the zero branch: nothing to see yet
    _teach_to_peek(net)
    with pytest.raises(BlindPolicyError, match=f"model.kind={_kind(cls)}: its acting logits change"):
        check_blind_policy(net, positions=4)  # a few positions suffice


def _one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err


def test_every_load_refuses_a_trained_cheat_naming_its_checkpoint(trained_cheat, tmp_path: Path,
                                                                 capsys) -> None:
    """eval, serve (a checkpoint without ONNX is served through load_policy_agent) and export load
    through load_checkpoint; a refused checkpoint is never exported."""
    _, _, ckpt = trained_cheat
    with pytest.raises(CheckpointError, match=f"^{ckpt}: refused: model.kind=.*hidden hands"):
        load_checkpoint(ckpt)
    with pytest.raises(CheckpointError, match=str(ckpt)):
        load_policy_agent(ckpt)
    assert export_cmd.main([str(ckpt)]) == 1
    assert str(ckpt) in _one_line(capsys) and not (ckpt / "policy.onnx").exists()
    assert eval_cmd.main(["--agent", str(ckpt), "--opponents", "random", "--deals", "2", "--seed", "1"]) != 0
    assert str(ckpt) in capsys.readouterr().err


def test_resume_and_init_from_refuse_a_trained_cheat_also_at_dry_run(trained_cheat, tmp_path: Path,
                                                                     capsys) -> None:
    cls, run, ckpt = trained_cheat
    before = list_checkpoints(run)
    assert train.main(["--resume", str(run), "--dry-run"]) == 1
    assert f"{ckpt}: refused: model.kind={_kind(cls)}" in _one_line(capsys)
    assert train.main(["--resume", str(run)]) == 1  # refused as it loads, before Ray starts
    assert f"{ckpt}: refused: model.kind={_kind(cls)}" in _one_line(capsys)
    assert list_checkpoints(run) == before
    init = ["--config", "quick", f"model.kind={_kind(cls)}", "model.kwargs.width=8", f"init_from={ckpt}",
            *TINY_RUN]
    assert train.main([*init, "--run-dir", str(tmp_path / "new"), "--dry-run"]) == 1
    assert f"{ckpt}: refused" in _one_line(capsys)


def test_dry_run_probes_the_fresh_network(tmp_path: Path, capsys) -> None:
    assert train.main(["--config", "quick", "--run-dir", str(tmp_path / "run"), f"model.kind={PEEK}",
                       "model.kwargs.width=8", "--dry-run"]) == 1
    assert _one_line(capsys).startswith(f"samloc train: {REFUSAL}")
    assert train.main(["--config", "quick", "--run-dir", str(tmp_path / "run"),
                       f"model.kind={_kind(ZeroPeekNet)}", "model.kwargs.width=8", "--dry-run"]) == 0


@pytest.mark.slow
@pytest.mark.parametrize("cls", list(CHEATS.values()), ids=list(CHEATS))
def test_the_loop_probes_the_learner_before_it_checkpoints(cls: type, tmp_path: Path) -> None:
    """The loop's probe (every learner.guard_every updates, and before each checkpoint) stops the run in one
    line that names the last checkpoint, and writes none of the weights that peek."""
    cfg = load_config("quick", [f"model.kind={_kind(cls)}", "model.kwargs.width=8", *TINY_RUN])
    loop = new_loop(cfg, tmp_path / "run")  # Ray starts only in run()
    loop.save()  # the fresh network: written
    _teach_to_peek(loop.net)
    loop.state.counters.updates = 10
    with pytest.raises(TrainError) as err:
        loop.guard()
    msg = str(err.value)
    assert msg.startswith(f"{tmp_path / 'run'}: update 10: model.kind={_kind(cls)}: its acting logits")
    last = list_checkpoints(tmp_path / "run")[-1]
    assert "\n" not in msg and msg.endswith(f"(the last checkpoint: {last})")
    with pytest.raises(TrainError, match="hidden hands"):
        loop.save()
    assert len(list_checkpoints(tmp_path / "run")) == 1


@pytest.mark.slow
def test_samloc_train_stops_when_its_network_learns_to_peek(tmp_path: Path) -> None:
    """End to end: the zero branch passes at the start, PPO's first update makes it read the hands, and the
    periodic probe (learner.guard_every=1) stops the run in one line; nothing is checkpointed or exported."""
    import os
    import subprocess
    import sys

    run = tmp_path / "run"
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))  # tests.custom_net in Ray's workers
    proc = subprocess.run([sys.executable, "-m", "samloc", "train", "--config", "quick",
                           "--run-dir", str(run), f"model.kind={_kind(ZeroPeekNet)}", "model.kwargs.width=8",
                           "learner.guard_every=1",
                           "checkpoint.every_updates=5", *TINY_RUN],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert proc.returncode == 1, proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"samloc train: {run}: update 1: model.kind={_kind(ZeroPeekNet)}: its acting"), \
        proc.stderr[-2000:]
    assert list_checkpoints(run) == [] and not list(tmp_path.rglob("*.onnx"))
