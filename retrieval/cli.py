"""`hoptrace` command line: build, ask, bench, kb info, serve.

Every user error (bad question, bad corpus, unknown method, missing KB) is a
HopTraceError: printed as one line naming the problem, exit code 2.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Optional

from .errors import ConfigError, HopTraceError
from .paths import resolve_kb


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hoptrace", description="Watch multi-hop retrievers work, stage by stage.")
    sub = p.add_subparsers(dest="command", required=True)

    b = sub.add_parser("build", help="build or extend a KB")
    src = b.add_mutually_exclusive_group(required=True)
    src.add_argument("--demo", action="store_true", help="the demo KB (bundled MuSiQue + GPT-3.5 OpenIE)")
    src.add_argument("--dataset", choices=["musique", "hotpotqa", "2wiki"], help="a bundled dataset")
    src.add_argument("--corpus", type=Path, help="corpus file: [{title,text}] or {title: [sentences]}")
    b.add_argument("--questions", type=Path, help="questions file (MuSiQue, HotpotQA or 2Wiki format)")
    b.add_argument("--openie", type=Path, help="HippoRAG OpenIE output to import triples from")
    b.add_argument("--extractor", default="auto", help="auto | rules | openie")
    b.add_argument("--out", help="KB name or .sqlite path (default: the dataset or corpus name)")
    b.add_argument("--embed-model", default=None, help="all-MiniLM-L6-v2 (default) | all-mpnet-base-v2")
    b.add_argument("--quiet", action="store_true")

    a = sub.add_parser("ask", help="run one method on one question and print its stages")
    a.add_argument("question")
    a.add_argument("--kb", default="demo")
    a.add_argument("--method", default="bm25")
    a.add_argument("--k", type=int, default=10)
    a.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="a method setting")
    a.add_argument("--json", action="store_true", help="print the whole trace as JSON")
    a.add_argument("--answer", action="store_true", help="end with the shared answer step (top-5 passages → answer)")
    _llm_args(a)

    be = sub.add_parser("bench", help="recall / hit rates / latency / tokens of methods over questions")
    be.add_argument("--kb", default="demo")
    be.add_argument("--methods", required=True, help="comma-separated method names")
    be.add_argument("--questions", type=Path, help="questions file (default: the KB's own questions)")
    be.add_argument("--limit", type=int)
    be.add_argument("--protocol", default="per-k", choices=["per-k", "slice"],
                    help="per-k: run k-dependent methods once per k in 2/5/10/15 (default); slice: one run at 15")
    be.add_argument("--ks", default=None, help="comma-separated cut-offs (default 2,5,10,15)")
    be.add_argument("--answer", action="store_true", help="add EM and F1 of the shared answer step (needs an LLM)")
    be.add_argument("--difficulty-samples", type=int, default=0, metavar="N",
                    help="estimate each question's r_i with N closed-book LLM samples and report C_w (GRASP eq. 3)")
    be.add_argument("--json", dest="json_out", type=Path, help="write results here (+ .csv and .html beside it)")
    _llm_args(be)
    be.add_argument("--quiet", action="store_true")

    kb = sub.add_parser("kb", help="inspect a KB")
    kb_sub = kb.add_subparsers(dest="kb_command", required=True)
    info = kb_sub.add_parser("info")
    info.add_argument("kb")

    ba = sub.add_parser("bench-app", help="app start-to-ready and click-to-first-stage times (headless Chromium)")
    ba.add_argument("--runs", type=int, default=5)

    s = sub.add_parser("serve", help="start the web app")
    s.add_argument("--port", type=int, default=None)
    s.add_argument("--host", default=None)
    _llm_args(s)
    return p


def _llm_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--llm", default=None,
                   help="local (default: embedded Qwen2.5-Coder-1.5B) | local:qwen2.5-coder-0.5b | none | openai | "
                        "an OpenAI-compatible base URL; env HOPTRACE_LLM")
    p.add_argument("--llm-model", default=None, help="model name for openai / URL endpoints; env HOPTRACE_LLM_MODEL")


def main(argv: Optional[list[str]] = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return {"build": cmd_build, "ask": cmd_ask, "bench": cmd_bench, "kb": cmd_kb, "serve": cmd_serve,
                "bench-app": cmd_bench_app}[
            args.command](args)
    except HopTraceError as e:
        print(f"hoptrace: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("hoptrace: interrupted; run the same command again to resume", file=sys.stderr)
        return 130


def cmd_build(args) -> int:
    from .embed import DEFAULT_MODEL
    from .kb.presets import build_dataset, build_from_files

    model = args.embed_model or DEFAULT_MODEL
    progress = not args.quiet
    if args.demo or args.dataset:
        out = resolve_kb(args.out) if args.out else None
        report = build_dataset(args.dataset or "musique", out, args.extractor, model, progress)
    else:
        out = resolve_kb(args.out or args.corpus.name.split(".")[0])
        report = build_from_files(out, args.corpus, args.questions, args.openie, args.extractor, model,
                                  name=args.out, progress=progress)
    d = report.as_dict()
    if report.reused:
        print(f"reused: {d['passages_total']} passages, nothing new to add; {d['size_bytes'] / 1e6:.1f} MB")
        print(report.path)
        return 0
    print(f"passages: {d['passages_total']} ({d['passages_added']} new); questions: {d['questions']}; "
          f"extracted: {d['extracted']}; failed: {d['failed'] or 0}; malformed triples skipped: "
          f"{d['malformed_triples']}; embedded: {d['embedded']}; same_as pairs: {d['same_as_pairs']}; "
          f"{d['seconds']} s; {d['size_bytes'] / 1e6:.1f} MB")
    print(report.path)
    return 0


def _context(kb: str, args=None):
    from .embed import get_embedder
    from .kb.presets import ensure_demo
    from .llm import LLMSettings, get_llm
    from .methods import Context
    from .store import open_store

    if kb == "demo":
        ensure_demo()
    store = open_store(kb)
    llm = get_llm(LLMSettings.parse(getattr(args, "llm", None), getattr(args, "llm_model", None)))
    return Context(store, get_embedder(store.info().embed_model), llm)


def _settings(pairs: list[str]) -> dict:
    out = {}
    for pair in pairs:
        if "=" not in pair:
            raise ConfigError(f"--set takes NAME=VALUE, got {pair!r}")
        name, value = pair.split("=", 1)
        try:
            out[name] = json.loads(value)
        except json.JSONDecodeError:
            out[name] = value
    return out


def cmd_ask(args) -> int:
    from .methods import make_method
    from .render_text import render_run, render_stage
    from .validate import check_question

    check_question(args.question)  # before loading anything, so a bad question fails fast
    ctx = _context(args.kb, args)
    method = make_method(args.method, ctx, **_settings(args.set))
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
    if args.json:
        print(json.dumps(run.to_dict(), indent=1, default=str))
    else:
        print(render_run(run))
    return 0 if run.status == "ok" else 1


def cmd_bench(args) -> int:
    from .bench.report import table, write_csv, write_html, write_json
    from .bench.runner import KS, run_bench
    from .corpus import load_questions
    from .methods import method_names

    ctx = _context(args.kb, args)
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
    if args.questions:
        # corpus order = rowid order, which 2Wiki's gold passage indices refer to
        questions = load_questions(args.questions, ctx.store.passages(ctx.store.all_passage_ids()))
    else:
        questions = ctx.store.questions()
        if not questions:
            raise ConfigError(f"KB {args.kb} has no questions; pass --questions FILE")
    if args.limit:
        questions = questions[: args.limit]
    res = run_bench(ctx, args.kb, questions, methods, ks=ks, protocol=args.protocol, progress=not args.quiet,
                    answer=args.answer, difficulty_samples=args.difficulty_samples)
    print(f"{res.n_questions} questions, protocol {res.protocol}, {res.seconds} s, "
          f"LLM: {ctx.llm.describe() if ctx.llm else 'none'}")
    print(table(res))
    if args.json_out:
        out = args.json_out
        out.parent.mkdir(parents=True, exist_ok=True)
        write_json(res, out)
        write_csv(res, out.with_suffix(".csv"))
        write_html(res, out.with_suffix(".html"))
        print(f"wrote {out}, {out.with_suffix('.csv')}, {out.with_suffix('.html')}")
    return 0


def cmd_kb(args) -> int:
    from .store import open_store

    info = open_store(args.kb).info()
    print(json.dumps({"backend": info.backend, "location": info.location, "embed_model": info.embed_model,
                      "embed_dim": info.embed_dim, "counts": info.counts, "meta": info.meta}, indent=1))
    return 0


def cmd_bench_app(args) -> int:
    from ui.benchmark import bench_app

    print(json.dumps(bench_app(runs=args.runs), indent=1))
    return 0


def cmd_serve(args) -> int:
    from ui.app import main as serve

    serve(host=args.host, port=args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
