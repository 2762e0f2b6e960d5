"""`hoptrace export`, `experiments` and `compare`: stored experiments listed, compared and sent as spans."""
from __future__ import annotations

import json
from pathlib import Path

from ..core.errors import ConfigError, InputError
from .common import _experiments, _trace_store, plugin_args
from .flags import emit_json, json_arg, out_arg, outputs, say


def add_parsers(sub) -> None:
    xp = sub.add_parser("export", help="send stored runs as OpenTelemetry spans (OpenInference) to a collector "
                                        "such as Phoenix, or write them as OTLP JSON")
    to = xp.add_mutually_exclusive_group(required=True)
    to.add_argument("--otlp", metavar="URL", help="an OTLP/HTTP collector, e.g. http://127.0.0.1:6006 (Phoenix)")
    to.add_argument("--file", metavar="OUT.jsonl", help="OTLP JSON, one export request a line, for offline use")
    what = xp.add_mutually_exclusive_group(required=True)
    what.add_argument("--session", metavar="ID", help="the runs of one session (an Ask request)")
    what.add_argument("--runs", metavar="IDS", help="run ids, comma-separated")
    what.add_argument("--experiment", metavar="ID", help="every run of a stored experiment (bench, reproduce)")
    what.add_argument("--resume", metavar="FILE", help="the runs an earlier export could not deliver by its deadline "
                                                      "(the file it named)")
    xp.add_argument("--deadline", type=float, default=30.0, metavar="MINUTES",
                    help="keep resending a refused or timed-out batch, with backoff, until this many minutes have "
                         "passed; then name the runs not delivered (default 30)")
    xp.add_argument("--traces", metavar="PATH", default=None,
                    help="the trace file to read (default $HOPTRACE_HOME/traces.sqlite); opened read-only")

    ex = sub.add_parser("experiments", help="list stored experiments (bench, reproduce and Benchmark-tab runs)")
    ex.add_argument("--last", type=int, default=50, metavar="N", help="the N newest (default 50)")
    json_arg(ex, "everything, including each experiment's spec,")

    cp = sub.add_parser("compare", help="an experiment's methods compared question by question, with 95 %% "
                                        "intervals, paired randomization tests, and where each method lost the gold")
    cp.add_argument("experiment", help="experiment id (or a unique prefix of 6+ characters)")
    cp.add_argument("--metric", default="recall@5", help="recall@K | anyhit@K | allhit@K | em | f1 against gold, or "
                    "ndcg@K | p@K | jrecall@K | judged@K against judgments (hoptrace judge) (default recall@5)")
    cp.add_argument("--judges", default="person,llm,answer",
                    help="judged metrics: whose grades, in the order a pair's grade is taken (default "
                         "person,llm,answer)")
    cp.add_argument("--rel", type=int, default=2, help="judged metrics: the grade counted relevant (default 2)")
    cp.add_argument("--methods", default=None, help="comma-separated subset of the experiment's methods")
    plugin_args(cp)
    cp.add_argument("--against", default=None, metavar="NEW",
                    help="another experiment on the same questions (a rebuilt KB, another version): each method's "
                         "change new − old, with its interval and paired test; EXPERIMENT is the old one")
    cp.add_argument("--question", default=None, metavar="QUESTION_ID",
                    help="print this question's stored runs of the first two --methods (or the first two methods), "
                         "stage by stage, exactly as stored: the Benchmark tab's click on a question's row")
    json_arg(cp, "the comparison")
    out_arg(cp, "the comparison (JSON) or a self-contained HTML report", repeatable=True)
    cp.add_argument("--html", dest="html_out", type=Path, metavar="PATH",
                    help="write a self-contained HTML report to PATH (the same as --out PATH.html)")


def cmd_export(args) -> int:
    from traces.otel.export import (
        JsonlFileExporter,
        check_reachable,
        endpoint_url,
        export_stored,
        otlp_exporter,
        read_undelivered,
        write_undelivered,
    )
    from traces.storage.store import TraceReader, default_path

    from ..core.paths import home as hoptrace_home

    where = endpoint_url(args.otlp) if args.otlp else args.file  # a malformed URL is named first
    if args.deadline <= 0:
        raise InputError(f"--deadline must be a positive number of minutes, got {args.deadline:g}")
    if args.experiment and not args.traces:
        # The shipped experiment is there for the CLI too, installed as the app installs it.
        from .common import ensure_shipped

        ensure_shipped(_trace_store())
    reader = TraceReader(args.traces or default_path())
    try:
        if args.resume:
            ids = reader.run_ids(runs=read_undelivered(Path(args.resume)), session=None, experiment=None)
        else:
            ids = reader.run_ids(runs=(args.runs or "").split(","), session=args.session, experiment=args.experiment)
        if args.otlp:
            check_reachable(where)
            exporter = otlp_exporter(where, timeout_s=min(10.0, args.deadline * 60))
        else:
            try:
                exporter = JsonlFileExporter(Path(args.file))
            except OSError as e:
                raise InputError(f"cannot write {args.file}: {e.strerror}") from e
        rep = export_stored(reader, ids, exporter, where, deadline_s=args.deadline * 60)
    finally:
        reader.close()
    print(rep.line())
    if rep.undelivered:
        import time

        path = write_undelivered(hoptrace_home() / "exports" / f"undelivered-{time.strftime('%Y%m%d-%H%M%S')}.txt",
                                 where, rep.undelivered)
        shown = ", ".join(rep.undelivered[:5]) + (", …" if len(rep.undelivered) > 5 else "")
        print(f"not delivered: {len(rep.undelivered)} runs ({shown}), listed in {path}\n"
              f"send exactly those: hoptrace export {'--otlp ' + args.otlp if args.otlp else '--file OTHER.jsonl'} "
              f"--resume {path}")
        return 1
    return 0


def cmd_experiments(args) -> int:
    from traces.storage.shipped import shipped_ids

    experiments = _experiments()
    shipped = set(shipped_ids(experiments.traces))
    if args.last < 1:
        raise ConfigError(f"--last must be at least 1, got {args.last}")
    exps = experiments.list(limit=args.last)
    if args.json:
        print(json.dumps([{**e.__dict__, "shipped": e.id in shipped} for e in exps], indent=1, default=str))
        return 0
    if not exps:
        print("no experiments stored yet: `hoptrace bench` or `hoptrace reproduce` make one")
        return 0
    for e in exps:
        print(f"{e.describe()} · {e.provenance()}" + (" · shipped (data/experiments)" if e.id in shipped else ""))
    return 0


def cmd_compare(args) -> int:
    from traces.stats.compare import compare, render_text, write_html

    experiments = _experiments()
    exp = experiments.get(args.experiment)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()] if args.methods else None
    if args.against:
        return _compare_across(args, experiments, exp, methods)
    judged = None
    from traces.stats.judged_measures import is_judged_metric

    if is_judged_metric(args.metric):
        from traces.judging.judged import judged_for

        judged = judged_for(experiments.traces, exp, "", [s.strip() for s in args.judges.split(",") if s.strip()],
                            args.rel)
    files = outputs(args)
    cmp = compare(experiments, exp, args.metric, methods, judged)
    if args.question:
        return _print_question(experiments, cmp, args.question)
    say(args, render_text(cmp))
    if judged is not None:
        # Which verdicts a person's grades settle and which still rest on automatic ones (P@k).
        from traces.judging.queue import status_lines

        lines = status_lines(experiments, exp, args.metric, "", methods, args.rel)
        if lines:
            say(args, "\n" + "\n".join(lines))
            say(args, f"the next grades that can change an open verdict: hoptrace judge {exp.id[:12]} --queue 20")
    for path in files.get(".json", []):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(cmp.to_json(), indent=1, default=str))
        say(args, f"wrote {path}")
    for path in files.get(".html", []):
        path.parent.mkdir(parents=True, exist_ok=True)
        write_html(cmp, path)
        say(args, f"wrote {path}")
    if args.json:
        emit_json(cmp.to_json())
    return 0


def _print_question(experiments, cmp, question_id: str) -> int:
    from retrieval.trace.text import render_run, render_stage
    from traces.stats.compare import question_runs

    pair = cmp.methods[:2]
    runs, ids, gold, question = question_runs(experiments, cmp, question_id, pair)
    print(f"{question_id}: {question}")
    for m in pair:
        print(f"\n=== {m} (run {ids[m][:12]}) ===")
        for st in runs[m].stages:
            print(render_stage(st))
        print(render_run(runs[m]))
    return 0


def _compare_across(args, experiments, old, methods) -> int:
    from traces.stats.across import compare_across, render_across

    files = outputs(args)
    if files.get(".html"):
        raise ConfigError("an HTML report is for one experiment's comparison; with --against write --out PATH.json")
    c = compare_across(experiments, old, experiments.get(args.against), args.metric, methods)
    say(args, render_across(c))
    for path in files.get(".json", []):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(c.to_json(), indent=1, default=str))
        say(args, f"wrote {path}")
    if args.json:
        emit_json(c.to_json())
    return 0


COMMANDS = {"export": cmd_export, "experiments": cmd_experiments, "compare": cmd_compare}
