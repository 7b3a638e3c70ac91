"""Guards on what a network sees: a network whose acting logits read the hidden hands (the critic's
input alone) is refused in one line, naming its kind, when it is built for training; the MLP and a
user's network that keeps the hands in its critic pass."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from agents.nets.factory import NetworkError, build_network  # noqa: E402
from agents.nets.guards import check_blind_policy  # noqa: E402
from samloc.commands import train  # noqa: E402
from sam_env.actions import NUM_ACTIONS  # noqa: E402
from sam_env.obs import FULL_EXTRA, OBS_SIZE  # noqa: E402
from tests.custom_net import PeekingNet, TinyNet  # noqa: E402
from training.config_load import load_config  # noqa: E402
from training.run.learner import Learner  # noqa: E402

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
    Learner(load_config("quick", ["model.hidden=32"]), 1e-3)  # the default network, built for training


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
        Learner(load_config("quick", [f"model.kind={PEEK}", "model.kwargs.width=8"]), 1e-3)
    check_blind_policy(TinyNet(OBS_SIZE, NUM_ACTIONS, 0, width=8))  # no critic: no hands to read


def test_samloc_train_refuses_it_in_one_line_before_ray_starts(tmp_path: Path, capsys) -> None:
    code = train.main(["--config", "quick", "--run-dir", str(tmp_path / "run"), f"model.kind={PEEK}",
                       "model.kwargs.width=8", "display=none"])
    err = capsys.readouterr().err
    assert code == 1 and err.startswith(f"samloc train: {REFUSAL}") and err.count("\n") == 1, err
    assert not (tmp_path / "run" / "checkpoints").exists()
