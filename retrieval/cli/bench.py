"""`hoptrace bench`, `bench-concurrency` and `soak`: methods measured over questions, and the app under load."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from ..core.errors import ConfigError
from .common import _context, _llm_args, _trace_store, plugin_args
from .flags import emit_json, json_arg, method_settings, out_arg, say


def add_parsers(sub) -> None:
    be = sub.add_parser("bench", help="recall / hit rates / latency / tokens of methods over questions; every run's "
                                      "trace is kept as an experiment (hoptrace experiments / compare)")
    # Defaults are None here and filled in cmd_bench: `--resume` must tell an argument given
    # again from one left out (traces/storage/experiments.py check_resume).
    be.add_argument("--kb", default=None, help="KB name or path (default demo)")
    be.add_argument("--methods", default=None, help="comma-separated method names (required unless --resume)")
    plugin_args(be)
    be.add_argument("--questions", type=Path, help="questions file (default: the KB's own questions)")
    be.add_argument("--question-set", default=None, metavar="NAME",
                    help="a question set added with `hoptrace questions add` (with or without gold)")
    be.add_argument("--limit", type=int, metavar="N", help="the first N questions, for every method")
    be.add_argument("--protocol", default=None, choices=["per-k", "slice"],
                    help="per-k: run k-dependent methods once per k in 2/5/10/15 (default); slice: one run at 15")
    be.add_argument("--ks", default=None, help="comma-separated cut-offs (default 2,5,10,15)")
    be.add_argument("--set", action="append", default=None, metavar="METHOD.KEY=VALUE",
                    help="a method's setting, e.g. griever.path_weight=0.25 (repeatable; with one method, "
                         "KEY=VALUE); the experiment records it")
    be.add_argument("--answer", action="store_true", default=None,
                    help="add EM and F1 of the shared answer step (needs an LLM)")
    be.add_argument("--repeat", type=int, default=None, metavar="N",
                    help="run each method on each question N times (the LLM response cache bypassed for the "
                         "repeats): means, their spread over repetitions (_sd) and stable@k; default 1")
    be.add_argument("--budget", type=int, default=None, metavar="T",
                    help="add recall@{T}tok: recall over the ranked passages that fit in T tokens of the reader's "
                         "context, counted in ranking order with the reader's tokenizer")
    be.add_argument("--prices", type=Path, default=None, metavar="FILE",
                    help="a CSV of model,input_usd_per_mtok,output_usd_per_mtok[,cached] over genai-prices' "
                         "table (env HOPTRACE_PRICES)")
    be.add_argument("--temperature", type=float, default=None, metavar="T",
                    help="the LLM's sampling temperature (default 0, as the papers run)")
    be.add_argument("--difficulty-samples", type=int, default=None, metavar="N",
                    help="estimate each question's r_i with N closed-book LLM samples and report C_w (GRASP eq. 3)")
    be.add_argument("--pause-ms", type=float, default=None, metavar="MS",
                    help="idle this long before each question, untimed: latencies as a single click in the app "
                         "sees them (caches gone cold), to set beside the app's columns; default 0, back to back")
    be.add_argument("--concurrency", type=int, default=1, metavar="N",
                    help="questions in flight at once, for an LLM endpoint (--llm URL) that serves requests in "
                         "parallel; the embedded model serves one at a time (default 1)")
    be.add_argument("--resume", default=None, metavar="ID",
                    help="continue an interrupted experiment: runs it stored are kept, only the rest run")
    be.add_argument("--no-store", action="store_true",
                    help="keep no traces (no experiment): only the summary, as before experiments existed")
    json_arg(be, "the results")
    out_arg(be, "the results as JSON (a .csv and a .html report beside it)")
    _llm_args(be)
    be.add_argument("--quiet", action="store_true")

    bc = sub.add_parser("bench-concurrency", help="bench --concurrency N against a loopback endpoint that answers "
                                                  "after a fixed delay: wall time per N, identical rankings")
    bc.add_argument("--kb", default="demo")
    bc.add_argument("--methods", default="sag", help="comma-separated LLM methods (default sag)")
    bc.add_argument("--limit", type=int, default=16, help="questions (default 16)")
    bc.add_argument("--levels", default="1,8", help="concurrency levels to compare (default 1,8)")
    bc.add_argument("--delay-ms", type=float, default=500.0, help="the endpoint's delay per request (default 500)")
    bc.add_argument("--ks", default="5,10")

    so = sub.add_parser("soak", help="the public demo under a long steady load on loopback: errors, lost or mixed "
                                     "traces, p50 per 5 minutes, memory growth, the database under its cap")
    so.add_argument("--minutes", type=float, default=30.0, help="duration, at most 60 (default 30)")
    so.add_argument("--users", type=int, default=20, help="visitors on LLM-free methods (default 20)")
    so.add_argument("--llm-users", type=int, default=2, help="visitors on an LLM method (default 2)")
    so.add_argument("--llm-method", default="sag", help="the LLM visitors' method (default sag)")
    so.add_argument("--cap-mb", type=float, default=20.0, help="the trace database's size cap (default 20)")
    so.add_argument("--max-requests", type=int, default=20_000, help="bound on requests in all")
    so.add_argument("--llm", default=None, help="the app's LLM (default local, the embedded model)")


# What an experiment records of `hoptrace bench`'s arguments, and their defaults: a resume
# compares the ones given again against these.
BENCH_ARGS = {"kb": "demo", "methods": None, "questions": None, "question_set": None, "limit": None,
              "protocol": "per-k", "ks": None, "set": [],
              "answer": False, "difficulty_samples": 0, "pause_ms": 0.0, "llm": None, "llm_model": None,
              "profile": None, "repeat": 1, "budget": None, "prices": None, "temperature": None}


def _bench_args(args) -> dict:
    """The recorded arguments as given (None where left out), paths as text."""
    out = {}
    for k in BENCH_ARGS:
        v = getattr(args, k, None)
        out[k] = str(v) if isinstance(v, Path) else v
    return out


def cmd_bench(args) -> int:
    from ..bench.report import table, write_csv, write_html, write_json
    from ..bench.runner import KS, bench_plan, run_bench
    from ..corpus import load_questions
    from ..methods import method_names

    if args.concurrency < 1:
        raise ConfigError(f"--concurrency must be at least 1, got {args.concurrency}")
    experiments = exp = None
    asked = _bench_args(args)
    if args.resume:
        if args.no_store:
            raise ConfigError("--resume continues a stored experiment; it cannot be combined with --no-store")
        from traces.storage.experiments import Experiments, check_resume

        experiments = Experiments(_trace_store())
        exp = experiments.get(args.resume)
        check_resume(exp, asked)
        for k, v in exp.spec.get("args", {}).items():
            setattr(args, k, Path(v) if k == "questions" and v else v)
    for k, v in BENCH_ARGS.items():
        if getattr(args, k, None) is None:
            setattr(args, k, v)
    if not args.methods:
        raise ConfigError("--methods is required (comma-separated method names), unless --resume ID")
    concurrency_llm = {"concurrency": max(args.concurrency, 4)} if args.concurrency > 1 else {}
    if args.temperature is not None:
        if not 0 <= args.temperature <= 2:
            raise ConfigError(f"--temperature must be between 0 and 2, got {args.temperature}")
        concurrency_llm["temperature"] = args.temperature
    prices = Path(args.prices) if args.prices else _env_prices()
    if prices is not None:
        from ..llm.prices import read_price_file

        read_price_file(prices)   # a bad line is named before anything runs
    ctx = _context(args.kb, args, **concurrency_llm)
    if args.concurrency > 1 and (ctx.llm is None or ctx.llm.settings.backend == "local"):
        raise ConfigError("--concurrency N needs an LLM endpoint (--llm http://host:port/v1 or openai): the embedded "
                          "model serves one request at a time, and LLM-free methods would only share 2 cores")
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    try:
        ks = tuple(int(x) for x in args.ks.split(",")) if args.ks else KS
    except ValueError:
        raise ConfigError(f"--ks takes comma-separated integers, got {args.ks!r}") from None
    if any(k < 1 for k in ks):
        raise ConfigError(f"--ks values must be at least 1, got {args.ks!r}")
    unknown = [m for m in methods if m not in method_names()]
    if unknown:
        raise ConfigError(f"unknown method(s) {unknown}; available: {', '.join(method_names())}")
    settings = method_settings(args.set or [], methods)
    specs = {m: (m, settings.get(m, {})) for m in methods}
    if args.questions and args.question_set:
        raise ConfigError("--questions and --question-set both name the questions; give one")
    if args.questions:
        # corpus order = rowid order, which 2Wiki's gold passage indices refer to
        questions = load_questions(args.questions, ctx.store.passages(ctx.store.all_passage_ids()))
    elif args.question_set and args.question_set != "built-in":
        from traces.storage.questionsets import QuestionSets

        sets = QuestionSets(_trace_store())
        questions = sets.questions(sets.get(args.kb, args.question_set))
    else:
        questions = ctx.store.questions()
        if not questions:
            raise ConfigError(f"KB {args.kb} has no questions; add a set with `hoptrace questions add --kb "
                              f"{args.kb} FILE --name NAME` and pass --question-set NAME, or pass --questions FILE")
    if args.limit:
        questions = questions[: args.limit]
    done = None
    if not args.no_store:
        from traces.storage.experiments import Experiments, kb_fingerprint, method_spec, question_record

        from ..methods import make_method

        experiments = experiments or Experiments(_trace_store())
        fp = kb_fingerprint(ctx.store)
        if exp is None:
            insts = {m: make_method(m, ctx, **settings.get(m, {})) for m in methods}
            spec = {"methods": {m: method_spec(i, m, settings.get(m, {})) for m, i in insts.items()}, "ks": list(ks),
                    "protocol": args.protocol, "plan": bench_plan(insts, ks, args.protocol),
                    "questions": [question_record(q) for q in questions], "args": _bench_args(args),
                    "question_set": args.question_set or ("file " + args.questions.name if args.questions
                                                          else "built-in"),
                    "llm_server": ctx.llm.server if ctx.llm else ""}
            exp = experiments.start("bench", args.kb, fp, ctx.llm.describe() if ctx.llm else "none", spec)
        else:
            if exp.kb_fingerprint != fp:
                raise ConfigError(f"KB {args.kb} changed since experiment {exp.id[:12]} started (fingerprint "
                                  f"{exp.kb_fingerprint} → {fp}); its runs cannot be continued on it")
            wanted = [q["id"] for q in exp.questions]
            by_id = {q.id: q for q in questions}
            questions = [by_id[i] for i in wanted if i in by_id]
            if len(questions) != len(wanted):
                raise ConfigError(f"{len(wanted) - len(questions)} of the experiment's questions are no longer in "
                                  f"the KB {args.kb}; it cannot be resumed")
            done = experiments.finished(exp)
            print(f"resuming experiment {exp.id}: {len(done)} runs stored, the rest run now", file=sys.stderr)
            from retrieval.core import cpu
            from traces.storage.experiments import code_version
            now = code_version()
            if now != exp.code_version:
                print(f"note: the experiment started at code {exp.code_version}; its remaining runs are made by "
                      f"{now}", file=sys.stderr)
            here = cpu.describe()
            if exp.machine and here != exp.machine:
                print(f"note: the experiment started on {exp.machine}; its remaining runs are made on {here}: "
                      "their times and the LLM's replies at near-ties are not those of the first runs",
                      file=sys.stderr)
        if not args.quiet:
            print(f"experiment {exp.id} (traces kept in {experiments.traces.path})", file=sys.stderr)
    res = run_bench(ctx, args.kb, questions, methods, ks=ks, protocol=args.protocol, progress=not args.quiet,
                    answer=args.answer, difficulty_samples=args.difficulty_samples, pause_ms=args.pause_ms,
                    sink=experiments.sink(exp) if exp else None, done=done, concurrency=args.concurrency,
                    repeat=args.repeat, budget=args.budget, prices=prices, specs=specs)
    pause = f", {args.pause_ms:g} ms idle before each question (untimed)" if args.pause_ms else ""
    conc = f", {args.concurrency} questions in flight" if args.concurrency > 1 else ""
    reps = f", {args.repeat} repetitions" if args.repeat > 1 else ""
    temp = f" at temperature {args.temperature:g}" if args.temperature else ""
    set_line = f" · settings {'; '.join(args.set)}" if args.set else ""
    say(args, f"{res.n_questions} questions, protocol {res.protocol}, {res.seconds} s{pause}{conc}{reps}, "
              f"LLM: {ctx.llm.describe() if ctx.llm else 'none'}{temp} · prices: {res.prices}"
              + (f" · budget {args.budget} tokens ({res.tokenizer})" if args.budget else "") + set_line)
    say(args, table(res))
    if exp is not None:
        experiments.finish(exp, res.to_json(include_per_question=False))
        n = len(experiments.entries(exp, repetitions=True))
        has_gold = any(q.gold_passage_ids for q in questions)
        nxt = (f"hoptrace compare {exp.id[:12]} --metric recall@5" if has_gold else
               f"no gold passages: recall and hit rates left out; hoptrace judge {exp.id[:12]} --depth 10 pools "
               "and judges the runs, then hoptrace compare ... --metric ndcg@5")
        say(args, f"experiment {exp.id}: {n} runs stored, {experiments.size_bytes(exp) / 1e6:.1f} MB of traces, "
                  f"storing took {exp.store_seconds:.2f} s of the {res.seconds} s · {nxt}")
    if args.out:
        out = args.out
        out.parent.mkdir(parents=True, exist_ok=True)
        write_json(res, out)
        write_csv(res, out.with_suffix(".csv"))
        write_html(res, out.with_suffix(".html"))
        say(args, f"wrote {out}, {out.with_suffix('.csv')}, {out.with_suffix('.html')}")
    if args.json:
        emit_json(res.to_json() | ({"experiment": exp.id} if exp is not None else {}))
    return 0


def _env_prices():
    import os

    from ..llm.prices import PRICES_ENV

    raw = os.environ.get(PRICES_ENV, "").strip()
    return Path(raw) if raw else None


def cmd_soak(args) -> int:
    from appbench.soak import soak

    res = soak(args.minutes, args.users, args.llm_users, args.llm_method, args.cap_mb, args.max_requests, args.llm)
    print(json.dumps(res, indent=1))
    ok = (res["errors"] == 0 and res["lost"] == 0 and res["mixed_runs"] == 0 and res["sessions_missing_runs"] == 0
          and res["db_under_cap"])
    return 0 if ok else 1


def cmd_bench_concurrency(args) -> int:
    from ..bench.concurrency import measure

    try:
        levels = [int(x) for x in args.levels.split(",")]
        ks = [int(x) for x in args.ks.split(",")]
    except ValueError:
        raise ConfigError(f"--levels and --ks take comma-separated integers, got {args.levels!r} / "
                          f"{args.ks!r}") from None
    if args.delay_ms < 0 or args.limit < 1:
        raise ConfigError("--delay-ms must be 0 or more and --limit at least 1")
    args.llm = "none"  # the measurement brings its own endpoint
    ctx = _context(args.kb, args)
    questions = ctx.store.questions()[: args.limit]
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    levels_out = measure(ctx, args.kb, questions, methods, levels, args.delay_ms / 1000, ks)
    base = levels_out[0].seconds
    print(f"{len(questions)} questions · methods {', '.join(methods)} · ks {args.ks} · endpoint delay "
          f"{args.delay_ms:g} ms a request (loopback)")
    print(f"{'N':>3}  {'wall s':>8}  {'speed-up':>8}  {'runs':>5}  {'requests':>8}  {'max in flight':>13}  "
          f"{'run p50 ms':>10}  errors  rankings")
    for lv in levels_out:
        print(f"{lv.concurrency:>3}  {lv.seconds:>8.2f}  {base / lv.seconds:>7.2f}x  {lv.runs:>5}  {lv.requests:>8}  "
              f"{lv.max_in_flight:>13}  {lv.latency_ms_p50:>10.1f}  {lv.errors:>6}  "
              f"{'identical to N=' + str(levels_out[0].concurrency) if lv.identical else 'DIFFER'}")
    return 0 if all(lv.identical for lv in levels_out) else 1


COMMANDS = {"bench": cmd_bench, "bench-concurrency": cmd_bench_concurrency, "soak": cmd_soak}
