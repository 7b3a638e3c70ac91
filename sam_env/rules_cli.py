"""``samloc rules [PRESET] [--set key=value ...]``: list presets, or show one as YAML."""

from __future__ import annotations

import argparse
import sys

import yaml

from .rules import PRESET_NAMES, RuleSet, RulesError


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="samloc rules", description=__doc__)
    ap.add_argument("preset", nargs="?", help="show this preset's parameters as YAML")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a parameter (YAML value), e.g. --set passed_can_chop=false")
    try:
        args = ap.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    if args.preset is None:
        for name in PRESET_NAMES:
            r = RuleSet.preset(name)
            print(f"{name:<14} {r.max_players} players max, straights {'A-2-3…' if r.ace_low_straights else '3…A'},"
                  f" báo 1 {r.bao_mot}, finish with 2 {r.finish_with_two}")
        return 0
    try:
        overrides = {}
        for item in args.set:
            key, sep, value = item.partition("=")
            if not sep:
                raise RulesError(f"--set needs KEY=VALUE, not {item!r}")
            overrides[key.strip()] = yaml.safe_load(value)
        rules = RuleSet.parse({"preset": args.preset, **overrides})
    except (RulesError, yaml.YAMLError) as exc:
        print(f"samloc rules: {exc}", file=sys.stderr)
        return 2
    print(rules.to_yaml(), end="")
    return 0
