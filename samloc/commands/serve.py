"""`samloc serve`: a bot over HTTP (PROTOCOL §4) and a page to play against it (:mod:`agents.serving`)."""

from __future__ import annotations

import argparse
import ipaddress
import sys

from agents.serving.bots import DEADLINE_MS, Bots, refuse_loop
from agents.serving.edge import listening_sockets
from agents.serving.workers import serve

from .args import Parser, agent_spec, deadline_ms, non_negative, nonempty, parse, port, positive, temperature


def trusted_proxy(text: str) -> list[str]:
    """argparse type: ``IP[,IP…]``, addresses or networks (``10.0.0.0/8``) of the reverse proxies whose
    ``X-Forwarded-For`` names the client; ``*`` is refused (anyone could then forge one)."""
    out = []
    for item in text.split(","):
        try:
            out.append(str(ipaddress.ip_network(item.strip(), strict=False)))
        except ValueError:
            shown = item.strip() if len(item.strip()) <= 40 else item.strip()[:37] + "..."
            raise argparse.ArgumentTypeError(f"expected IP addresses or networks separated by commas, not"
                                             f" {shown!r}") from None
    return out


def _parser() -> Parser:
    p = Parser(prog="samloc serve",
               description="A bot over HTTP (PROTOCOL §4) and a page to play against it.")
    p.add_argument("--agent", action="append", type=agent_spec, default=None,
                   help="random, heuristic, a checkpoint directory (DIR+search: with play-time search),"
                        " an .onnx file or http://...; repeat it to serve several bots, each table played by"
                        " the one measured strongest there; default: every shipped bot, the .onnx files of"
                        " the repository's checkpoints/ folder ($SAMLOC_CHECKPOINTS, else ./checkpoints, else"
                        " the checkout's; heuristic if it holds none). A wheel holds no checkpoints: from a"
                        " wheel give --agent, or set SAMLOC_CHECKPOINTS to a clone's checkpoints/")
    p.add_argument("--host", type=nonempty, default="127.0.0.1")
    p.add_argument("--port", type=port, default=8000, help="0: any free port (default 8000)")
    p.add_argument("--temperature", type=temperature, default=0.0,
                   help="0 = greedy (default); T > 0 samples from p^(1/T), still reproducible per request")
    p.add_argument("--seed", type=non_negative, default=0, help="seed of every random choice (default 0)")
    p.add_argument("--deadline-ms", type=deadline_ms, default=DEADLINE_MS,
                   help="time bound of a searched decision (DIR+search) where its spec gives none: the best"
                        f" move found by then is played (default {DEADLINE_MS}; 0: none, answers then"
                        " independent of the machine's speed)")
    p.add_argument("--allow-client-seed", action="store_true",
                   help="let /play/api/new choose the seed of the deals (tests and demos: whoever knows it"
                        " can compute every bot's hand)")
    p.add_argument("--workers", type=positive, default=1,
                   help="processes answering on the port, each with its own copy of the bots and its own"
                        " socket (the kernel spreads the connections); the play page's sessions are shared"
                        " (default 1)")
    p.add_argument("--trusted-proxy", action="append", type=trusted_proxy, default=None, metavar="IP[,IP...]",
                   help="the reverse proxies (addresses or networks) whose X-Forwarded-For names the client;"
                        " everyone else's is ignored, and a request's client, whose play-page quota it counts"
                        " against, is the connection's address (default: none, so no header is trusted)")
    p.add_argument("--log-level", default="warning",
                   choices=["critical", "error", "warning", "info", "debug"])
    return p


def main(argv: list[str]) -> int:
    args = parse(_parser().parse_args, argv)
    if isinstance(args, int):
        return args
    try:  # every model is loaded, checked and warmed here, before a port is opened or a worker started
        refuse_loop(args.agent, args.host, args.port)
        bots = Bots.load(args.agent, seed=args.seed, temperature=args.temperature,
                         deadline_ms=args.deadline_ms)
    except (ValueError, OSError, ImportError) as exc:
        print(f"samloc serve: {exc}", file=sys.stderr)
        return 2
    for note in [bots.note] + [b.note for b in bots.bots]:
        if note:
            print(f"samloc serve: {note}")
    try:
        socks = listening_sockets(args.host, args.port, args.workers)
    except OSError as exc:
        print(f"samloc serve: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 2
    for b in bots.bots:
        print(f"samloc serve: agent {b.name} ({b.shown})")
    print(f"samloc serve: http://{args.host}:{args.port}/play to play, POST /v1/act for bots"
          + (f"; {args.workers} worker processes" if args.workers > 1 else ""))
    proxies = [ip for group in args.trusted_proxy or [] for ip in group]
    return serve(bots, socks, host=args.host, port=args.port, log_level=args.log_level,
                 allow_client_seed=args.allow_client_seed, specs=args.agent, trusted_proxies=proxies)
