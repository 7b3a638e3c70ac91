"""Loading a training config: defaults ← YAML file (a path, or a name of ``training/configs``) ←
``key=value`` overrides, then :func:`validate`, the checks that types alone cannot express.  Every
mistake is one :class:`~training.config.ConfigError` line.

The schema is :class:`~training.config.TrainConfig`'s keys plus a section per algorithm and stage
(:func:`training.algorithms.sections`: the registered ones, and an outside ``algorithm``'s, which the
layers name); the loaded config keeps those sections in ``TrainConfig.sections``."""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import re
import typing
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf
from omegaconf.errors import ConfigKeyError, OmegaConfBaseException

from agents.registry import make_agent, parse_spec

from .algorithms import STAGES, resolve, sections
from .config import (AUTO, CONFIG_DIR, MAX_WORKERS, ConfigError, EvalConfig, RolloutConfig, TrainConfig,
                     core_fields, eval_table, need, to_dict, training_tables)


#: A layer of settings: what to call it (a file, or an override's key), its plain containers, and an
#: override's value as typed (None for a file).
Layer = tuple[str, Any, "str | None"]
#: Where a key that is not one is sent: every key of the config, with its doc.
KEYS_HINT = "every key, with its doc: samloc train --print-config"


def _as_lists(node: Any, cls: type, where: str = "") -> Any:
    """A layer of settings (plain containers) in which a scalar given for a list field becomes a
    one-element list (``env.players=3`` means ``[3]``), and one table given for ``env.tables`` a list of
    one; a scalar for ``env.tables``, and a value of the wrong shape or type anywhere
    (:func:`_check_value`), is refused in plain words."""
    if not isinstance(node, dict):
        return node
    hints = typing.get_type_hints(cls)
    out = {}
    for key, value in node.items():
        hint = hints.get(key) if isinstance(key, str) else None
        name = f"{where}{key}"
        _check_value(name, hint, value)
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


def _check_value(name: str, hint: Any, value: Any) -> None:
    """A value whose shape or type its field cannot take, refused naming the key: a mapping or a list where
    neither goes, lists or mappings inside a list of values, a boolean that is not true or false (OmegaConf
    takes 2 and -1 as true), true or false for a number, an integer past 64 bits.  ``${...}`` is
    OmegaConf's."""
    if value is None or hint is None or hint is Any or isinstance(value, str) and value.startswith("${"):
        return
    origin = typing.get_origin(hint)
    item = typing.get_args(hint)[0] if origin is list else None
    table_list = item is not None and dataclasses.is_dataclass(item)
    if isinstance(value, dict) and not (dataclasses.is_dataclass(hint) or origin is dict or table_list):
        raise ConfigError(f"{name} takes {_shape(hint)}, not a mapping ({_shown(value)})")
    if isinstance(value, list) and origin is not list:
        raise ConfigError(f"{name} takes {_shape(hint)}, not a list ({_shown(value)})")
    if isinstance(value, list) and not table_list and any(isinstance(v, (list, dict)) for v in value):
        raise ConfigError(f"{name} takes a list of {item.__name__} values, not {_shown(value)}")
    if hint is bool and not isinstance(value, bool):
        raise ConfigError(f"{name} takes true or false, not {_shown(value)}")
    if hint in (int, float) and isinstance(value, bool):
        raise ConfigError(f"{name} takes a number, not {_shown(value)}")
    if hint is int and isinstance(value, int) and not -2**63 <= value < 2**63:
        raise ConfigError(f"{name} takes a 64-bit integer (at most 2**63 - 1 either way),"
                          f" not {_shown(value)}")


def _hint(key: str, cls: type) -> Any:
    """The type of the field of schema ``cls`` that a dotted key names (None if it names none)."""
    hint: Any = cls
    for part in key.strip().split("."):
        if not dataclasses.is_dataclass(hint):
            return None
        hint = typing.get_type_hints(hint).get(part)
    return hint


def _shape(hint: Any) -> str:
    """What a field takes, in words."""
    origin = typing.get_origin(hint)
    if dataclasses.is_dataclass(hint):
        return "a section of settings (key: value)"
    if origin is dict:
        return "a mapping (key: value)"
    if origin is list:
        return "a list"
    return f"a {getattr(hint, '__name__', 'value')}"


def _shown(value: Any) -> str:
    """A value as a message quotes it: at most 40 characters."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


@functools.lru_cache(maxsize=None)
def schema(algorithm: str) -> type:
    """The structured schema of a config whose ``algorithm`` is this: TrainConfig's keys, then a field per
    section (:func:`training.algorithms.sections`), each a dataclass of defaults."""
    hints = typing.get_type_hints(TrainConfig)
    own = [(f.name, hints[f.name], dataclasses.field(default=f.default)
            if f.default_factory is dataclasses.MISSING
            else dataclasses.field(default_factory=f.default_factory))
           for f in core_fields(TrainConfig)]
    secs = [(name, cls, dataclasses.field(default_factory=cls)) for name, cls in sections(algorithm).items()]
    return dataclasses.make_dataclass("TrainConfig", own + secs)


@functools.lru_cache(maxsize=None)
def _defaults(algorithm: str) -> Any:
    """The typed defaults of :func:`schema`, built once per algorithm (the slowest step of a load); a merge
    copies them, never changes them."""
    return OmegaConf.structured(schema(algorithm))


def _algorithm(layers: list[Layer]) -> str:
    """The ``algorithm`` the layers (plain containers, the last one's word last) ask for."""
    spec = TrainConfig.algorithm
    for _, layer, _ in layers:
        if isinstance(layer, dict) and "algorithm" in layer:
            spec = layer["algorithm"]
    return str(spec)


def _to_config(obj: Any) -> TrainConfig:
    """A merged schema object as a :class:`TrainConfig` with its sections."""
    values = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    own = {f.name for f in core_fields(TrainConfig)}
    return TrainConfig(**{k: v for k, v in values.items() if k in own},
                       sections={k: v for k, v in values.items() if k not in own})


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> TrainConfig:
    """Defaults ← YAML file ← ``key=value`` overrides, validated.  Raises ConfigError."""
    layers = [] if path is None else [_file_layer(path)]
    cfg = _merge(layers + [_override(item) for item in overrides or []])
    validate(cfg)
    return cfg


#: Keys that moved to an algorithm's section: (old section, key) -> new section.  A file (an older run's
#: config.yaml on --resume) has them moved; an override names the new key.
MOVED = {("learner", "correct_from_lag"): "ppo", ("learner", "is_clip"): "ppo"}


def _moved(layer: Layer) -> Layer:
    """``layer`` with the :data:`MOVED` keys in their new sections (a file's own word there wins);
    ConfigError for an override that gives an old key."""
    where, node, text = layer
    if not isinstance(node, dict):
        return layer
    for (old, key), new in MOVED.items():
        part = node.get(old)
        if not (isinstance(part, dict) and key in part):
            continue
        if text is not None:
            raise ConfigError(f"{old}.{key} is now {new}.{key} (a setting of {new}'s loss):"
                              f" give {new}.{key}={text}")
        value = part.pop(key)
        if node.get(new) is None:
            node[new] = {}
        if isinstance(node[new], dict):  # (a section of the wrong shape: the merge refuses it)
            node[new].setdefault(key, value)
    return layer


#: The algorithm ``distill.enabled: true`` names (the older way to ask for it, kept as its alias).
EXPERT = "expert_iteration"


def _expert_alias(layers: list[Layer]) -> list[Layer]:
    """The layers with ``algorithm`` and ``distill.enabled`` agreeing: ``distill.enabled: true`` asks for
    ``algorithm: expert_iteration`` (on PPO; ``false``, after a layer that asked for it, for PPO again), and
    ``algorithm`` sets ``distill.enabled`` to whether it is expert iteration, layer by layer, as the later
    word wins.  A layer that asks for expert iteration beside another algorithm is left as it is: the
    section's check refuses it in one line."""
    current = TrainConfig.algorithm
    for _, node, _ in layers:
        if not isinstance(node, dict):
            continue
        part = node.get("distill")
        enabled = part.get("enabled") if isinstance(part, dict) else None
        spec = node.get("algorithm")
        if spec is None and enabled is None:
            continue
        if spec is not None:
            if enabled is True and spec not in ("ppo", EXPERT):
                continue
            current = EXPERT if enabled is True else str(spec)
        elif enabled is True:
            if current not in ("ppo", EXPERT):
                continue
            current = EXPERT
        elif current == EXPERT:
            current = "ppo"
        node["algorithm"] = current
        if part is None:
            node["distill"] = part = {}
        if isinstance(part, dict):  # (a section of the wrong shape: the merge refuses it)
            part["enabled"] = current == EXPERT
    return layers


def _merge(layers: list[Layer]) -> TrainConfig:
    """The typed defaults of the algorithm the layers name ← each layer, one at a time, so that an error
    names the key or file that made it."""
    layers = _expert_alias([_moved(layer) for layer in layers])
    algorithm = _algorithm(layers)
    cls = schema(algorithm)  # the sections of the algorithm the layers name
    merged = _defaults(algorithm)
    for where, layer, text in layers:
        if text is not None and _hint(where, cls) is bool and text.strip().lower() not in ("true", "false"):
            # YAML reads yes as true
            raise ConfigError(f"{where} takes true or false, not {_shown(text)[1:-1]}")
        try:
            merged = OmegaConf.merge(merged, OmegaConf.create(_as_lists(layer, cls)))
        except ConfigError:
            raise
        except Exception as exc:  # OmegaConf's errors, and a TypeError where container kinds differ
            msg = _one_line(exc)
            msg = msg if where in msg else f"{where}: {msg}"
            if isinstance(exc, ConfigKeyError):  # a key the config has not: where the keys are listed
                msg += f" ({KEYS_HINT})"
            raise ConfigError(msg) from None
    try:
        return _to_config(OmegaConf.to_object(merged))
    except OmegaConfBaseException as exc:
        raise ConfigError(_one_line(exc)) from None


def shipped_configs() -> list[str]:
    """The names ``--config`` takes (``training/configs/*.yaml``)."""
    return sorted(p.stem for p in CONFIG_DIR.glob("*.yaml"))


def _file_layer(path: str | Path) -> Layer:
    """A YAML config (a path, or a name of ``training/configs``) as a layer."""
    p = Path(path)
    try:
        if not p.exists() and not p.suffix and (CONFIG_DIR / f"{p}.yaml").exists():
            p = CONFIG_DIR / f"{p}.yaml"
        found = p.is_file()
    except OSError as exc:  # a name too long for the file system
        raise ConfigError(f"config file {_shown(str(path))}: {exc.strerror}") from None
    if not found:
        raise ConfigError(f"config file {_shown(str(path))} not found (the shipped configs, by name:"
                          f" {', '.join(shipped_configs())}; or a YAML file's path)")
    try:
        loaded = OmegaConf.load(p)
    except Exception as exc:  # yaml errors carry several lines
        raise ConfigError(f"cannot read config {p}: {str(exc).splitlines()[0]}") from None
    if not OmegaConf.is_dict(loaded):
        raise ConfigError(f"config {p} must be a mapping of settings (name: ..., ppo: {{...}}), "
                          f"not a {type(OmegaConf.to_container(loaded)).__name__}")
    return f"config {p}", OmegaConf.to_container(loaded, resolve=False), None


def _override(item: str) -> Layer:
    """One ``key=value`` override as a layer; ConfigError naming the key when its value is not YAML."""
    key, sep, value = item.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"override {_shown(item)} must look like key=value (e.g. ppo.lr=1e-4)")
    try:
        conf = OmegaConf.from_dotlist([item])
    except Exception as exc:  # yaml's errors (several lines), OmegaConf's
        raise ConfigError(f"{key}: {_shown(value)} is not a YAML value ({_one_line(exc)})") from None
    return key.strip(), OmegaConf.to_container(conf, resolve=False), value


def _one_line(exc: Exception) -> str:
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    msg = lines[0] if lines else type(exc).__name__
    key = getattr(exc, "full_key", None)
    if key and key not in msg:
        msg = f"{key}: {msg}"
    return msg


MAX_ROLLOUT_DECISIONS = 1 << 20   # a worker holds ~4.5 KB per decision of its rollout: 4.7 GB (and MAX_*)
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
    """Range and name checks that types alone cannot express: the config's, then each stage's."""
    _check_settings(cfg)
    _check_stages(cfg)


def _check_settings(cfg: TrainConfig) -> None:
    """The checks of one config as it runs (a stage's too)."""
    bad = _non_finite(to_dict(cfg))
    need(not bad, f"{bad} must be a finite number")
    need(bool(cfg.name) and all(c.isalnum() or c in "-_." for c in cfg.name),
         f"name must be letters, digits, '-', '_' or '.', not {cfg.name!r}")
    need(0 <= cfg.seed < 2**63, "seed must be from 0 to 2**63 - 1")
    need(cfg.total_decisions > 0, "total_decisions must be positive")
    need(cfg.max_minutes >= 0, "max_minutes must be >= 0")
    need(cfg.display in ("auto", "rich", "plain", "none"), "display must be auto, rich, plain or none")
    need(cfg.log_every_s > 0, "log_every_s must be positive")
    tabs = training_tables(cfg.env)
    need(cfg.init_from == "" or os.path.isdir(cfg.init_from),
         f"init_from: {cfg.init_from!r} is not a checkpoint folder")
    need(cfg.env.reward_scale > 0, "env.reward_scale must be positive")
    need(cfg.model.hidden >= 8 and cfg.model.layers >= 1, "model.hidden must be >= 8 and model.layers >= 1")
    need(cfg.model.critic in ("full", "obs"), f"model.critic must be full or obs, not {cfg.model.critic!r}")
    ro = cfg.rollout
    auto = ro.num_workers == AUTO
    need(auto or (isinstance(ro.num_workers, int) and 1 <= ro.num_workers <= MAX_WORKERS),
         f"rollout.num_workers must be {AUTO} or a whole number from 1 to {MAX_WORKERS:,},"
         f" not {ro.num_workers!r}")
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
    le = cfg.learner
    need(DEVICE_RE.fullmatch(le.device) is not None,
         f"learner.device must be auto, cpu, cuda or cuda:N, not {le.device!r}")
    need(le.precision in ("auto", "fp32", "bf16"),
         f"learner.precision must be auto, fp32 or bf16, not {le.precision!r}")
    need(le.max_policy_lag >= 0 and le.queue_rollouts >= 0 and le.guard_every >= 0,
         "learner.max_policy_lag, queue_rollouts and guard_every must be >= 0")
    need(le.queue_rollouts == 0 or auto or le.queue_rollouts >= ro.num_workers,  # auto: sizing.py checks
         "learner.queue_rollouts must be 0 (num_workers + 1) or at least rollout.num_workers")
    ev = cfg.eval
    need(ev.num_workers == AUTO or (isinstance(ev.num_workers, int) and 1 <= ev.num_workers <= MAX_WORKERS),
         f"eval.num_workers must be {AUTO} or a whole number from 1 to {MAX_WORKERS:,},"
         f" not {ev.num_workers!r}")
    need(ev.every_updates >= 0 and ev.every_minutes >= 0 and ev.deals >= 1 and ev.final_deals >= 0,
         "eval.every_updates and every_minutes >= 0, eval.deals >= 1 and eval.final_deals >= 0 please")
    for o in ev.opponents:
        need(o in ("random", "heuristic", "snapshot") or os.path.exists(o) or o.endswith(".onnx"),
             f"eval.opponents: unknown opponent {o!r} (random, heuristic, snapshot or a checkpoint folder)")
    eval_table(cfg.env, cfg.eval)
    ck = cfg.checkpoint
    need(ck.every_updates >= 1 and ck.keep >= 0,
         "checkpoint.every_updates must be >= 1, checkpoint.keep >= 0")
    need(ck.every_minutes >= 0, "checkpoint.every_minutes must be >= 0")
    be = cfg.belief
    need(be.deals >= 0 and be.epochs >= 1 and be.hidden >= 1,
         "belief.deals must be >= 0, belief.epochs and belief.hidden >= 1")
    for name, settings in cfg.sections.items():
        settings.check(cfg, name)
    resolve(cfg.algorithm)


#: The keys a stage may not change: the network, the tables, the budgets, the seed, where the run writes,
#: what it does after training, and the warm start (it runs once, before the first update).
RUN_KEYS = ("name", "seed", "total_decisions", "max_minutes", "out_dir", "display", "log_every_s",
            "init_from", "env", "model", "checkpoint", "belief", "stages", "warm_start")


def _nested(settings: dict[str, Any]) -> dict[str, Any]:
    """A stage's settings with dotted keys (``ppo.lr: 1e-4``) as nested mappings (``ppo: {lr: 1e-4}``)."""
    out: dict[str, Any] = {}
    for key, value in settings.items():
        node = out
        *parents, last = str(key).split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = _nested(value) if isinstance(value, dict) else value
    return out


def stage_config(cfg: TrainConfig, index: int) -> TrainConfig:
    """The config stage ``index`` runs: the run's ← every stage's settings up to it, in order (applying
    them again changes nothing, so the config of a run in any stage gives the same).  ConfigError naming
    the stage."""
    layers: list[Layer] = [("the run's config", to_dict(cfg), None)]
    for k, st in enumerate(cfg.stages[:index + 1]):
        settings = _nested(st.settings)
        bad = next((key for key in settings if key in RUN_KEYS), None)
        need(bad is None, f"stages[{k}].settings.{bad}: a stage changes algorithm, rollout, learner, eval and"
             f" the algorithms' sections, not the run's {bad}")
        need("device" not in (settings.get("learner") or {}),
             f"stages[{k}].settings.learner.device: the learner stays on its device for the whole run")
        need("pool_size" not in (settings.get("rollout") or {}),
             f"stages[{k}].settings.rollout.pool_size: the pool of past selves is the run's,"
             " whatever the stage")
        layers.append((f"stages[{k}].settings", settings, None))
    out = _merge(layers)
    try:
        _check_settings(out)
    except ConfigError as exc:
        raise ConfigError(f"stages[{index}] ({cfg.stages[index].name}): {exc}") from None
    return out


def _check_stages(cfg: TrainConfig) -> None:
    """Each stage's name, what ends it, and the config it runs (:func:`stage_config`)."""
    stages, total = cfg.stages, 0.0
    if not stages:
        return
    need(not cfg.rollout.deterministic, "stages do not run with rollout.deterministic (a switch rebuilds the"
         " workers outside the lanes)")
    names = [s.name for s in stages]
    for i, s in enumerate(stages):
        where, last = f"stages[{i}]", i == len(stages) - 1
        need(bool(s.name) and all(c.isalnum() or c in "-_." for c in s.name),
             f"{where}.name must be letters, digits, '-', '_' or '.', not {s.name!r}")
        need(names.count(s.name) == 1, f"{where}.name: {s.name!r} names two stages")
        need(0 <= s.share <= 1, f"{where}.share must be from 0 to 1 (of max_minutes), not {s.share:g}")
        total += s.share
        need(total <= 1 + 1e-9, f"{where}.share: the shares so far add up to {total:g},"
             " more than the whole of max_minutes (1)")
        need(not s.share or cfg.max_minutes > 0,
             f"{where}.share is a share of max_minutes: give max_minutes > 0")
        need(s.updates >= 0 and s.plateau_evals >= 0 and s.plateau_gain >= 0,
             f"{where}.updates, plateau_evals and plateau_gain must be >= 0")
        need(last or bool(s.share or s.updates or s.plateau_evals), f"{where} ({s.name}): nothing ends it;"
             " give share, updates or plateau_evals (only the last stage runs until the run stops)")
        need(not last or not (s.updates or s.plateau_evals), f"{where} ({s.name}): the last stage runs until"
             " the run stops; give it no updates or plateau_evals")
        staged = stage_config(cfg, i)
        if s.plateau_evals:
            ev = staged.eval
            need(bool(ev.every_updates or ev.every_minutes), f"{where}.plateau_evals reads the periodic"
                 " evaluation: give eval.every_updates or eval.every_minutes")
            need(s.plateau_opponent in ev.opponents, f"{where}.plateau_opponent: {s.plateau_opponent!r}"
                 f" is not one of eval.opponents ({', '.join(ev.opponents)})")


def unread_sections(cfg: TrainConfig) -> dict[str, list[str]]:
    """The sections no algorithm of this run reads (``ppo`` under ``algorithm=dmc`` or an outside one; a
    run in stages reads each stage's algorithm's), each with its keys the config set away from their
    defaults: settings that change nothing, which ``--print-config`` and ``--dry-run`` name."""
    read = set(STAGES)  # the warm start runs beside any algorithm
    for cls in _run_algorithms(cfg).values():
        read |= {cls.section, *cls.reads}
    out = {}
    for name, settings in cfg.sections.items():
        if name not in read:
            default = type(settings)()
            out[name] = [f"{name}.{f.name}" for f in dataclasses.fields(settings)
                         if getattr(settings, f.name) != getattr(default, f.name)]
    return out


def unread_note(cfg: TrainConfig) -> str:
    """:func:`unread_sections` in a sentence ('' when every section is read)."""
    unread = unread_sections(cfg)
    if not unread:
        return ""
    parts = [name + (f" (set here: {', '.join(keys)})" if keys else "") for name, keys in unread.items()]
    return (f"{', '.join(parts)}: algorithm {', '.join(_run_algorithms(cfg))} does not read them"
            f" (their settings change nothing in this run)")


def _run_algorithms(cfg: TrainConfig) -> dict[str, Any]:
    """The algorithm of the run and of each of its stages, by what the config calls it."""
    out = {}
    for c in [cfg, *(stage_config(cfg, i) for i in range(len(cfg.stages)))]:
        out[c.algorithm] = resolve(c.algorithm)
    return out


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


def check_agents(ev: EvalConfig, ro: RolloutConfig) -> None:
    """Load every agent a config names (``eval.opponents``, ``rollout.opponent``) once, so that one that is
    not an agent (a file that is not a network, a missing .onnx, a folder with no checkpoint) is refused in
    one ConfigError line before a run starts, not when the run first plays it."""
    named = [("eval.opponents", o) for o in ev.opponents if o != "snapshot"]
    for key, spec in named + [("rollout.opponent", ro.opponent)]:
        try:
            make_agent(spec).close()
        except Exception as exc:  # torch's, safetensors' and onnxruntime's own errors for what is not a
            # network
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise ConfigError(f"{key}: {spec} is not an agent that can be loaded ({first})") from None


def from_dict(d: dict[str, Any], overrides: list[str] | None = None) -> TrainConfig:
    """The config stored in a run folder or checkpoint, with ``overrides`` (validated again)."""
    cfg = _merge([("the stored config", d, None)] + [_override(item) for item in overrides or []])
    validate(cfg)
    return cfg
