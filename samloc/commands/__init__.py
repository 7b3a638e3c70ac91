"""Every ``samloc`` subcommand: one module each, holding its parser and its ``main(argv) -> int``.

This is the only place with argparse. A command parses its arguments (and
rule sets, configs, agent specs: the edges), calls the library with typed
values, and prints what the library returns. The library layers below
(training → agents → sam_env) hold no ``main``.
"""
