"""`hoptrace record-showcase`: the LLM methods' traces recorded for the app to open instantly."""
from __future__ import annotations

import sys
import time
from pathlib import Path

from ..core import idle
from ..core.errors import ConfigError
from .common import _context, _llm_args


def add_parsers(sub) -> None:
    rs = sub.add_parser("record-showcase", help="record the LLM methods' full traces on a few demo questions, "
                                               "for the app to open instantly (re-run after a prompt change)")
    rs.add_argument("--kb", default="demo")
    rs.add_argument("--questions", type=int, default=12, help="how many (spread over 2-, 3- and 4-hop)")
    rs.add_argument("--methods", default="griever,gear,sag,grasp", help="comma-separated method names")
    rs.add_argument("--out", type=Path, default=None, help="default data/showcase/<kb>.json.gz")
    rs.add_argument("--update", action="store_true",
                    help="re-record only --methods into the existing recording (its questions, its model); "
                         "keep the other methods' runs")
    rs.add_argument("--allow-load", action="store_true",
                    help="record on a machine that is not idle; its runs are marked 'under load' on the page "
                         "(by default a busy machine is refused: its latencies would not be the methods')")
    _llm_args(rs)


def cmd_record_showcase(args) -> int:
    from ..showcase import choose_questions, record

    if args.questions < 1:
        raise ConfigError(f"--questions must be at least 1, got {args.questions}")
    ctx = _context(args.kb, args)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    questions = choose_questions(ctx.store.questions(), args.questions)
    if not questions:
        raise ConfigError(f"KB {args.kb} has no questions with gold passages to record")
    busy = idle.check_before()
    if busy and not args.allow_load:
        raise ConfigError("this machine is not idle (" + "; ".join(busy) + "): the recording's latencies would "
                          "not be the methods'. Stop the other work and try again, or pass --allow-load to record "
                          "it marked 'under load'")
    ctx.warm()
    t0 = time.time()
    failed: list[str] = []
    asked: set[str] = set()  # --update runs the recording's own questions, not the chosen ones

    def done(i: int, n: int, method: str, run) -> None:
        asked.add(run.question)
        if run.status != "ok":
            failed.append(f"{method}: {run.error}")
        print(f"[{i}/{n}] {method}: {run.status} · {run.latency_ms / 1000:.1f} s · tokens {run.tokens_in}/"
              f"{run.tokens_out} · {run.question[:60]}", file=sys.stderr, flush=True)

    from traces.storage.experiments import code_version

    out = record(ctx, args.kb, questions, methods, out=args.out, on_run=done, update=args.update,
                 version=code_version())
    print(f"wrote {out} ({len(asked)} questions × {len(methods)} methods, {time.time() - t0:.0f} s, "
          f"LLM {ctx.llm.describe()})")
    from ..showcase import load

    cond = load(out).conditions[methods[0]]
    print(f"{idle.Conditions(**cond).label}: load average {cond['load1_before']} at the start, "
          f"others' CPU up to {cond['others_cpu_max']}, calibration {cond['calibration_ms'][0]} → "
          f"{cond['calibration_ms'][1]} ms" + (f" ({'; '.join(cond['reasons'])})" if cond["reasons"] else ""))
    if cond["verdict"] != "idle" and not args.allow_load:
        print("hoptrace: error: the machine got busy during the recording; its runs are marked 'under load'. "
              "Record again on an idle machine before committing it", file=sys.stderr)
        return 1
    if failed:
        # Written anyway, to be looked at, but not to be shipped as is: a visitor would see
        # the errors as the method's behaviour.
        print(f"hoptrace: error: {len(failed)} of the recorded runs ended in error, e.g. {failed[0][:200]}; "
              "look at them before committing the recording", file=sys.stderr)
        return 1
    return 0


COMMANDS = {"record-showcase": cmd_record_showcase}
