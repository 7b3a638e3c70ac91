"""Shared helpers for the engine tests: the rule sets and deals they sweep over.

Helpers reach the tests as fixtures: a test that takes ``engine_cfg`` runs
once per rule set and player count of :data:`CONFIGS`; ``deal_for`` deals its
games.
"""

from __future__ import annotations

import random
import socket
import sys
import threading
import time
from collections import Counter
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import numpy as np
import pytest

from sam_env import core
from sam_env.game import Game
from sam_env.rules import PRESET_NAMES, RuleSet

# Every preset at every player count it allows (read from the presets, so a new one is swept too), plus
# two user rule sets that switch on combinations no preset has (passed-seat chops with double quads and
# forbidden 2s; passed-seat chops without single-2 chops).
CONFIGS: list[tuple[Any, int]] = (
    [(name, p) for name in PRESET_NAMES for p in RuleSet.parse(name).player_counts]
    + [({"preset": "s666pg", "ace_low_straights": True, "passed_can_chop": True,
         "double_quad_chops_pair_two": True}, 4),
       ({"preset": "online", "passed_can_chop": True, "quad_chops_single_two": False,
         "bao_mot": "enforce"}, 3)]
)


def config_id(config: tuple[Any, int]) -> str:
    rules, players = config
    name = rules if isinstance(rules, str) else rules["preset"] + "+overrides"
    return f"{name}-{players}p"


def rigged_hands(rng: random.Random, players: int) -> list[list[int]]:
    """A deal rich in quads (0–2 per seat), so that chops, chop chains, passed
    seats' chop rights and double quads come up often in random play."""
    ranks = list(range(13))
    rng.shuffle(ranks)
    hands: list[list[int]] = []
    for _ in range(players):
        h: list[int] = []
        for _ in range(rng.choice((0, 1, 1, 2))):
            r = ranks.pop()
            h += [r * 4 + s for s in range(4)]
        hands.append(h)
    used = {c for h in hands for c in h}
    rest = [c for c in range(52) if c not in used]
    rng.shuffle(rest)
    for h in hands:
        while len(h) < 10:
            h.append(rest.pop())
    return hands


def deal(rules: Any, players: int, seed: int) -> Game:
    """Game number ``seed`` of a sweep: even seeds a shuffled deal, odd ones a
    quad-rich deal; the opener is drawn from the seed too."""
    if seed % 2 == 0:
        return Game.new(rules, players, seed=seed)
    rng = random.Random(seed)
    return Game.from_deal(rules, rigged_hands(rng, players), opener=rng.randrange(players))


def play_positions(count: int, seed: int, players: int = 4, play_only: bool = False,
                   rules: Any = "hoi_quan_bai") -> list[Game]:
    """Games stopped at random decisions with a real choice, from heuristic (odd seats)
    against random (even seats) play; ``play_only`` skips Sâm-phase decisions."""
    from agents.players.heuristic import HeuristicAgent
    from agents.players.random_agent import RandomAgent

    rng = random.Random(seed)
    h, r = HeuristicAgent(seed=1), RandomAgent(seed=2)
    out: list[Game] = []
    while len(out) < count:
        g = Game.new(rules, players, seed=rng.randrange(1 << 30))
        stop = rng.randrange(1, 50)
        while g.result is None and len(g.events) < stop:
            s = g.to_act
            g.apply((h if s % 2 else r).act(g, s))
        if g.result is None and int(g.legal_mask().sum()) > 1 and (
                not play_only or g.state[core.O_PHASE] == core.PH_PLAY):
            out.append(g)
    return out


def shuffle_hidden(state: np.ndarray, seat: int, seed: int = 0) -> np.ndarray:
    """A copy of engine row ``state`` with the other seats' cards dealt again among them
    (each keeps its hand size): what ``seat`` cannot see, changed; what it can, kept."""
    st = state.copy()
    nr = core.NR
    others = [s for s in range(int(st[core.O_N])) if s != seat]
    pool = [r for s in others for r in range(nr) for _ in range(st[core.O_HAND + s * nr + r])]
    random.Random(seed).shuffle(pool)
    for s in others:
        st[core.O_HAND + s * nr:core.O_HAND + (s + 1) * nr] = 0
        for _ in range(st[core.O_SIZE + s]):
            st[core.O_HAND + s * nr + pool.pop()] += 1
    return st


def free_port() -> int:
    """A loopback port free now (for a server that must know its own or another's port first)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def live_server(app: Any, options: Callable[[str, int], dict[str, Any]] | None = None,
                port: int = 0) -> Iterator[str]:
    """``app`` under a real uvicorn on a loopback port (a thread); yields its base URL.
    ``options(host, port)``: the uvicorn settings (default: just those two, quiet logs);
    ``port``: the port (default: a free one)."""
    import uvicorn

    if not port:
        port = free_port()
    settings = options("127.0.0.1", port) if options else {"host": "127.0.0.1", "port": port,
                                                             "log_level": "warning"}
    server = uvicorn.Server(uvicorn.Config(app, **settings))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    t0 = time.time()
    while not server.started:
        assert time.time() - t0 < 60 and thread.is_alive(), "the test server did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


@pytest.fixture(scope="session")
def deal_for() -> Callable[[Any, int, int], Game]:
    return deal


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "engine_cfg" in metafunc.fixturenames:
        metafunc.parametrize("engine_cfg", CONFIGS, ids=[config_id(c) for c in CONFIGS])


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Shut down a Ray a test left running before the interpreter exits: Ray's own atexit shutdown runs
    while the interpreter is being torn down, under its gRPC threads, and one CI run ended in SIGSEGV
    after every test had passed (scripts/test.sh sets PYTHONFAULTHANDLER, so any such crash names its
    thread's stack)."""
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Name the Python threads still alive at the end: a test should stop what it starts, and a thread
    running at the interpreter's exit is the usual cause of a crash there."""
    left = Counter(  # by what each runs (its target names the test's server or pool), enumerate(): alive ones
        f"{getattr(getattr(t, '_target', None), '__qualname__', type(t).__name__)}"
        f" ({'daemon' if t.daemon else 'joined at exit'})"
        for t in threading.enumerate() if t is not threading.main_thread())
    if left:
        terminalreporter.write_line("threads still running after the tests: "
                                    + ", ".join(f"{n} × {k}" for k, n in sorted(left.items())))
