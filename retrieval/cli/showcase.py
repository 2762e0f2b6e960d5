"""`hoptrace record-showcase` and `record-experiment`: what the app opens on, recorded on an idle
machine and shipped in the repository."""
from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Optional

from ..core import cpu, idle
from ..core.errors import ConfigError
from .common import _context, _llm_args


def add_parsers(sub) -> None:
    rs = sub.add_parser("record-showcase", help="record the LLM methods' full traces on a few demo questions, "
                                               "for the app to open instantly (re-run after a prompt change)")
    rs.add_argument("--kb", default="demo")
    rs.add_argument("--question-count", type=int, default=12, metavar="N",
                    help="how many questions (spread over 2-, 3- and 4-hop; default 12)")
    rs.add_argument("--methods", default="griever,gear,sag,grasp", help="comma-separated method names")
    rs.add_argument("--out", type=Path, default=None, help="default data/showcase/<kb>.json.gz")
    rs.add_argument("--update", action="store_true",
                    help="re-record only --methods into the existing recording (its questions, its model); "
                         "keep the other methods' runs")
    rs.add_argument("--allow-load", action="store_true",
                    help="record on a machine that is not idle; its runs are marked 'under load' on the page "
                         "(by default a busy machine is refused: its latencies would not be the methods')")
    _llm_args(rs)

    re_ = sub.add_parser("record-experiment",
                         help="record (or resume) the shipped experiment the lab opens on: every method on the "
                              "demo's questions with answers, one sitting at a time, idle-checked unit by unit")
    re_.add_argument("--kb", default="demo")
    re_.add_argument("--methods", default=None,
                     help="comma-separated (default: the paper methods, the baselines and the ablations)")
    re_.add_argument("--question-count", type=int, default=100, metavar="N",
                     help="questions for the LLM-free methods (default 100)")
    re_.add_argument("--llm-question-count", type=int, default=50, metavar="N",
                     help="questions for the LLM methods (default 50)")
    re_.add_argument("--minutes", type=float, default=60.0,
                     help="this sitting's length: no new unit (a method on 10 questions) starts after it")
    re_.add_argument("--rerecord", default=None, metavar="METHODS",
                     help="drop these methods' runs (their code or prompts changed) and record them again")
    re_.add_argument("--add", default=None, metavar="METHODS",
                     help="add these methods to the shipped recording and record them (the others' runs stay)")
    re_.add_argument("--new", action="store_true", help="start a new recording instead of resuming the shipped one")
    re_.add_argument("--time-here", action="store_true",
                     help="compare the experiment's times on this machine from now on (after its main methods "
                          "were re-recorded here): runs elsewhere stay in the scores, their times kept apart")
    re_.add_argument("--out", type=Path, default=None, help="default data/experiments/<kb>.json.xz")
    re_.add_argument("--allow-load", action="store_true",
                     help="start although the machine is busy (a disturbed unit is still recorded again)")
    _llm_args(re_)


def _refuse_busy(allow_load: bool, reference_ms: Optional[float] = None) -> None:
    """One look before a recording: the load, others' CPU and, given the machine's reference
    (idle.machine_reference_ms), its speed. Taken before the model loads, which would read as load."""
    busy = idle.check_before(reference_ms=reference_ms)
    if busy and not allow_load:
        raise ConfigError("this machine is not idle (" + "; ".join(busy) + "): the recording's latencies would "
                          "not be the methods', nor compare with those recorded before. Stop the other work and "
                          "try again (or record on another machine), or pass --allow-load to record it marked "
                          "'under load' (a slow unit is still recorded again)")


def cmd_record_showcase(args) -> int:
    from ..showcase import choose_questions, record

    if args.question_count < 1:
        raise ConfigError(f"--question-count must be at least 1, got {args.question_count}")
    ctx = _context(args.kb, args)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    questions = choose_questions(ctx.store.questions(), args.question_count)
    if not questions:
        raise ConfigError(f"KB {args.kb} has no questions with gold passages to record")
    _refuse_busy(args.allow_load)
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


def _add_methods(experiments, exp, ctx, names: list[str]) -> None:
    """New methods in a recorded experiment: each planned over the same questions (the LLM ones over
    the same first `llm_questions`), after the methods already there."""
    from traces.storage.experiments import method_spec

    from ..methods import METHODS, make_method, root_method

    for m in names:
        if root_method(m) not in METHODS:
            raise ConfigError(f"--add {m}: unknown method; `hoptrace methods` lists them")
        if m in exp.methods:
            raise ConfigError(f"--add {m}: already in the recording; --rerecord {m} records it again")
    for m in names:
        experiments.add_method(exp, m, method_spec(make_method(m, ctx), m, {}))
    if names:
        args = exp.spec.setdefault("args", {})
        args["methods"] = ",".join(exp.methods)
        experiments.save_spec(exp)


def _time_here(experiments, exp) -> None:
    """The machine whose times the lab compares becomes this one. A row that does not name its machine
    is read as the experiment's: it is named the old one first, or it would move with it."""
    here, was = cpu.describe(), exp.machine
    if not was and any(not e["row"].get("machine") for e in experiments.entries(exp, repetitions=True)):
        raise ConfigError("--time-here: the experiment names no machine, nor do some of its runs: where they were "
                          "timed is unknown, and they would be read as timed here")
    if was and was != here:
        experiments.name_row_machines(exp, was)
    exp.spec["machine"] = here
    if here != was:
        print(f"the experiment's times are compared on {here} from now on (they were on {was or 'no machine named'}); "
              "runs elsewhere stay in the scores, their times kept apart", file=sys.stderr)


def cmd_record_experiment(args) -> int:
    from traces.storage import recording, shipped
    from traces.storage.experiments import Experiments, kb_fingerprint, method_spec

    from ..methods import make_method
    from ..showcase import experiment_fingerprints, load_for, path_for
    from .common import _trace_store

    if args.question_count < 1 or args.llm_question_count < 0 or args.minutes <= 0:
        raise ConfigError("--question-count must be at least 1, --llm-question-count 0 or more and --minutes above 0")
    ctx = _context(args.kb, args, cache=False)   # every run a real call: its latency is the method's
    if ctx.llm is None:
        raise ConfigError("the shipped experiment ends every run with an answer: it needs an LLM")
    out = args.out or shipped.path_for(args.kb)
    doc = shipped.read(out) if out.exists() and not args.new else None
    # The speed reference is the earlier sittings' on a machine of this name (none for a new recording).
    sittings = doc["experiment"]["spec"].get("sittings", []) if doc else []
    _refuse_busy(args.allow_load, idle.machine_reference_ms(sittings, cpu.describe()))   # before anything is stored
    ctx.llm.start()
    experiments = Experiments(_trace_store())
    kb_questions = ctx.store.questions()
    if doc is not None:
        exp = shipped.install(experiments.traces, out, doc)
        if exp.llm != ctx.llm.describe():
            raise ConfigError(f"{out} was recorded with {exp.llm}, not {ctx.llm.describe()}: one experiment holds "
                              "one model; pass --new to record it again")
        if exp.kb_fingerprint != kb_fingerprint(ctx.store):
            raise ConfigError(f"KB {args.kb} changed since {out} was recorded; pass --new to record it again")
        by_id = {q.id: q for q in kb_questions}
        questions = [by_id[q["id"]] for q in exp.questions if q["id"] in by_id]
        _add_methods(experiments, exp, ctx, [m.strip() for m in (args.add or "").split(",") if m.strip()])
        redo = [m.strip() for m in (args.rerecord or "").split(",") if m.strip()]
        for m in redo:
            if m not in exp.methods:
                raise ConfigError(f"--rerecord {m}: not a method of {out} ({', '.join(exp.methods)})")
            recording.discard(experiments, exp, m, [q.id for q in questions])
            # The whole entry again, not only its fingerprint: the profile and config it records are
            # those the new runs are made with (a GRIEVER family re-recorded kept its first entry's).
            exp.spec["methods"][m] = method_spec(make_method(m, ctx), m, exp.spec["methods"][m].get("settings") or {})
        now = experiment_fingerprints(exp.spec)
        stale = [m for m in exp.methods
                 if m not in redo and exp.spec["methods"][m].get("fingerprint") != now.get(m)]
        if stale:
            print(f"hoptrace: warning: {', '.join(stale)} changed since recorded (shown labelled stale); "
                  f"--rerecord {','.join(stale)} records them again", file=sys.stderr)
        if args.time_here:
            _time_here(experiments, exp)
        # Recorded before the LLM methods' second repetition was planned: it is added to the plan.
        exp.spec.setdefault("args", {}).setdefault("llm_repetitions", recording.LLM_REPETITIONS)
        exp.status = "running"
        print(f"resuming experiment {exp.id[:12]} from {out}", file=sys.stderr)
    else:
        from ..methods import METHODS, root_method

        methods = [m.strip() for m in (args.methods or ",".join(recording.DEFAULT_METHODS)).split(",") if m.strip()]
        unknown = [m for m in methods if root_method(m) not in METHODS]
        if unknown:
            raise ConfigError(f"unknown method(s) {', '.join(unknown)}; `hoptrace methods` lists them")
        showcase = load_for(args.kb)
        questions = recording.order_questions(kb_questions, [it.question for it in showcase.items] if showcase
                                              else [], args.question_count)
        if not questions:
            raise ConfigError(f"KB {args.kb} has no questions with gold passages to record")
        exp = recording.start(experiments, ctx, args.kb, questions, methods,
                              min(args.llm_question_count, len(questions)))
        print(f"new experiment {exp.id[:12]}: {len(methods)} methods, {len(questions)} questions", file=sys.stderr)
    ctx.warm()

    def wait_idle() -> None:
        while idle.check_before(check_load=False):   # the load average still counts our own last unit
            time.sleep(30)

    def said(unit, n, label) -> None:
        first = unit.chunk * recording.CHUNK + 1
        again = f" (repetition {unit.rep})" if unit.rep > 1 else ""
        print(f"{unit.method}{again} · questions {first}–{first + len(unit.questions) - 1}: {n} runs, {label}",
              file=sys.stderr, flush=True)

    sitting = recording.record_sitting(experiments, exp, ctx, questions, args.minutes, on_unit=said,
                                       wait_idle=wait_idle)
    complete = recording.close_sitting(experiments, exp, sitting, questions)
    size = shipped.write(experiments, exp, out)
    shipped.install(experiments.traces, out)   # marks this copy as the file's, so the app keeps it
    if args.out is None:   # the shipped showcase takes the experiment's runs of its questions
        taken = recording.to_showcase(experiments, exp, path_for(args.kb))
        if taken:
            print(f"the showcase ({path_for(args.kb)}) now shows the experiment's runs of {', '.join(taken)}",
                  file=sys.stderr)
    s = sitting.as_dict()
    print(f"wrote {out} ({size / 1e6:.1f} MB): this sitting {s['units']} units, {s['runs']} runs, "
          f"{s['seconds']:.0f} s on {s['machine']}, {s['verdict']} (others' CPU up to {s['others_cpu_max']}, "
          f"{s['redone']} units disturbed and recorded again); "
          + ("the recording is complete" if complete else "more to record: run the same command again"))
    from traces.stats.leaderboard import build

    print(build(exp, experiment_fingerprints(exp.spec)).text())
    return 0


COMMANDS = {"record-showcase": cmd_record_showcase, "record-experiment": cmd_record_experiment}
