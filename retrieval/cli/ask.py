"""`hoptrace ask`: one method on one question, its stages printed as they finish."""
from __future__ import annotations

import json
import time

from .common import _context, _llm_args, plugin_args
from .flags import json_arg, method_settings


def add_parsers(sub) -> None:
    a = sub.add_parser("ask", help="run one method on one question and print its stages")
    a.add_argument("question")
    a.add_argument("--kb", default="demo")
    a.add_argument("--method", default="bm25")
    plugin_args(a)
    a.add_argument("--k", type=int, default=10)
    a.add_argument("--set", action="append", default=[], metavar="[METHOD.]KEY=VALUE",
                   help="a setting of the method, e.g. path_weight=0.25 or griever.path_weight=0.25 (repeatable)")
    json_arg(a, "the whole trace")
    a.add_argument("--answer", action="store_true", help="end with the shared answer step (top-5 passages → answer)")
    _llm_args(a)


def cmd_ask(args) -> int:
    from ..core.validate import check_question
    from ..methods import make_method
    from ..trace.text import render_run, render_stage

    check_question(args.question)  # before loading anything, so a bad question fails fast
    ctx = _context(args.kb, args)
    method = make_method(args.method, ctx, **method_settings(args.set, [args.method]).get(args.method, {}))
    info = ctx.store.info()
    t0 = time.perf_counter()
    # Load vectors and lookup maps first, so stage latencies show the method, not the loading.
    ctx.warm()
    if not args.json:
        print(f"kb: {info.location} ({info.counts['passages']} passages) · embedder: {ctx.embedder.name} · "
              f"LLM: {ctx.llm.describe() if ctx.llm else 'none'}"
              f"{'' if method.uses_llm or args.answer else ' (not used by ' + method.name + ')'} · loaded in "
              f"{(time.perf_counter() - t0) * 1000:.0f} ms")
    run = method.run(args.question, k=args.k, on_stage=None if args.json else lambda st: print(render_stage(st)),
                     answer=args.answer)
    from ..llm.prices import attach_cost

    attach_cost(run, ctx.llm)
    if args.json:
        print(json.dumps(run.to_dict(), indent=1, default=str))
    else:
        print(render_run(run))
    return 0 if run.status == "ok" else 1


COMMANDS = {"ask": cmd_ask}
