"""`hoptrace` command line: one module per command group, assembled here in the order
`hoptrace --help` lists them.

Every user error (bad question, bad corpus, unknown method, missing KB) is a
HopTraceError: printed as one line naming the problem, exit code 2.
"""
from __future__ import annotations

import argparse
import sys
import textwrap
from typing import Optional

from ..core.errors import HopTraceError
from . import ask, bench, build, evidence, experiments, kb, perf, plugins, reproduce, serve, showcase
from .common import load_plugins
from .flags import check_old_spellings

GROUPS = (build, ask, bench, experiments, evidence, plugins, reproduce, showcase, kb, perf, serve)

# `hoptrace --help` lists the commands in the order a comparison session uses them
# (docs/tutorial.md), each command's --help ends with one example, and tests/test_docs.py checks
# that every example parses and every command is listed once.
HELP_SECTIONS = (
    ("Build a KB and add questions", ("build", "questions", "kb")),
    ("Ask and benchmark", ("ask", "bench", "methods", "runs", "reproduce")),
    ("Judge and compare", ("judge", "qrels", "compare", "experiments", "judge-validity")),
    ("Export", ("export",)),
    ("The app", ("serve", "record-showcase", "record-experiment")),
    ("Measure HopTrace itself", ("bench-app", "bench-store", "bench-import", "bench-concurrency", "soak", "silver")),
)
EXAMPLES = {
    "build": "hoptrace build --corpus examples/tiny/corpus.json --out tiny --methods bm25,dense,griever",
    "questions": "hoptrace questions add --kb tiny examples/tiny/questions.csv --name answered",
    "questions add": "hoptrace questions add --kb tiny examples/tiny/more_questions.txt --name open",
    "questions list": "hoptrace questions list --kb tiny",
    "questions generate": "hoptrace questions generate --kb tiny --n 20 --estimate",
    "questions generated": "hoptrace questions generated --kb tiny gen",
    "questions review": "hoptrace questions review --kb tiny gen gen-1a2b3c4d5e keep",
    "questions validity": "hoptrace questions validity REAL_EXPERIMENT GENERATED_EXPERIMENT --kb tiny",
    "kb": "hoptrace kb info tiny",
    "kb info": "hoptrace kb info tiny",
    "ask": 'hoptrace ask --kb demo --method griever "Who founded the label that signed the band?"',
    "bench": "hoptrace bench --kb tiny --question-set answered --methods bm25,dense,composed,griever --ks 5",
    "methods": "hoptrace methods --plugin examples/my_retriever.py",
    "runs": "hoptrace runs export latest --method griever out/griever.trec --k 5",
    "runs export": "hoptrace runs export latest --method griever out/griever.trec --k 5",
    "runs import": "hoptrace runs import latest out/mine.trec --method mine",
    "reproduce": "hoptrace reproduce sag --llm-limit 20 --out sag.html",
    "judge": "hoptrace judge latest --depth 5 --judge answer",
    "qrels": "hoptrace qrels export latest out/tiny.qrels",
    "qrels export": "hoptrace qrels export latest out/tiny.qrels",
    "qrels import": "hoptrace qrels import latest out/tiny.qrels --source person",
    "compare": "hoptrace compare latest --metric p@5 --methods composed,griever",
    "experiments": "hoptrace experiments --last 5",
    "judge-validity": "hoptrace judge-validity latest --judge answer",
    "export": "hoptrace export --file out/spans.jsonl --experiment latest",
    "serve": "hoptrace serve --port 7860",
    "record-showcase": "hoptrace record-showcase --methods grasp --update",
    "record-experiment": "hoptrace record-experiment --minutes 60",
    "bench-app": "hoptrace bench-app --first-start",
    "bench-store": "hoptrace bench-store --sizes 10000,100000",
    "bench-import": "hoptrace bench-import --lines 1000000",
    "bench-concurrency": "hoptrace bench-concurrency --methods sag,gear --limit 16 --levels 1,8",
    "soak": "hoptrace soak --minutes 30 --users 20 --llm-users 2",
    "silver": "hoptrace silver --kb demo",
}


class _Parser(argparse.ArgumentParser):
    """The top-level parser: its help lists the commands by section, not as one long list."""

    sub: argparse._SubParsersAction

    def format_help(self) -> str:
        helps = {a.dest: (a.help or "").replace("%%", "%") for a in self.sub._choices_actions}
        width = max(len(n) for n in helps) + 2
        wrap = textwrap.TextWrapper(width=100, initial_indent="", subsequent_indent=" " * (width + 2))
        lines = [f"usage: {self.prog} COMMAND [options]   ({self.prog} COMMAND --help: its options and an example)",
                 "", self.description or ""]
        for title, names in HELP_SECTIONS:
            lines += ["", f"{title}:"]
            lines += [wrap.fill(f"  {n:<{width}}{helps[n]}") for n in names]
        lines += ["", "A session step by step: docs/tutorial.md"]
        return "\n".join(lines) + "\n"


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="hoptrace", description="Watch multi-hop retrievers work, stage by stage.")
    sub = p.sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                   parser_class=argparse.ArgumentParser)
    for group in GROUPS:
        group.add_parsers(sub)
    for name, parser in commands(p):
        if name in EXAMPLES:
            parser.epilog = f"example:\n  {EXAMPLES[name]}"
            parser.formatter_class = argparse.RawDescriptionHelpFormatter
    return p


def commands(parser: argparse.ArgumentParser, prefix: str = ""):
    """(name, parser) of every command and sub-command ("qrels export"), in the order defined."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                full = f"{prefix} {name}".strip()
                yield full, child
                yield from commands(child, full)


def main(argv: Optional[list[str]] = None) -> int:
    try:
        # An old spelling that now means something else is named before argparse reads it (cli/flags.py).
        check_old_spellings(sys.argv[1:] if argv is None else argv)
    except HopTraceError as e:
        print(f"hoptrace: error: {e}", file=sys.stderr)
        return e.exit_code
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
