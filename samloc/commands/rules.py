"""``samloc rules [PRESET] [--set key=value ...]``: list presets, or show one as YAML."""

from __future__ import annotations

import argparse
import sys

import yaml

from sam_env.rules import PRESET_NAMES, RuleSet, RulesError, yaml_value

from .args import EXIT_PIPE, Parser, command, drop_stdout, fail


def parser() -> Parser:
    ap = Parser(prog="samloc rules", description=__doc__)
    ap.add_argument("preset", nargs="?", help="show this preset's parameters as YAML")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a parameter (YAML value), e.g. --set passed_can_chop=false")
    return ap


def overrides(items: list[str]) -> dict[str, object]:
    """``--set KEY=VALUE`` arguments as parameter values (YAML)."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise RulesError(f"--set needs KEY=VALUE, not {item!r}")
        out[key.strip()] = yaml_value(value, f"--set {key.strip()[:60]}")  # RulesError, not RecursionError
    return out


def listing() -> str:
    return "".join(f"{name:<14} {r.max_players} players max,"
                   f" straights {'A-2-3…' if r.ace_low_straights else '3…A'},"
                   f" báo 1 {r.bao_mot}, finish with 2 {r.finish_with_two}\n"
                   for name, r in ((n, RuleSet.preset(n)) for n in PRESET_NAMES))


@command(parser)
def main(args: argparse.Namespace) -> int:
    try:
        text = listing() if args.preset is None else \
            RuleSet.parse({"preset": args.preset, **overrides(args.set)}).to_yaml()
    except (RulesError, yaml.YAMLError) as exc:
        return fail("samloc rules", exc)
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:  # `samloc rules online | head -3`: the reader has all it wants
        drop_stdout()
        return EXIT_PIPE
    return 0
