"""One meaning per flag across `hoptrace`'s commands (docs/usage.md, "Flags"):

- `--json` is a switch: the command's result goes to standard output as JSON, and its other
  lines to standard error, so `hoptrace X --json | jq` works for every X.
- `--out PATH` writes a file (bench: PATH and a .csv and .html beside it; compare and
  reproduce: .json or .html by PATH's suffix, repeatable; build and record-*: what they make).
- `--questions FILE` names a questions file; a number of questions is `--question-count N`.
- `--limit N`: the first N questions, for every method; `--llm-limit N`: for the LLM methods
  only (reproduce); `experiments --last N` lists the N newest.
- `--set METHOD.KEY=VALUE` sets one method's setting (with one method, `KEY=VALUE` will do).
- `--answer` is the switch that ends runs with the answer step; a text is `--answer-text`, as a
  question's wording is `--question-text` (`--question` is a question's id, in compare); `--runs`
  names run ids (export), a number of them is `--run-count`.

An old spelling that would now mean something else fails with one line naming the new one
(OLD_SPELLINGS), before anything runs.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Optional, Sequence

from ..core.errors import ConfigError

# (command, old flag) → the new spelling. `--json PATH` is caught apart (json_took_a_path): the
# switch is still `--json`, only the path after it is old.
OLD_SPELLINGS = {
    ("record-showcase", "--questions"): "--question-count N (--questions names a file in every command)",
    ("record-experiment", "--questions"): "--question-count N (--questions names a file in every command)",
    ("record-experiment", "--llm-questions"): "--llm-question-count N",
    ("reproduce", "--questions-limit"): "--limit N (every row; --llm-limit N limits the LLM rows alone)",
    ("experiments", "--limit"): "--last N (--limit counts questions in every other command)",
    ("questions review", "--question"): "--question-text TEXT (--question names a question id in compare)",
    ("questions review", "--answer"): "--answer-text TEXT (--answer is a switch for the answer step in ask and bench)",
    ("bench-app", "--runs"): "--run-count N (--runs names run ids in export)",
}
# Commands of two words, whose old spellings are keyed by both.
TWO_WORDS = ("questions review",)
# Commands whose `--json` took a file to write before it became a switch; of them, those that take
# no positional argument, where any word after `--json` was its file.
JSON_WROTE_A_FILE = ("bench", "compare", "reproduce", "silver", "judge-validity", "bench-store")
NO_POSITIONALS = ("bench", "silver", "bench-store")


def json_arg(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--json", action="store_true", help=f"print {what} as JSON on standard output "
                                                       "(other lines go to standard error)")


def out_arg(p: argparse.ArgumentParser, what: str, repeatable: bool = False) -> None:
    if repeatable:
        p.add_argument("--out", action="append", default=[], type=Path, metavar="PATH",
                       help=f"write {what} to PATH: .json or .html by its suffix (repeatable)")
    else:
        p.add_argument("--out", type=Path, default=None, metavar="PATH", help=f"write {what} to PATH")


def check_old_spellings(argv: Sequence[str]) -> None:
    """A ConfigError naming the new spelling for the first old one in `argv`."""
    if not argv:
        return
    command = argv[0]
    if " ".join(argv[:2]) in TWO_WORDS:
        command = " ".join(argv[:2])
    for i, arg in enumerate(argv[1:], start=1):
        flag = arg.split("=", 1)[0]
        if (command, flag) in OLD_SPELLINGS:
            raise ConfigError(f"{command} {flag} is now {OLD_SPELLINGS[(command, flag)]}")
        if command in JSON_WROTE_A_FILE and flag == "--json" and json_took_a_path(
                arg, argv[i + 1:i + 2], any_word=command in NO_POSITIONALS):
            path = arg.split("=", 1)[1] if "=" in arg else argv[i + 1]
            raise ConfigError(f"{command} --json no longer takes a file: it prints JSON on standard output; "
                              f"write the file with --out {path}")


def json_took_a_path(arg: str, following: Sequence[str], any_word: bool = False) -> bool:
    """`--json=PATH`, or `--json PATH` where PATH looks like a file (a .json name or a folder in it;
    with `any_word`, any word: the command has no positional argument it could be)."""
    if "=" in arg:
        return True
    nxt = following[0] if following else ""
    return bool(nxt) and not nxt.startswith("-") and (any_word or nxt.endswith(".json") or "/" in nxt)


def emit_json(data, default=str) -> None:
    """The result on standard output, as JSON."""
    print(json.dumps(data, indent=1, default=default))


def say(args, *parts, **kw) -> None:
    """A human line: on standard output, or standard error when --json keeps stdout for JSON."""
    print(*parts, file=sys.stderr if getattr(args, "json", False) else sys.stdout, **kw)


def outputs(args, allowed: Sequence[str] = (".json", ".html")) -> dict[str, list[Path]]:
    """The files to write, by format: every --out, and --html (the same as --out PATH.html). A
    suffix outside `allowed` is refused by name before anything runs."""
    out: dict[str, list[Path]] = {}
    for p in list(args.out or []) + ([args.html_out] if getattr(args, "html_out", None) else []):
        if p.suffix not in allowed:
            raise ConfigError(f"--out {p}: the suffix says the format; use {' or '.join(allowed)}")
        out.setdefault(p.suffix, []).append(p)
    return out


def method_settings(pairs: Sequence[str], methods: Sequence[str]) -> dict[str, dict]:
    """`--set METHOD.KEY=VALUE` (repeatable) → {method: {key: value}}. With one method, `KEY=VALUE`
    sets that method's. Values are JSON where they parse (0.5, false, "x"), else text."""
    out: dict[str, dict] = {}
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        if not sep or not name:
            raise ConfigError(f"--set takes METHOD.KEY=VALUE, got {pair!r}")
        method, dot, key = name.rpartition(".")
        if not dot:
            if len(methods) != 1:
                raise ConfigError(f"--set {pair!r}: with several methods say whose setting it is, "
                                  f"METHOD.{name}=VALUE (methods: {', '.join(methods)})")
            method, key = methods[0], name
        if method not in methods:
            raise ConfigError(f"--set {pair!r}: {method!r} is not among the methods run ({', '.join(methods)})")
        out.setdefault(method, {})[key] = _value(raw)
    return out


def _value(raw: str):
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def positive(value: Optional[int], flag: str) -> None:
    if value is not None and value < 1:
        raise ConfigError(f"{flag} must be at least 1, got {value}")
