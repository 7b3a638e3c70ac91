"""Training configuration: one typed dataclass per section, YAML files plus ``key=value`` overrides.

This module is the schema of the run's own sections (env, model, rollout, learner, eval, checkpoint,
belief), the :class:`Section` that an algorithm or a stage declares in its own module for its settings
(``ppo`` in training/algorithms/ppo.py, ``warm_start`` in training/algorithms/warm_start.py, an outside
algorithm's beside its code), and what is derived from a config (its tables, the evaluation's table, its flat
and YAML forms, the budgets).  A config is built from the dataclass defaults, then the YAML file, then the
command-line overrides (OmegaConf structured configs, so a wrong type or an unknown key is refused
before anything starts), then validated: :mod:`training.config_load`.  Every mistake is reported as one
:class:`ConfigError` line.

The docstring under each field is its documentation, the only one:
:func:`training.config_docs.field_docs` reads them from the source of each dataclass for
``samloc train --print-config`` and ``--help`` (a test checks that every field has one).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
import typing
from typing import Any

from omegaconf import OmegaConf

from agents.nets.format import DEFAULT_KIND, SIZED_KINDS
from sam_env.actions import NUM_ACTIONS
from sam_env.cards import DEFAULT_PLAYERS
from sam_env.obs import FULL_EXTRA, LA_SCALE, OBS_SIZE
from sam_env.rules import DEFAULT_PRESET, RuleSet, RulesError
from sam_env.table import Table

#: The value of a setting the run resolves when it starts, on the machine it has (rollout.num_workers,
#: eval.num_workers: training/run/sizing.py; learner.precision: training/run/precision.py).
AUTO = "auto"


if typing.TYPE_CHECKING:
    from agents.nets.interface import PolicyNetwork


class ConfigError(ValueError):
    """A training config that cannot be used, with the reason in one line."""


CONFIG_DIR = Path(__file__).resolve().parent / "configs"   # the repo's configs/ links here

#: Upper bounds that keep a typo from asking for a machine nobody has (each message says why).
MAX_WORKERS = 10_000
MAX_BATCH_DECISIONS = 1 << 22     # the learner expands ~4.5 KB per decision of its batch: 19 GB


@dataclass
class TableConfig:
    """One kind of table: a rule set and the player counts it is played with."""

    rules: Any = DEFAULT_PRESET
    """A preset name, or a house rule set as a record writes it: {preset: NAME, key: value, ...}."""
    players: list[int] = field(default_factory=lambda: [DEFAULT_PLAYERS])
    """Player counts played under these rules."""
    weight: float = 1.0
    """Relative share of each worker's game slots, for each of these player counts."""


@dataclass
class EnvConfig:
    """Which games the policy learns."""

    rules: list[str] = field(default_factory=lambda: [DEFAULT_PRESET])
    """Rule presets trained on; several presets share one network (the rule set is in the observation)."""
    players: list[int] = field(default_factory=lambda: [DEFAULT_PLAYERS])
    """Player counts trained on; every (rules, players) pair gets its share of each worker's games."""
    tables: list[TableConfig] = field(default_factory=list)
    """Tables trained on, when rules x players is not enough (mixed player ranges, house rules);
    when given, it replaces env.rules and env.players."""
    reward_scale: float = LA_SCALE
    """Lá are divided by this before the learner sees them (keeps values near 1)."""


@dataclass
class ModelConfig:
    """The policy/value network: the registered MLP, or a user's class (agents/nets/interface.py)."""

    kind: str = DEFAULT_KIND
    """The network: mlp (sized by hidden and layers); a part sized the same way (agents/nets/parts.py): moves
    (each legal move scored from its features), history (attention over the last 16 decisions), shape (the
    hand's fewest moves to play out) or combined (all three); or a user's class as package.module:Class that
    subclasses agents.nets.interface.PolicyNetwork (built with model.kwargs; docs/agents.md)."""
    hidden: int = 256
    """Width of the hidden layers."""
    layers: int = 2
    """Hidden layers; each after the first is a residual block."""
    critic: str = "full"
    """Baseline for the advantages: "full" (a critic MLP that also sees every hand; training only) or
    "obs"."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    """A network's keyword arguments besides obs_size, num_actions and critic_size (numbers or strings): a
    user's model.kind's, or a part's own (moves: move_width; history: history_width, history_heads)."""

    def label(self) -> str:
        """The network in a few words, for benchmark and log lines."""
        if self.kind == DEFAULT_KIND:
            shape = f"{self.hidden}x{self.layers}"
        else:
            sized = [f"{self.hidden}x{self.layers}"] if self.kind in SIZED_KINDS else []
            shape = self.kind + "(" + ", ".join(sized + [f"{k}={v}" for k, v in self.kwargs.items()]) + ")"
        return f"{shape} critic={self.critic}"

    def __post_init__(self) -> None:
        """Refuse at load (``--dry-run`` says it) a kind that names no network, or arguments it won't take."""
        if self.kind == DEFAULT_KIND:
            if self.kwargs:
                raise ConfigError(f"model.kwargs is for a user's model.kind; {DEFAULT_KIND} takes"
                                  " model.hidden and model.layers")
            return
        given = ("obs_size", "num_actions", "critic_size")  # every network's, besides model.kwargs
        if self.kind in SIZED_KINDS:
            given += ("hidden", "layers")
        bad = [k for k, v in self.kwargs.items() if k in given or not isinstance(v, (int, float, str, bool))]
        if bad:
            raise ConfigError(f"model.kwargs.{bad[0]}: the kwargs are numbers or strings, and not "
                              + ", ".join(given) + " (those are given)")
        # torch, and the user's module, load only when a config names a network of its own
        from agents.nets.factory import NetworkError, check_arguments
        args = self.hparams()
        try:
            check_arguments(str(args.pop("kind")), args)
        except NetworkError as exc:
            raise ConfigError(str(exc)) from None

    def hparams(self) -> dict[str, Any]:
        """The network's ``kind`` and constructor arguments: what ``build_network`` builds."""
        sizes = {"obs_size": OBS_SIZE, "num_actions": NUM_ACTIONS,
                 "critic_size": FULL_EXTRA if self.critic == "full" else 0}
        if self.kind in SIZED_KINDS:
            return {"kind": self.kind, **sizes, "hidden": self.hidden, "layers": self.layers, **self.kwargs}
        return {"kind": self.kind, **sizes, **self.kwargs}

    def build(self) -> "PolicyNetwork":
        """A freshly initialised network of this config (an ``agents.nets.interface.PolicyNetwork``)."""
        from agents.nets.factory import build_network  # torch: not needed to read or check a config

        return build_network(self.hparams())


@dataclass
class RolloutConfig:
    """Self-play generation on Ray actors."""

    num_workers: int | str = 1
    """Rollout actors (processes); each runs its own batch of games on one CPU thread.  auto (the shipped
    configs but cluster): the CPUs Ray has less 1 for the learner, 1 for the periodic evaluation and the
    search workers, at least 1 (training/run/sizing.py); a run says what it chose at its start and records the
    figure in its config.yaml, which a resume keeps."""
    envs_per_worker: int = 512
    """Games each worker steps together."""
    steps_per_rollout: int = 32
    """Decisions per game slot in one rollout; a rollout is envs_per_worker x steps_per_rollout decisions."""
    opponent_fraction: float = 0.2
    """Share of games in which one seat is the learner and the others are fixed opponents (anti-collapse)."""
    heuristic_share: float = 0.5
    """Of those games, the share played against the heuristic agent; the rest use past snapshots."""
    snapshot_every: int = 50
    """Learner updates between snapshots added to the opponent pool."""
    pool_size: int = 8
    """Past snapshots kept in the opponent pool (oldest dropped first)."""
    max_restarts: int = 5
    """How often Ray restarts a rollout actor that died (-1: without limit)."""
    cpus_per_worker: float = 1.0
    """CPUs Ray reserves per worker (fractions let workers share a small machine); the workers must fit
    in the CPUs Ray has (an embedded Ray refuses at once, a cluster waits up to place_timeout_s)."""
    place_timeout_s: float = 300.0
    """Seconds to wait for Ray to start every worker (a cluster's nodes may still be joining) before
    giving up with the reason; the wait is reported every few seconds (0: wait without limit)."""
    deterministic: bool = False
    """Reproducible runs: rollouts are learned from in request order, not arrival order; each worker has one
    request out (learner.queue_rollouts aside), asked for when its previous rollout is learned from, so the
    weights it plays depend on the request, not on timing; each request is seeded from seed and its id and
    carries its worker's games; a due evaluation waits for the running one; a sitting stops only after an
    update.  The same config and seed then give the same weights, and a stop and --resume those of a run
    that never stopped (docs/training.md, Reproducible runs).  Slower where workers are uneven."""
    opponent: str = "heuristic"
    """The fixed opponent of the heuristic_share games: an agent spec (make_agent: heuristic[:variant],
    random, a checkpoint folder, a .onnx file); samloc exploit sets it to the target it trains against."""
    opponent_temperature: float = 0.0
    """Sampling temperature of a neural rollout.opponent (0: greedy, as served by default)."""


@dataclass
class LearnerConfig:
    """Where and how the update runs, and how old the data it learns from may be (how an algorithm
    corrects for that age is its own setting: ppo.correct_from_lag, ppo.is_clip)."""

    device: str = "auto"
    """Torch device of the network, the optimizer and the update: auto (CUDA when present, else the CPU),
    cpu, cuda or cuda:N.  A CUDA learner asks Ray for a GPU on the node samloc train runs on."""
    precision: str = "auto"
    """fp32; bf16: forward and loss under bfloat16 autocast (weights, optimizer and gradients stay float32;
    its effect on the loss is measured in docs/results.md); or auto: on a CPU, the faster of the two for
    this network, timed at the learner's start (training/run/precision.py; fp32 in a rollout.deterministic
    run), on CUDA fp32.  A run says what auto chose and records it in its config.yaml, which a resume
    keeps."""
    max_policy_lag: int = 8
    """Updates a rollout may lag behind the weights that learn from it (updates made between its request
    and the update that takes it); older rollouts are dropped and counted (charts/dropped_rollouts), so
    every row learned from is 0 to this many updates old.  The queue bounds how many wait, not their age."""
    guard_every: int = 10
    """Updates between probes of the learner's network for a policy that reads the hidden hands
    (agents/nets/guards.py: a few positions, each seen with two sets of hands; a branch that starts at zero
    learns to peek as it trains).  A failure stops the run in one line before its next checkpoint (0: no
    periodic probe; every checkpoint written and every one loaded is still probed)."""
    queue_rollouts: int = 0
    """Rollouts in flight on the workers or waiting for the learner, at most (0: one per worker plus one);
    a worker that delivers into a full queue waits for room (at least num_workers).  More room lets the
    workers run further ahead of a slow learner, and the data it learns from grows older."""


@dataclass
class EvalConfig:
    """Periodic duplicate-deal evaluation (agents.evaluation.evaluate)."""

    every_updates: int = 100
    """Learner updates between evaluations (0: only at the end)."""
    every_minutes: float = 0.0
    """Also an evaluation at the first update past every multiple of this many minutes of training wall time
    (0: none): a curve with points in time whatever the machine's speed."""
    deals: int = 200
    """Duplicate deals per opponent in the periodic evaluation."""
    final_deals: int = 1000
    """Duplicate deals per opponent in the evaluation at the end of the run (0: none)."""
    opponents: list[str] = field(default_factory=lambda: ["random", "heuristic", "snapshot"])
    """Opponent specs: random, heuristic, snapshot (the oldest snapshot in the pool), a checkpoint dir."""
    rules: str = ""
    """Rule preset of the evaluation ('' = the rules of the first training table)."""
    players: int = 0
    """Players in the evaluation (0 = the player count of the first training table)."""
    num_workers: int | str = "auto"
    """Processes an evaluation plays its opponents in, side by side (one opponent each; the same figures as
    in one process): the periodic evaluation's count against the CPUs beside training, and the final one's.
    auto (the shipped configs but cluster): one per 16 CPUs Ray has, at least 1, at most one per opponent
    (training/run/sizing.py); a run says what it chose at its start and records the figure in its
    config.yaml."""


@dataclass
class CheckpointConfig:
    """Checkpoints in the run folder."""

    every_updates: int = 50
    """Learner updates between checkpoints (and at the end)."""
    every_minutes: float = 0.0
    """Also a checkpoint at the first update after every multiple of this many minutes of training wall time
    (over every sitting, Ray's start included), and one of the starting weights at minute 0 (0: none; samloc
    bench --to-strength's snapshots)."""
    keep: int = 3
    """Checkpoints kept (older ones are deleted; 0: every one)."""
    export_to: str = ""
    """Copy the final checkpoint, its ONNX export (policy.onnx) and its evaluation report to this folder
    ('' = no copy)."""


@dataclass
class BeliefConfig:
    """The hand belief for play-time search (training/tools/belief.py), learned once training ends."""

    deals: int = 0
    """Duplicate deals the final policy plays to learn from (0: no belief; the standard run: 200,000)."""
    epochs: int = 4
    """Passes over the recorded decisions."""
    hidden: int = 512
    """Width of the belief network's two hidden layers."""


@dataclass
class StageConfig:
    """One stage of a run (docs/training.md, "One command to strength"): a name and the settings it
    changes, and what ends it."""

    name: str = ""
    """What the stage is called in the log, TensorBoard (stage/…), curve.png and the metadata."""
    share: float = 0.0
    """Share of max_minutes the stages up to this one take: it ends once the run's wall time reaches
    max_minutes x the shares so far (a stage that ends early on a plateau leaves its minutes to the next;
    0: no minutes mark)."""
    updates: int = 0
    """Learner updates after which the stage ends (0: none)."""
    plateau_evals: int = 0
    """K: end the stage once its last K periodic evaluations against plateau_opponent gained no more than
    plateau_gain lá over its best one before them (0: no plateau rule; needs the periodic evaluation)."""
    plateau_gain: float = 0.05
    """X, in lá per game: the gain over the last plateau_evals evaluations that counts as progress."""
    plateau_opponent: str = "heuristic"
    """The eval.opponents entry the plateau rule reads."""
    settings: dict[str, Any] = field(default_factory=dict)
    """The settings the stage changes, as a config's own mapping ({algorithm: ..., distill: {enabled:
    true}, ppo: {lr: 1e-4}}): applied on the run's config after every earlier stage's.  It may change
    algorithm, rollout, learner (not device), eval and every algorithm's section; the network, tables,
    budgets, seed and the warm start are the run's."""


@dataclass
class TrainConfig:
    """Everything ``samloc train`` needs: the run's own keys here, the algorithms' and stages' in their
    sections (:class:`Section`)."""

    name: str = "quick"
    """Run name, shown in the reports; the run folder is <out_dir>/<name>__<seed>__<time>/.  A new run whose
    tables are changed by key=value (env.rules, env.players, env.tables) and that sets no name= gets them
    appended: quick-mien_bac-3."""
    seed: int = 0
    """Seeds the network, the deals and the opponent draws."""
    total_decisions: int = 2_000_000
    """Stop once the learner has trained on this many decisions, counted over every sitting of the run
    (--resume continues the count; --more-decisions N asks for N more); ppo.anneal_lr anneals over it."""
    max_minutes: float = 0.0
    """Also stop once the training wall time (Ray's start included) of every sitting together reaches this
    (0: no limit); a resume continues the count (--more-minutes N asks for N more minutes)."""
    out_dir: str = "runs"
    """Where run folders are created."""
    display: str = "auto"
    """auto (rich when a terminal), rich, plain (a line per log interval) or none."""
    log_every_s: float = 10.0
    """Seconds between plain log lines and scalar writes."""
    init_from: str = ""
    """A checkpoint folder whose network (same shape) a new run starts from ('' = fresh weights)."""
    algorithm: str = "ppo"
    """The learning algorithm: ppo, dmc (Deep Monte-Carlo), expert_iteration (on PPO; the older
    ``distill.enabled: true`` is its alias), reinforce, or a package.module:Class path (docs/training.md,
    "Writing an algorithm"); each has its settings in the section of its name (ppo.lr, dmc.epsilon,
    distill.coef)."""
    env: EnvConfig = field(default_factory=EnvConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    learner: LearnerConfig = field(default_factory=LearnerConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    belief: BeliefConfig = field(default_factory=BeliefConfig)
    stages: list[StageConfig] = field(default_factory=list)
    """The run as stages, each started by the run itself between two updates on the same network ([]: one
    stage, the config as it is).  Each: name, share (of max_minutes), updates, plateau_evals/plateau_gain/
    plateau_opponent (what ends it: the first that comes; the last stage runs until the run stops) and
    settings (what it changes).  A switch checkpoints, rebuilds the algorithm and the workers whose
    settings changed, and goes on; --resume continues in the stage it stopped in."""
    sections: dict[str, "Section"] = field(default_factory=dict)
    """(Not a key: the sections themselves are.)  The settings of each algorithm and stage by section
    name (ppo, dmc, reinforce, distill, warm_start, an outside algorithm's): declared in their own
    modules, gathered by training.config_load (see :class:`Section`)."""

    def section(self, name: str) -> Any:
        """The settings of the algorithm or stage whose section is ``name`` (``cfg.section("ppo").lr``)."""
        try:
            return self.sections[name]
        except KeyError:
            have = ", ".join(self.sections)
            raise ConfigError(f"this config has no {name!r} section (sections: {have})") from None


class Section:
    """An algorithm's or a stage's settings: a dataclass in its own module (each field documented by the
    docstring under it, as here), whose fields are the keys of its section (``ppo.lr``, ``a2c.n_steps``).
    The algorithm names it (``Algorithm.Settings``; a stage: ``training.algorithms.STAGES``); the loader
    gives it a section of the config, so the command line, YAML, ``--print-config``, the saved config,
    the checkpoint metadata and TensorBoard's hparams carry it, and ``--resume`` restores it."""

    def check(self, cfg: TrainConfig, name: str) -> None:
        """Range checks that types alone cannot express (``name``: the section's): raise ConfigError in
        one line naming the key."""


def need(ok: bool, msg: str) -> None:
    """A check of a config: ConfigError(msg) unless ``ok``."""
    if not ok:
        raise ConfigError(msg)


def weighted_tables(env: EnvConfig) -> list[tuple[Table, float]]:
    """Every table of ``env`` (``env.tables``, else ``env.rules`` x ``env.players``) with its share of
    the game slots.

    Raises ConfigError for an unknown preset or parameter, or a player count the rules forbid."""
    specs = ([(t.rules, list(t.players), float(t.weight)) for t in env.tables] if env.tables
             else [(r, list(env.players), 1.0) for r in env.rules])
    where = "env.tables" if env.tables else "env.rules"
    if not specs or any(not players for _, players, _ in specs):
        raise ConfigError(f"{where}: no tables (give at least one rule set and one player count)")
    out: list[tuple[Table, float]] = []
    for k, (rules, players, weight) in enumerate(specs):
        if not weight > 0:
            raise ConfigError(f"{where}: weight must be positive, not {weight}")
        try:
            rs = RuleSet.parse(OmegaConf.to_container(rules) if OmegaConf.is_config(rules) else rules)
        except RulesError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        try:  # a count the rules forbid is the players key's mistake, not the rules'
            out += [(Table(rs, p), weight) for p in players]
        except RulesError as exc:
            raise ConfigError(f"{f'env.tables[{k}].players' if env.tables else 'env.players'}: {exc}"
                              ) from None
    keys = [t.key for t, _ in out]
    if len(set(keys)) != len(keys):
        raise ConfigError(f"{where}: a table is listed twice")
    return out


def training_tables(env: EnvConfig) -> list[Table]:
    """The tables training plays, in the config's order (:func:`weighted_tables` without the weights)."""
    return [t for t, _ in weighted_tables(env)]


def table_weights(env: EnvConfig) -> list[float]:
    """Each training table's relative share of a worker's game slots, in :func:`training_tables`' order."""
    return [w for _, w in weighted_tables(env)]


def eval_table(env: EnvConfig, ev: EvalConfig) -> Table:
    """The evaluation's table: ``eval.rules`` and ``eval.players``, each the first training table's
    when not given.  ConfigError names a player count the rules forbid."""
    first = training_tables(env)[0]
    try:
        rules = RuleSet.parse(ev.rules) if ev.rules else first.rules
    except RulesError as exc:
        raise ConfigError(f"eval.rules: {exc}") from None
    try:
        return Table(rules, ev.players or first.players)
    except RulesError as exc:
        raise ConfigError(f"{'eval.players' if ev.players else 'eval.rules'}: {exc}") from None


def core_fields(cfg: TrainConfig | type[TrainConfig]) -> list[dataclasses.Field]:
    """The fields of :class:`TrainConfig` that are keys (every one but ``sections``)."""
    return [f for f in dataclasses.fields(cfg) if f.name != "sections"]


def to_dict(cfg: TrainConfig) -> dict[str, Any]:
    """The config as plain data: its keys, then a mapping per section (what a run folder stores)."""
    out = dataclasses.asdict(cfg)
    return out | out.pop("sections")


def to_yaml(cfg: TrainConfig) -> str:
    return OmegaConf.to_yaml(OmegaConf.create(to_dict(cfg)))


def flat(cfg: TrainConfig) -> dict[str, Any]:
    """``section.key → value`` (lists as strings): TensorBoard's hparams."""
    out: dict[str, Any] = {}

    def walk(prefix: str, d: dict[str, Any]) -> None:
        for k, v in d.items():
            if isinstance(v, dict):
                walk(f"{prefix}{k}.", v)
            else:
                out[prefix + k] = v if isinstance(v, (int, float, str, bool)) else str(v)
    walk("", to_dict(cfg))
    return out


def stop_reason(total_decisions: int, max_minutes: float, decisions_trained: int, wall_s: float) -> str:
    """Why a run with this much done stops now, by its budgets ('' when it goes on): the budgets count every
    sitting."""
    if decisions_trained >= total_decisions:
        return "total_decisions reached"
    if max_minutes and wall_s >= max_minutes * 60:
        return "max_minutes reached"
    return ""
