"""sam_env: the Sâm lốc rules engine (RULES.md), its records (PROTOCOL.md) and environments."""

from . import jitcache

jitcache.refresh(__name__)  # before any kernel loads: numba's caches must match these sources

from .actions import ACTION_NAMES, ACTION_TABLE_VERSION, NUM_ACTIONS, move_str, parse_move  # noqa: E402
from .cards import DEFAULT_PLAYERS, MAX_PLAYERS, MIN_PLAYERS  # noqa: E402
from .rules import DEFAULT_PRESET, PRESET_NAMES, RuleSet, RulesError  # noqa: E402
from .table import Table  # noqa: E402

__all__ = ["ACTION_NAMES", "ACTION_TABLE_VERSION", "DEFAULT_PLAYERS", "DEFAULT_PRESET", "MAX_PLAYERS",
           "MIN_PLAYERS", "NUM_ACTIONS", "PRESET_NAMES", "RuleSet", "RulesError", "Table", "move_str",
           "parse_move"]
