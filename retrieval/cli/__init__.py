"""`hoptrace` command line: one module per command group, assembled here in the order
`hoptrace --help` lists them.

Every user error (bad question, bad corpus, unknown method, missing KB) is a
HopTraceError: printed as one line naming the problem, exit code 2.
"""
from __future__ import annotations

import argparse
import sys
from typing import Optional

from ..core.errors import HopTraceError
from . import ask, bench, build, evidence, experiments, kb, perf, plugins, reproduce, serve, showcase
from .common import load_plugins

GROUPS = (build, ask, bench, experiments, evidence, plugins, reproduce, showcase, kb, perf, serve)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hoptrace", description="Watch multi-hop retrievers work, stage by stage.")
    sub = p.add_subparsers(dest="command", required=True)
    for group in GROUPS:
        group.add_parsers(sub)
    return p


def main(argv: Optional[list[str]] = None) -> int:
    args = _parser().parse_args(argv)
    commands = {name: cmd for group in GROUPS for name, cmd in group.COMMANDS.items()}
    try:
        load_plugins(args)
        return commands[args.command](args)
    except HopTraceError as e:
        print(f"hoptrace: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("hoptrace: interrupted; run the same command again to resume", file=sys.stderr)
        return 130
