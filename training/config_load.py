"""Loading a training config: defaults ← YAML file (a path, or a name of ``training/configs``) ←
``key=value`` overrides, then :func:`validate`, the checks that types alone cannot express.  Every
mistake is one :class:`~training.config.ConfigError` line."""

from __future__ import annotations

import dataclasses
import math
import re
import typing
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from agents.registry import parse_spec
from sam_env.rules import RuleSet, RulesError

from .config import CONFIG_DIR, ConfigError, TrainConfig, eval_players, to_dict, training_tables
from .sizing import AUTO


def _as_lists(node: Any, cls: type, where: str = "") -> Any:
    """A layer of settings (plain containers) in which a scalar given for a list field becomes a
    one-element list (``env.players=3`` means ``[3]``), and one table given for ``env.tables`` a list of
    one; a scalar for ``env.tables`` is refused in plain words."""
    if not isinstance(node, dict):
        return node
    hints = typing.get_type_hints(cls)
    out = {}
    for key, value in node.items():
        hint = hints.get(key) if isinstance(key, str) else None
        name = f"{where}{key}"
        if hint is not None and dataclasses.is_dataclass(hint):
            value = _as_lists(value, hint, name + ".")
        elif typing.get_origin(hint) is list and value is not None:
            (item,) = typing.get_args(hint)
            if dataclasses.is_dataclass(item):
                if isinstance(value, dict):
                    value = [value]
                if not isinstance(value, list):
                    raise ConfigError(f"{name} takes a list of tables such as"
                                      f" [{{rules: mien_bac, players: [3]}}], not {value!r}")
                value = [_as_lists(v, item, f"{name}[{i}].") for i, v in enumerate(value)]
            elif not isinstance(value, (list, dict)):
                value = [value]
        out[key] = value
    return out


def _layer(conf: Any) -> Any:
    """A YAML or key=value layer with scalars for list fields made lists (:func:`_as_lists`)."""
    return OmegaConf.create(_as_lists(OmegaConf.to_container(conf, resolve=False), TrainConfig))


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> TrainConfig:
    """Defaults ← YAML file ← ``key=value`` overrides, validated.  Raises ConfigError."""
    base = OmegaConf.structured(TrainConfig)
    layers = [base]
    if path is not None:
        p = Path(path)
        if not p.exists() and not p.suffix and (CONFIG_DIR / f"{p}.yaml").exists():
            p = CONFIG_DIR / f"{p}.yaml"
        if not p.is_file():
            raise ConfigError(f"config file {str(path)!r} not found")
        try:
            loaded = OmegaConf.load(p)
        except Exception as exc:  # yaml errors carry several lines
            raise ConfigError(f"cannot read config {p}: {str(exc).splitlines()[0]}") from None
        if not OmegaConf.is_dict(loaded):
            raise ConfigError(f"config {p} must be a mapping of settings (name: ..., ppo: {{...}}), "
                              f"not a {type(OmegaConf.to_container(loaded)).__name__}")
        layers.append(_layer(loaded))
    for item in overrides or []:
        if "=" not in item:
            raise ConfigError(f"override {item!r} must look like key=value (e.g. ppo.lr=1e-4)")
    try:
        if overrides:
            layers.append(_layer(OmegaConf.from_dotlist(list(overrides))))
        merged = OmegaConf.merge(*layers)
        cfg = OmegaConf.to_object(merged)
    except OmegaConfBaseException as exc:
        raise ConfigError(_one_line(exc)) from None
    validate(cfg)
    return cfg


def _one_line(exc: Exception) -> str:
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    msg = lines[0] if lines else type(exc).__name__
    key = getattr(exc, "full_key", None)
    if key and key not in msg:
        msg = f"{key}: {msg}"
    return msg


#: Upper bounds that keep a typo from asking for a machine nobody has (each message says why).
MAX_WORKERS = 10_000
MAX_ROLLOUT_DECISIONS = 1 << 20   # a worker holds ~4.5 KB per decision of its rollout: 4.7 GB
MAX_BATCH_DECISIONS = 1 << 22     # the learner expands ~4.5 KB per decision of its batch: 19 GB
DEVICE_RE = re.compile(r"auto|cpu|cuda(:\d+)?")


def _non_finite(d: dict[str, Any], prefix: str = "") -> str:
    """The first float setting that is inf or nan ('' when none)."""
    for k, v in d.items():
        if isinstance(v, dict):
            bad = _non_finite(v, f"{prefix}{k}.")
            if bad:
                return bad
        elif isinstance(v, float) and not math.isfinite(v):
            return f"{prefix}{k}"
    return ""


def validate(cfg: TrainConfig) -> None:
    """Range and name checks that types alone cannot express."""
    need = _need
    bad = _non_finite(to_dict(cfg))
    need(not bad, f"{bad} must be a finite number")
    need(bool(cfg.name) and all(c.isalnum() or c in "-_." for c in cfg.name),
         f"name must be letters, digits, '-', '_' or '.', not {cfg.name!r}")
    need(0 <= cfg.seed < 2**63, "seed must be from 0 to 2**63 - 1")
    need(cfg.total_decisions > 0, "total_decisions must be positive")
    need(cfg.max_minutes >= 0, "max_minutes must be >= 0")
    need(cfg.display in ("auto", "rich", "plain", "none"), "display must be auto, rich, plain or none")
    need(cfg.log_every_s > 0, "log_every_s must be positive")
    tabs = training_tables(cfg)
    need(cfg.init_from == "" or Path(cfg.init_from).is_dir(),
         f"init_from: {cfg.init_from!r} is not a checkpoint folder")
    need(cfg.env.reward_scale > 0, "env.reward_scale must be positive")
    need(cfg.model.hidden >= 8 and cfg.model.layers >= 1, "model.hidden must be >= 8 and model.layers >= 1")
    need(cfg.model.critic in ("full", "obs"), f"model.critic must be full or obs, not {cfg.model.critic!r}")
    ro = cfg.rollout
    auto = ro.num_workers == AUTO
    need(auto or (isinstance(ro.num_workers, int) and 1 <= ro.num_workers <= MAX_WORKERS),
         f"rollout.num_workers must be {AUTO} or a whole number from 1 to {MAX_WORKERS:,}, not {ro.num_workers!r}")
    need(ro.envs_per_worker >= len(tabs),
         "rollout.envs_per_worker must give every (rules, players) pair at least one game")
    need(ro.steps_per_rollout >= 1, "rollout.steps_per_rollout must be at least 1")
    need(ro.envs_per_worker * ro.steps_per_rollout <= MAX_ROLLOUT_DECISIONS,
         f"rollout.envs_per_worker x steps_per_rollout must be at most {MAX_ROLLOUT_DECISIONS:,} decisions"
         f" (a worker holds ~4.5 KB per decision of its rollout)")
    need(0 <= ro.opponent_fraction <= 1 and 0 <= ro.heuristic_share <= 1,
         "rollout.opponent_fraction and rollout.heuristic_share must be in [0, 1]")
    need(ro.snapshot_every >= 1 and ro.pool_size >= 1, "rollout.snapshot_every and pool_size must be >= 1")
    need(ro.max_restarts >= -1, "rollout.max_restarts must be >= -1")
    need(ro.cpus_per_worker > 0, "rollout.cpus_per_worker must be positive")
    need(ro.place_timeout_s >= 0, "rollout.place_timeout_s must be >= 0")
    _check_opponent(ro.opponent, ro.opponent_temperature)
    pp = cfg.ppo
    need(pp.lr > 0, "ppo.lr must be positive")
    need(pp.sam_lesson_coef >= 0, "ppo.sam_lesson_coef must be >= 0")
    need(0 < pp.gamma <= 1 and 0 <= pp.gae_lambda <= 1, "ppo.gamma must be in (0, 1], ppo.gae_lambda in [0, 1]")
    need(pp.clip > 0 and pp.epochs >= 1 and pp.minibatch >= 1 and pp.batch_decisions >= 1,
         "ppo.clip, epochs, minibatch and batch_decisions must be positive")
    need(pp.batch_decisions <= MAX_BATCH_DECISIONS,
         f"ppo.batch_decisions must be at most {MAX_BATCH_DECISIONS:,} (the learner expands ~4.5 KB per decision)")
    need(pp.ent_coef >= 0 and pp.vf_coef >= 0 and pp.max_grad_norm > 0,
         "ppo.ent_coef and vf_coef must be >= 0, max_grad_norm > 0")
    _check_starts(cfg)
    le = cfg.learner
    need(DEVICE_RE.fullmatch(le.device) is not None,
         f"learner.device must be auto, cpu, cuda or cuda:N, not {le.device!r}")
    need(le.precision in ("fp32", "bf16"), f"learner.precision must be fp32 or bf16, not {le.precision!r}")
    need(le.max_policy_lag >= 0 and le.queue_rollouts >= 0 and le.correct_from_lag >= 0,
         "learner.max_policy_lag, queue_rollouts and correct_from_lag must be >= 0")
    need(le.is_clip > 0, "learner.is_clip must be positive")
    need(le.queue_rollouts == 0 or auto or le.queue_rollouts >= ro.num_workers,  # auto: sizing.py checks
         "learner.queue_rollouts must be 0 (num_workers + 1) or at least rollout.num_workers")
    ev = cfg.eval
    need(ev.every_updates >= 0 and ev.every_minutes >= 0 and ev.deals >= 1 and ev.final_deals >= 0,
         "eval.every_updates and every_minutes >= 0, eval.deals >= 1 and eval.final_deals >= 0 please")
    for o in ev.opponents:
        need(o in ("random", "heuristic", "snapshot") or Path(o).exists() or o.endswith(".onnx"),
             f"eval.opponents: unknown opponent {o!r} (random, heuristic, snapshot or a checkpoint folder)")
    if ev.rules:
        try:
            RuleSet.parse(ev.rules).check_players(eval_players(cfg))
        except RulesError as exc:
            raise ConfigError(f"eval: {exc}") from None
    ck = cfg.checkpoint
    need(ck.every_updates >= 1 and ck.keep >= 0, "checkpoint.every_updates must be >= 1, checkpoint.keep >= 0")
    need(ck.every_minutes >= 0, "checkpoint.every_minutes must be >= 0")
    be = cfg.belief
    need(be.deals >= 0 and be.epochs >= 1 and be.hidden >= 1,
         "belief.deals must be >= 0, belief.epochs and belief.hidden >= 1")
    _check_distill(cfg, len(tabs))
    _check_algorithm(cfg)


def _need(ok: bool, msg: str) -> None:
    if not ok:
        raise ConfigError(msg)


def _check_starts(cfg: TrainConfig) -> None:
    """The dmc section, and the warm start (which gives the first network, as init_from does)."""
    need = _need
    dm = cfg.dmc
    need(0 <= dm.epsilon <= 1, "dmc.epsilon must be from 0 to 1")
    need(dm.lr > 0 and dm.epochs >= 1 and dm.minibatch >= 1 and dm.value_coef >= 0 and dm.max_grad_norm > 0,
         "dmc.lr, epochs, minibatch and max_grad_norm must be positive, dmc.value_coef >= 0")
    need(1 <= dm.batch_decisions <= MAX_BATCH_DECISIONS, f"dmc.batch_decisions must be from 1 to {MAX_BATCH_DECISIONS:,}")
    ws = cfg.warm_start
    need(ws.decisions >= 0 and ws.envs >= 1 and ws.minibatch >= 1 and ws.lr > 0 and ws.value_coef >= 0,
         "warm_start.decisions and value_coef must be >= 0; envs, minibatch and lr positive")
    need(not (ws.decisions and cfg.init_from), "warm_start.decisions and init_from both give the first network:"
         " choose one")


def _check_algorithm(cfg: TrainConfig) -> None:
    """``algorithm`` names a class that can be imported; expert iteration goes with ``distill.enabled``."""
    from .algorithms import resolve  # the algorithms' parts load configs (rollout workers): imported here

    if cfg.distill.enabled and cfg.algorithm not in ("ppo", "expert_iteration"):
        raise ConfigError(f"distill.enabled=true is expert iteration (on PPO), not algorithm={cfg.algorithm}")
    if cfg.algorithm == "expert_iteration" and not cfg.distill.enabled:
        raise ConfigError("algorithm=expert_iteration needs distill.enabled=true (its settings)")
    resolve(cfg.algorithm)


def _check_distill(cfg: TrainConfig, tables: int) -> None:
    """The distill section: ranges, and what the search needs of the network and of the trainer."""
    d = cfg.distill

    def need(ok: bool, msg: str) -> None:
        if not ok:
            raise ConfigError(f"distill.{msg}")

    need(d.coef > 0, f"coef must be positive, not {d.coef}")
    need(d.temperature >= 0, f"temperature must be >= 0 lá (0: the search's move), not {d.temperature}")
    need(d.round_updates >= 1, f"round_updates must be at least 1, not {d.round_updates}")
    need(1 <= d.num_workers <= MAX_WORKERS, f"num_workers must be from 1 to {MAX_WORKERS:,}")
    need(d.cpus_per_worker > 0, "cpus_per_worker must be positive")
    need(d.envs_per_worker >= tables,
         "envs_per_worker must give every (rules, players) pair at least one game")
    need(d.decisions_per_request >= 1, "decisions_per_request must be at least 1")
    need(d.candidates >= 2, f"candidates must be at least 2 (one is no search), not {d.candidates}")
    need(d.worlds >= 1 and d.horizon >= -1, "worlds must be >= 1 and horizon >= -1")
    need(0 <= d.critic <= 100, f"critic is a percentage (0 to 100), not {d.critic}")
    need(0 <= d.heuristic_share <= 1, "heuristic_share must be in [0, 1]")
    need(d.minibatch >= 1 and d.batch_decisions >= 1, "minibatch and batch_decisions must be positive")
    need(d.buffer >= d.minibatch,
         f"buffer ({d.buffer:,}) must hold at least one minibatch ({d.minibatch:,})")
    need(d.reuse > 0, f"reuse must be positive, not {d.reuse}")
    need(d.belief_deals >= 0 and d.heldout >= 0, "belief_deals and heldout must be >= 0")
    need(d.precision in ("auto", "bf16", "fp32"), f"precision must be auto, bf16 or fp32, not {d.precision!r}")
    if not d.enabled:
        return
    need(not (d.horizon >= 0 and d.critic > 0 and cfg.model.critic != "full"),
         "critic > 0 needs the perfect-information critic (model.critic: full); use distill.critic=0"
         " or horizon=-1")
    need(not cfg.rollout.deterministic, "enabled does not run with rollout.deterministic (the search"
         " workers' requests are not scheduled in lanes)")


def _check_opponent(spec: str, temperature: float) -> None:
    """rollout.opponent is an agent spec (checked without loading it); a temperature only for a network."""
    try:
        kind = parse_spec(spec).kind
    except ValueError as exc:
        raise ConfigError(f"rollout.opponent: {exc}") from None
    if not temperature >= 0:
        raise ConfigError("rollout.opponent_temperature must be >= 0")
    if temperature and kind not in ("checkpoint", "onnx"):
        raise ConfigError(f"rollout.opponent_temperature applies to a network, not to {spec!r}")


def from_dict(d: dict[str, Any]) -> TrainConfig:
    """The config stored in a run folder or checkpoint (validated again)."""
    try:
        cfg = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(TrainConfig), OmegaConf.create(d)))
    except OmegaConfBaseException as exc:
        raise ConfigError(_one_line(exc)) from None
    validate(cfg)
    return cfg
