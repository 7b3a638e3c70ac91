"""The Ray side of a run: starting or joining Ray, the learner's GPU, placing worker groups, their health.

An embedded Ray listens on 127.0.0.1 only; a cluster is joined with Ray's token authentication
(:func:`join_ray`).  A CUDA learner first asks Ray for a GPU on this node (a
placement group), so on a cluster ``samloc train`` runs on the GPU node and the workers go wherever Ray
has CPUs.  A request lost with a dead worker (Ray restarts the actor, ``max_task_retries=0``) is asked
again; while Ray restarts an actor, requests to it fail at once as "unavailable" and count as the same
failure (:class:`WorkerHealth`), so a slow restart does not use up ``max_restarts``.
"""

from __future__ import annotations

import os
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import ray
from ray.exceptions import ActorUnavailableError, AuthenticationError, RayActorError
from ray.util.placement_group import placement_group, remove_placement_group

from sam_env.machine import usable_cpus

from ..config import TrainConfig
from ..errors import TrainError

#: The thread environment of every Ray worker process (this process's own is set by ``samloc``).
WORKER_ENV = {"env_vars": {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}}


def embedded_cpus() -> int:
    """The CPUs of the Ray that ``samloc train`` starts on this machine: those this process may use
    (its affinity and cgroup quota, :func:`sam_env.machine.usable_cpus`), not the machine's count."""
    return usable_cpus()


@dataclass(frozen=True)
class WorkerGroup:
    """A group of Ray workers a run starts (``Algorithm.worker_groups`` says which): the config section
    whose ``num_workers`` and ``cpus_per_worker`` keys size it, and what one worker is called."""

    section: str
    num_workers: int  # (rollout.num_workers is still "auto" until sizing.apply_sizing resolves it)
    cpus_per_worker: float
    what: str


def cpu_shortfall(groups: list[WorkerGroup], have: float, embedded: bool) -> str:
    """'' when the worker ``groups`` fit in ``have`` CPUs, else why not in one line (for an embedded Ray,
    which never grows, with the settings that would fit)."""
    need = sum(g.num_workers * g.cpus_per_worker for g in groups)
    if need <= have + 1e-9:
        return ""
    msg = " + ".join(f"{g.section}.num_workers={g.num_workers} x {g.section}.cpus_per_worker="
                     f"{g.cpus_per_worker:g}" for g in groups) + f" need {need:g} CPUs, Ray has {have:g}"
    if embedded and len(groups) == 1:
        g, sec = groups[0], groups[0].section
        fit = int(have // g.cpus_per_worker)
        share = f"{sec}.cpus_per_worker={int(have / g.num_workers * 100) / 100:g}"
        msg += f" (use {sec}.num_workers={fit} or {share})" if fit > 0 else f" (use {share})"
    elif embedded:
        msg += " (use fewer workers or lower their cpus_per_worker)"
    return msg


class WorkerHealth:
    """The failures of one group of Ray actors (rollout or search workers): one is counted per actor
    restart, not per request that fails while Ray restarts it, and a worker that failed more than
    ``max_restarts`` + 1 times (-1: no limit) ends the run.  A failed worker is asked again after a
    short wait (:meth:`due`)."""

    RETRY_S = 0.5

    def __init__(self, what: str, workers: int, max_restarts: int):
        self.what, self.max_restarts = what, max_restarts
        self.failures = [0] * workers
        self.recovering = [False] * workers  # a failure seen, no result since
        self.retry_at: dict[int, float] = {}   # worker -> when to ask it again

    def failed(self, w: int, exc: Exception) -> bool:
        """Worker ``w``'s request failed with ``exc``: True when it is a new failure (False: the actor is
        still restarting after the last one); raises :class:`TrainError` past the limit."""
        self.retry_at[w] = time.perf_counter() + self.RETRY_S
        if self.recovering[w] and isinstance(exc, ActorUnavailableError):
            return False
        self.recovering[w] = True
        self.failures[w] += 1
        if self.max_restarts >= 0 and self.failures[w] > self.max_restarts + 1:
            raise TrainError(f"{self.what} {w} failed {self.failures[w]} times;"
                             f" last error: {str(exc).splitlines()[0]}") from None
        return True

    def ok(self, w: int) -> None:
        """Worker ``w`` delivered: its actor is up again."""
        self.recovering[w] = False

    def due(self) -> list[int]:
        """The failed workers whose wait is over (each returned once): ask them again."""
        now = time.perf_counter()
        ready = [w for w, t in self.retry_at.items() if now >= t]
        for w in ready:
            del self.retry_at[w]
        return ready


def waiting_reason(total: float, asked: float) -> str:
    """Why placed actors have not started yet, from Ray's CPUs in all and what every actor placed asks
    for (the free CPUs say nothing: the actors that are starting hold theirs already)."""
    if asked > total + 1e-9:
        return f"Ray has {total:g} CPUs in all, the workers ask for {asked:g}"
    return f"their processes are starting; Ray has the {asked:g} CPUs they ask for"


def arrived(pending: dict[Any, Any], timeout: float) -> list[Any]:
    """The results among ``pending``'s refs that are done: waiting up to ``timeout`` for the first, then
    every other one done by then (none pending: a short sleep, so a loop does not spin)."""
    if not pending:
        time.sleep(min(timeout, 0.05))
        return []
    ready, rest = ray.wait(list(pending), num_returns=1, timeout=timeout)
    if ready and rest:
        ready += ray.wait(rest, num_returns=len(rest), timeout=0)[0]
    return ready


@contextmanager
def _loopback_only() -> Iterator[None]:
    """Ray keeps 127.0.0.1 as this process's node address (and every server of an embedded Ray binds to
    loopback alone) only where it offers no multi-node clusters: this switch, off on macOS and Windows.
    Without it Ray swaps a loopback address for the machine's other one."""
    from ray._private import ray_constants  # Ray's private switch, read only while Ray starts or joins
    clusters, ray_constants.ENABLE_RAY_CLUSTER = ray_constants.ENABLE_RAY_CLUSTER, False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = clusters


def _has_token() -> bool:
    """Whether a Ray token is where Ray's own clients look (Ray's token-auth docs): ``$RAY_AUTH_TOKEN``,
    the file ``$RAY_AUTH_TOKEN_PATH``, else ``~/.ray/auth_token``.  Read here, not through Ray's loader,
    whose cached token would change how this driver talks to a cluster without authentication."""
    if os.environ.get("RAY_AUTH_TOKEN", "").strip():
        return True
    path = Path(os.environ.get("RAY_AUTH_TOKEN_PATH") or Path.home() / ".ray" / "auth_token")
    try:
        return bool(path.read_text().strip())
    except (OSError, UnicodeDecodeError):
        return False


@contextmanager
def _stderr_hidden() -> Iterator[None]:
    """File descriptor 2 sent to /dev/null: Ray's C++ client logs a refused first try there, which
    :func:`join_ray` expects and answers itself."""
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _ask_gcs(address: str) -> Exception | None:
    """One question to the cluster's GCS: None when it answers, else why not."""
    from ray._raylet import GcsClient  # the GCS client ray.init uses, asked once before joining
    try:
        GcsClient(address=address).internal_kv_get(b"samloc", namespace=None, timeout=10)
    except Exception as exc:  # Ray's AuthenticationError, RpcError and kin
        return exc
    return None


TOKEN_HELP = ("copy the head's ~/.ray/auth_token to this machine, or set RAY_AUTH_TOKEN"
              " (or RAY_AUTH_TOKEN_PATH) to the cluster's token")


def join_ray(address: str) -> None:
    """Join the Ray cluster at ``address`` (HOST:PORT) as it is set up: with Ray's token authentication
    when it asks for it (the default of a head started with ``ray start`` that finds a token), at that
    address itself (Ray would swap a loopback one for the machine's other address).

    ``ray.init`` with an address uses a token only under ``RAY_AUTH_MODE=token``, and a driver in token
    mode refuses workers of a cluster without it; so, unless ``RAY_AUTH_MODE`` is set, the cluster is
    asked first without the token and, when it refuses, again with the token Ray's clients find.  A
    missing or wrong token, or no Ray there, is one line at once, not half a minute of Ray's retries."""
    from ray._private.authentication import authentication_token_setup as auth  # Ray's token mode switch
    host = address.rpartition(":")[0].strip("[]")
    choose = auth.AUTH_MODE_ENV_VAR not in os.environ and _has_token()
    with _loopback_only() if host in ("127.0.0.1", "localhost", "::1") else nullcontext():
        with _stderr_hidden() if choose else nullcontext():
            err = _ask_gcs(address)
        if isinstance(err, AuthenticationError) and choose:
            auth._enable_token_auth()  # RAY_AUTH_MODE=token here and in the processes this one starts
            err = _ask_gcs(address)
        if isinstance(err, AuthenticationError):
            mode = os.environ.get(auth.AUTH_MODE_ENV_VAR, "").lower()
            have = "a token that is not the cluster's" if mode == "token" else "no token"
            if mode == "disabled":
                have = "RAY_AUTH_MODE=disabled"
            raise TrainError(f"--ray-address {address}: the Ray cluster there asks for its authentication"
                             f" token and this machine has {have}: {TOKEN_HELP}") from None
        if err is not None:
            raise TrainError(f"--ray-address {address}: no Ray cluster answers there"
                             f" ({str(err).splitlines()[0]});"
                             " is `ray start --head` running there, and its port open to this machine?")
        ray.init(address=address, runtime_env=WORKER_ENV, log_to_driver=False, logging_level="error")


class WorkerPool:
    """Ray for one sitting: started (embedded, loopback only) or joined, the learner's GPU reserved, the
    worker groups placed and, at the end, killed (and an embedded Ray shut down)."""

    def __init__(self, cfg: TrainConfig, ray_address: str | None, dashboard: bool,
                 log: Callable[[str], None]):
        self.cfg, self.ray_address, self.dashboard, self.log = cfg, ray_address, dashboard, log
        self.started_ray = False
        self.gpu_reservation: Any = None
        self.groups: list[list[Any]] = []   # every group of actors placed, killed at the end
        self.group_cpus: list[float] = []   # the CPUs each actor of that group asks for

    def start(self, extra_cpus: int = 0) -> None:
        """Join the cluster at ``ray_address`` (:func:`join_ray`), or start an embedded Ray that listens on
        127.0.0.1 only, so nobody else on the network reaches it; ``extra_cpus`` beyond the machine's (the
        learners of ``samloc sweep``'s trials, which run as Ray actors; ``samloc train``'s is outside Ray)."""
        if ray.is_initialized():
            return
        if self.ray_address:
            join_ray(self.ray_address)
            self.started_ray = True
            return
        # Ray starts its workers at nice 15; here they are the run's own work beside a learner at nice 0
        # that waits for them, and any other load on the machine would starve them (RAY_worker_niceness wins)
        system = {} if "RAY_worker_niceness" in os.environ else {"worker_niceness": 0}
        with _loopback_only():
            ray.init(address="local", _node_ip_address="127.0.0.1", num_cpus=embedded_cpus() + extra_cpus,
                     include_dashboard=self.dashboard, runtime_env=WORKER_ENV, log_to_driver=False,
                     logging_level="error", _system_config=system)
        self.started_ray = True

    def reserve_gpu(self) -> None:
        """Ask Ray for one GPU on this node (where the learner runs), so no other Ray work takes it;
        refuse at once, in one line, when the node has none."""
        spec = self.cfg.learner.device
        node_id = ray.get_runtime_context().get_node_id()
        node = next(n for n in ray.nodes() if n["NodeID"] == node_id)
        ip = node["NodeManagerAddress"]
        if node["Resources"].get("GPU", 0) < 1:
            total = ray.cluster_resources().get("GPU", 0)
            where = (f"the cluster's {total:g} GPU(s) are on other nodes: run samloc train on a GPU node"
                     if total else "the Ray cluster has no GPU")
            raise TrainError(f"learner.device={spec}: Ray has no GPU for the learner on this node ({ip});"
                             f" {where} (or use learner.device=cpu)")
        pg = placement_group([{"GPU": 1, f"node:{ip}": 0.001}])
        if not ray.wait([pg.ready()], timeout=10)[0]:
            remove_placement_group(pg)
            raise TrainError(f"learner.device={spec}: the GPU of this node ({ip}) is held by other Ray work")
        self.gpu_reservation = pg

    def cpus(self) -> float:
        """The CPUs of the Ray this run started or joined (a cluster's: every node joined so far)."""
        return float(ray.cluster_resources().get("CPU", 0))

    def check_cpus(self, groups: list[WorkerGroup]) -> None:
        """Worker ``groups`` that cannot fit: refused here at once (an embedded Ray never grows), said on a
        cluster."""
        msg = cpu_shortfall(groups, self.cpus(), embedded=not self.ray_address)
        if msg and not self.ray_address:
            raise TrainError(msg)
        if msg:
            self.log(msg + "; waiting for more nodes to join (rollout.place_timeout_s)")

    def place(self, actor_class: Any, count: int, what: str,
              cpus: float) -> tuple[list[Any], list[dict[str, Any]]]:
        """``count`` actors of ``actor_class`` (each a ``what`` asking for ``cpus``) made from the config,
        spread over the cluster: (actors, their placement once every process started)."""
        actors = [actor_class.options(num_cpus=cpus, max_restarts=self.cfg.rollout.max_restarts,
                                      max_task_retries=0, scheduling_strategy="SPREAD").remote(self.cfg, w)
                  for w in range(count)]
        self.groups.append(actors)
        self.group_cpus.append(cpus)
        return actors, self._wait_placed(actors, what, cpus)

    def release(self, actors: list[Any]) -> None:
        """Kill a group of actors placed before (a stage that rebuilds its workers), freeing their CPUs."""
        for i, group in enumerate(self.groups):
            if group is actors:
                for a in group:
                    ray.kill(a, no_restart=True)
                del self.groups[i], self.group_cpus[i]
                return

    def _wait_placed(self, actors: list[Any], what: str, cpus: float) -> list[dict[str, Any]]:
        """Every process of ``actors``, once started; what Ray is waiting for is said every few seconds, and
        after ``rollout.place_timeout_s`` it is an error."""
        ro = self.cfg.rollout
        pending = {a.info.remote(): w for w, a in enumerate(actors)}
        info: dict[int, dict[str, Any]] = {}
        t0 = time.perf_counter()
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=len(pending), timeout=5.0)
            for ref in ready:
                w = pending.pop(ref)
                try:
                    info[w] = ray.get(ref)
                except RayActorError as exc:
                    raise TrainError(f"{what} {w} did not start: {str(exc).splitlines()[0]}") from None
            if not pending:
                break
            waited = time.perf_counter() - t0
            asked = sum(len(g) * c for g, c in zip(self.groups, self.group_cpus))
            why = waiting_reason(ray.cluster_resources().get("CPU", 0), asked)
            msg = f"{len(pending)} of {len(actors)} {what}s not started after {waited:.0f} s ({why})"
            if ro.place_timeout_s and waited >= ro.place_timeout_s:
                raise TrainError(msg + "; giving up (rollout.place_timeout_s)")
            self.log(msg)
        return [info[w] for w in range(len(actors))]

    def stop(self) -> None:
        """Kill every actor placed, free the GPU, shut an embedded Ray down."""
        if not ray.is_initialized():
            return
        for group in self.groups:
            for a in group:
                ray.kill(a, no_restart=True)
        if self.gpu_reservation is not None:
            remove_placement_group(self.gpu_reservation)
            self.gpu_reservation = None
        if self.started_ray:
            ray.shutdown()
