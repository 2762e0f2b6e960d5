"""`hoptrace bench-app` and `bench-store`: the app's and the SQLite store's speed."""
from __future__ import annotations

import json
from pathlib import Path

from ..core.errors import ConfigError
from .flags import emit_json, json_arg, out_arg, say


def add_parsers(sub) -> None:
    ba = sub.add_parser("bench-app", help="app start-to-ready and click-to-first-stage times (headless Chromium)")
    ba.add_argument("--users", type=int, default=0,
                    help="load test instead: this many concurrent visitors on loopback (appbench/load.py)")
    ba.add_argument("--minutes", type=float, default=5.0, help="load test duration")
    ba.add_argument("--methods", default="bm25,dense,composed,griever", help="load test: methods a request")
    ba.add_argument("--solo", type=int, default=20, help="load test: single-user requests measured first")
    ba.add_argument("--max-requests", type=int, default=2000, help="load test: bound on requests in all")
    ba.add_argument("--app-dir", type=Path, default=None, help="load test and --together: the app.py of another "
                                                               "checkout (before/after)")
    ba.add_argument("--compare-bench", action="store_true",
                    help="load test: then run `bench` on the first 40 demo questions for the LLM-free methods, back "
                         "to back and with 500 ms idle before each, and set each column's latency beside both")
    ba.add_argument("--run-count", type=int, default=5, metavar="N",
                    help="clicks timed per method in the start-to-ready and click-to-first-stage figures (default 5)")
    ba.add_argument("--first-start", action="store_true",
                    help="start the app as on a fresh machine (an empty home: the demo KB builds in the background) "
                         "and time the page, each method's first answered question and the demo's whole build")
    ba.add_argument("--together", type=int, default=0, metavar="N",
                    help="the LLM methods asked together in the page against each alone, on N new questions with "
                         "the response cache off (appbench/together.py)")
    ba.add_argument("--together-methods", default="gear,sag,grasp", help="with --together: the methods")
    ba.add_argument("--crossover", action="store_true",
                    help="with --together: four apps, each question measured in two pairs, together first in "
                         "one and alone first in the other, and the means reported (twice as long)")
    ba.add_argument("--shots", type=Path, default=None, help="with --together: a folder for a screenshot of the "
                                                            "columns while the last method waits")
    ba.add_argument("--first-methods", default="bm25,dense,griever", help="with --first-start: methods asked, in order")
    ba.add_argument("--hop-maps", action="store_true",
                    help="the hop maps instead: every stage of the showcase drawn (overlapping labels, smallest label, "
                         "draw time), then the app's first view (time to the first map, page height, the map after a "
                         "stage click)")
    ba.add_argument("--recording", type=Path, default=None,
                    help="with --hop-maps: a showcase recording (default data/showcase/demo.json.gz)")
    ba.add_argument("--no-app", action="store_true", help="with --hop-maps: the recording only, no app started")

    bs = sub.add_parser("bench-store", help="SQLite store scaling: memory, build time, latency on synthetic KBs")
    bs.add_argument("--sizes", default="10000,100000,1000000", help="passages per synthetic KB, comma-separated")
    bs.add_argument("--dir", type=Path, default=None, help="where to write the KBs (default $HOPTRACE_HOME/scale)")
    bs.add_argument("--queries", type=int, default=50)
    bs.add_argument("--keep", action="store_true", help="keep the synthetic KBs")
    json_arg(bs, "the rows")
    out_arg(bs, "the rows as JSON")

    bi = sub.add_parser("bench-import", help="time and peak memory of reading a generated corpus file alone "
                                             "(JSONL or TSV, a line at a time)")
    bi.add_argument("--lines", type=int, default=1_000_000, help="passages in the generated file (default 1,000,000)")
    bi.add_argument("--format", choices=["jsonl", "tsv"], default="jsonl")
    bi.add_argument("--dir", type=Path, default=None, help="where to write the file (default a temporary folder)")


def cmd_bench_app(args) -> int:
    from appbench.page import bench_app

    if args.hop_maps:
        from appbench.hopmap import bench_hop_maps

        print(json.dumps(bench_hop_maps(args.recording, app=not args.no_app), indent=1, ensure_ascii=False))
        return 0
    if args.together:
        from appbench.together import table, together

        methods = tuple(m.strip() for m in args.together_methods.split(",") if m.strip())
        res = together(args.together, methods, args.app_dir, args.shots, args.crossover)
        if res.get("rounds"):
            print("each round:\n" + table({"rows": res["rounds"]}, methods) + "\n\nmeans of the two rounds:")
        print(table(res, methods))
        print(json.dumps({k: v for k, v in res.items() if k not in ("rows", "rounds")}, indent=1))
        return 0
    if args.first_start:
        from appbench.first_start import first_start

        methods = tuple(m.strip() for m in args.first_methods.split(",") if m.strip())
        print(json.dumps(first_start(methods), indent=1))
        return 0
    if args.users:
        from appbench import load as load_mod
        from appbench.load import load_test

        methods = tuple(m.strip() for m in args.methods.split(",") if m.strip())
        res = load_test(args.users, args.minutes, methods, solo=args.solo,
                        max_requests=args.max_requests, app_dir=args.app_dir or load_mod.REPO_ROOT)
        if args.compare_bench:
            res["column_vs_bench"] = load_mod.compare_with_bench(res["method_latency_shown"], methods)
        print(json.dumps(res, indent=1))
        return 0
    print(json.dumps(bench_app(runs=args.run_count), indent=1))
    return 0


def cmd_bench_store(args) -> int:
    from ..bench.store_scale import render, run
    from ..core.paths import home

    try:
        sizes = [int(x) for x in args.sizes.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"--sizes takes comma-separated integers, got {args.sizes!r}") from None
    if not sizes or any(n < 100 for n in sizes):
        raise ConfigError(f"--sizes: each size must be at least 100 passages, got {args.sizes!r}")
    rows = run(sizes, args.dir or home() / "scale", args.queries, args.keep)
    say(args, render(rows))
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1))
    if args.json:
        emit_json(rows)
    return 0


def cmd_bench_import(args) -> int:
    import tempfile

    from ..bench.import_scale import generate, measure

    if args.lines < 1:
        raise ConfigError(f"--lines must be at least 1, got {args.lines}")
    with tempfile.TemporaryDirectory(dir=args.dir) as d:
        path = generate(Path(d) / f"corpus.{args.format}", args.lines, args.format)
        print(json.dumps(measure(path), indent=1))
    return 0


COMMANDS = {"bench-app": cmd_bench_app, "bench-store": cmd_bench_store, "bench-import": cmd_bench_import}
