"""`hoptrace` command line: build, ask, bench, kb info, serve.

Every user error (bad question, bad corpus, unknown method, missing KB) is a
HopTraceError: printed as one line naming the problem, exit code 2.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Optional

from .errors import ConfigError, HopTraceError, InputError
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
    b.add_argument("--extractor", default="auto",
                   help="auto (OpenIE file if given, else rules) | rules | openie | llm (GEAR triples, SAG events, "
                        "GRASP propositions with the LLM)")
    b.add_argument("--layers", default=None,
                   help="with --extractor llm: the layers the LLM makes (default triples,events,propositions); "
                        "the others come from the LLM-free extractors")
    b.add_argument("--propositions", default="auto", choices=["auto", "sentences", "openie"],
                   help="LLM-free GRASP propositions: the passages' sentences (rules) or the imported OpenIE "
                        "triples verbalised (atomic, entity-linked); auto (default): openie when there is an "
                        "OpenIE file (the demo), else sentences")
    b.add_argument("--reads", default="one", choices=["one", "per-layer"],
                   help="with --extractor llm: one (default) reads each passage once for all the LLM layers "
                        "(typed entities, triples, an event; propositions are the triples verbalised); per-layer "
                        "sends each paper's own prompt (GEAR triples, SAG event, GRASP propositions), ~4x the time")
    b.add_argument("--batch-size", type=int, default=None,
                   help="passages per propositions request with --reads per-layer (GRASP A.1.5 default 10)")
    b.add_argument("--estimate", action="store_true",
                   help="print LLM requests and expected tokens (and cost) for this build; call nothing, write nothing")
    b.add_argument("--price-in", type=float, default=None, metavar="USD", help="price per million input tokens")
    b.add_argument("--price-out", type=float, default=None, metavar="USD", help="price per million output tokens")
    b.add_argument("--retry-failed", action="store_true",
                   help="extract again only the passages whose extraction failed (reasons: hoptrace kb info)")
    b.add_argument("--sample", type=int, default=None, metavar="N",
                   help="build on N passages: gold passages of the first questions plus distractors")
    b.add_argument("--out", help="KB name or .sqlite path (default: the dataset or corpus name)")
    b.add_argument("--store", default=None, metavar="es+http://HOST:9200/PREFIX",
                   help="after building, push the KB to this Elasticsearch cluster (incremental); then use "
                        "--kb es+http://HOST:9200/PREFIX with ask, bench and the app")
    b.add_argument("--embed-model", default=None, help="all-MiniLM-L6-v2 (default) | all-mpnet-base-v2")
    _llm_args(b)
    _draft_arg(b)
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

    be = sub.add_parser("bench", help="recall / hit rates / latency / tokens of methods over questions; every run's "
                                      "trace is kept as an experiment (hoptrace experiments / compare)")
    # Defaults are None here and filled in cmd_bench: `--resume` must tell an argument given
    # again from one left out (traces/experiments.py check_resume).
    be.add_argument("--kb", default=None, help="KB name or path (default demo)")
    be.add_argument("--methods", default=None, help="comma-separated method names (required unless --resume)")
    be.add_argument("--questions", type=Path, help="questions file (default: the KB's own questions)")
    be.add_argument("--question-set", default=None, metavar="NAME",
                    help="a question set added with `hoptrace questions add` (with or without gold)")
    be.add_argument("--limit", type=int)
    be.add_argument("--protocol", default=None, choices=["per-k", "slice"],
                    help="per-k: run k-dependent methods once per k in 2/5/10/15 (default); slice: one run at 15")
    be.add_argument("--ks", default=None, help="comma-separated cut-offs (default 2,5,10,15)")
    be.add_argument("--answer", action="store_true", default=None,
                    help="add EM and F1 of the shared answer step (needs an LLM)")
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
    be.add_argument("--json", dest="json_out", type=Path, help="write results here (+ .csv and .html beside it)")
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

    xp = sub.add_parser("export", help="send stored runs as OpenTelemetry spans (OpenInference) to a collector "
                                        "such as Phoenix, or write them as OTLP JSON")
    to = xp.add_mutually_exclusive_group(required=True)
    to.add_argument("--otlp", metavar="URL", help="an OTLP/HTTP collector, e.g. http://127.0.0.1:6006 (Phoenix)")
    to.add_argument("--file", metavar="OUT.jsonl", help="OTLP JSON, one export request a line, for offline use")
    what = xp.add_mutually_exclusive_group(required=True)
    what.add_argument("--session", metavar="ID", help="the runs of one session (an Ask request)")
    what.add_argument("--runs", metavar="IDS", help="run ids, comma-separated")
    what.add_argument("--experiment", metavar="ID", help="every run of a stored experiment (bench, reproduce)")
    xp.add_argument("--traces", metavar="PATH", default=None,
                    help="the trace file to read (default $HOPTRACE_HOME/traces.sqlite); opened read-only")

    ex = sub.add_parser("experiments", help="list stored experiments (bench, reproduce and Benchmark-tab runs)")
    ex.add_argument("--limit", type=int, default=50)
    ex.add_argument("--json", action="store_true", help="everything, including each experiment's spec, as JSON")

    cp = sub.add_parser("compare", help="an experiment's methods compared question by question, with 95 %% "
                                        "intervals, paired randomization tests, and where each method lost the gold")
    cp.add_argument("experiment", help="experiment id (or a unique prefix of 6+ characters)")
    cp.add_argument("--metric", default="recall@5", help="recall@K | anyhit@K | allhit@K | em | f1 against gold, or "
                    "ndcg@K | p@K | jrecall@K | judged@K against judgments (hoptrace judge) (default recall@5)")
    cp.add_argument("--judges", default="person,llm,answer",
                    help="judged metrics: whose grades, in the order a pair's grade is taken (default person,llm,answer)")
    cp.add_argument("--rel", type=int, default=2, help="judged metrics: the grade counted relevant (default 2)")
    cp.add_argument("--methods", default=None, help="comma-separated subset of the experiment's methods")
    cp.add_argument("--json", dest="json_out", type=Path, help="write the comparison as JSON here")
    cp.add_argument("--html", dest="html_out", type=Path, help="write a self-contained HTML report here")

    from .cli_evidence import add_parsers as evidence_parsers

    evidence_parsers(sub, _llm_args)

    rp = sub.add_parser("reproduce", help="a paper's tables on a KB: our figures beside the paper's, and its claims")
    rp.add_argument("paper", choices=["griever", "gear", "sag", "grasp"])
    rp.add_argument("--kb", default="demo")
    rp.add_argument("--limit", type=int, default=None, help="questions for the LLM methods (the others run on all)")
    rp.add_argument("--questions-limit", type=int, default=None, help="questions for every method")
    rp.add_argument("--no-llm-rows", action="store_true", help="skip the rows that need an LLM")
    rp.add_argument("--dataset", choices=["musique", "2wiki", "hotpotqa"], default=None,
                    help="which of the paper's columns to compare with (default: the KB's data set)")
    rp.add_argument("--json", dest="json_out", type=Path, help="write the result as JSON here")
    rp.add_argument("--html", dest="html_out", type=Path, help="write a self-contained HTML report with plots here")
    _llm_args(rp)
    rp.add_argument("--quiet", action="store_true")

    sv = sub.add_parser("silver", help="score an extractor's triples and entities against the demo's GPT-3.5 "
                                       "OpenIE triples (silver reference)")
    sv.add_argument("--extractor", default="rules", choices=["rules", "llm"])
    sv.add_argument("--passages", type=int, default=None,
                    help="the first N MuSiQue passages the reference covers (default 100; with --kb, all the KB holds)")
    sv.add_argument("--reads", default="per-layer", choices=["one", "per-layer"],
                    help="with --extractor llm: per-layer scores GEAR's triple prompt; one scores the triples of "
                         "the one-read prompt that also makes events and typed entities")
    sv.add_argument("--kb", default=None, metavar="KB",
                    help="score the triples and entities a built KB already holds (any extractor, any sample) "
                         "instead of extracting: its passages that the reference covers")
    sv.add_argument("--json", dest="json_out", type=Path, help="write the scores here")
    _llm_args(sv)
    _draft_arg(sv)

    rs = sub.add_parser("record-showcase", help="record the LLM methods' full traces on a few demo questions, "
                                               "for the app to open instantly (re-run after a prompt change)")
    rs.add_argument("--kb", default="demo")
    rs.add_argument("--questions", type=int, default=12, help="how many (spread over 2-, 3- and 4-hop)")
    rs.add_argument("--methods", default="griever,gear,sag,grasp", help="comma-separated method names")
    rs.add_argument("--out", type=Path, default=None, help="default data/showcase/<kb>.json.gz")
    rs.add_argument("--update", action="store_true",
                    help="re-record only --methods into the existing recording (its questions, its model); "
                         "keep the other methods' runs")
    _llm_args(rs)

    kb = sub.add_parser("kb", help="inspect a KB")
    kb_sub = kb.add_subparsers(dest="kb_command", required=True)
    info = kb_sub.add_parser("info", help="counts, extraction per layer (with failure reasons), LLM extraction cost")
    info.add_argument("kb")
    info.add_argument("--json", action="store_true", help="everything, including all metadata, as JSON")

    ba = sub.add_parser("bench-app", help="app start-to-ready and click-to-first-stage times (headless Chromium)")
    ba.add_argument("--users", type=int, default=0,
                    help="load test instead: this many concurrent visitors on loopback (ui/load.py)")
    ba.add_argument("--minutes", type=float, default=5.0, help="load test duration")
    ba.add_argument("--methods", default="bm25,dense,composed,griever", help="load test: methods a request")
    ba.add_argument("--solo", type=int, default=20, help="load test: single-user requests measured first")
    ba.add_argument("--max-requests", type=int, default=2000, help="load test: bound on requests in all")
    ba.add_argument("--app-dir", type=Path, default=None, help="load test: the app.py of another checkout (before/after)")
    ba.add_argument("--compare-bench", action="store_true",
                    help="load test: then run `bench` on the first 40 demo questions for the LLM-free methods, back "
                         "to back and with 500 ms idle before each, and set each column's latency beside both")
    ba.add_argument("--runs", type=int, default=5)

    bs = sub.add_parser("bench-store", help="SQLite store scaling: memory, build time, latency on synthetic KBs")
    bs.add_argument("--sizes", default="10000,100000,1000000", help="passages per synthetic KB, comma-separated")
    bs.add_argument("--dir", type=Path, default=None, help="where to write the KBs (default $HOPTRACE_HOME/scale)")
    bs.add_argument("--queries", type=int, default=50)
    bs.add_argument("--keep", action="store_true", help="keep the synthetic KBs")
    bs.add_argument("--json", dest="json_out", type=Path, help="write the rows here")

    s = sub.add_parser("serve", help="start the web app")
    s.add_argument("--port", type=int, default=None)
    s.add_argument("--host", default=None)
    s.add_argument("--public", action="store_true", default=None,
                   help="public mode: each visitor sees only their own runs, caps on uploads, benchmarks and "
                        "LLM work, no server paths on the page (env HOPTRACE_PUBLIC=1; on in the Dockerfile)")
    s.add_argument("--otlp", default=None, metavar="URL",
                   help="send each new run's spans (OpenInference) to this OTLP/HTTP collector, e.g. Phoenix at "
                        "http://127.0.0.1:6006, in the background (env HOPTRACE_OTLP_ENDPOINT)")
    _llm_args(s)
    return p


def _draft_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--draft-tokens", type=int, default=None, metavar="N",
                   help="embedded model only: tokens guessed from the passage and checked in one pass while "
                        "extracting (prompt-lookup drafts, 0 = off; default 3, env HOPTRACE_DRAFT_TOKENS)")


def _llm_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--llm", default=None,
                   help="local (default: embedded Qwen2.5-Coder-1.5B) | local:qwen2.5-coder-0.5b | none | openai | "
                        "an OpenAI-compatible base URL; env HOPTRACE_LLM")
    p.add_argument("--llm-model", default=None, help="model name for openai / URL endpoints; env HOPTRACE_LLM_MODEL")
    p.add_argument("--profile", default=None, choices=["paper", "local"],
                   help="LLM methods' hyperparameters: paper, or local (measured for a small model on 2 cores); "
                        "default local for the embedded model, paper for an endpoint; env HOPTRACE_PROFILE")


def main(argv: Optional[list[str]] = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return {"build": cmd_build, "ask": cmd_ask, "bench": cmd_bench, "kb": cmd_kb, "serve": cmd_serve,
                "bench-app": cmd_bench_app, "bench-store": cmd_bench_store, "reproduce": cmd_reproduce,
                "record-showcase": cmd_record_showcase, "silver": cmd_silver, "experiments": cmd_experiments,
                "compare": cmd_compare, "bench-concurrency": cmd_bench_concurrency, "soak": cmd_soak,
                "export": cmd_export, **_evidence_commands()}[
            args.command](args)
    except HopTraceError as e:
        print(f"hoptrace: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("hoptrace: interrupted; run the same command again to resume", file=sys.stderr)
        return 130


def _evidence_commands() -> dict:
    from .cli_evidence import COMMANDS

    return COMMANDS


def cmd_build(args) -> int:
    from .datasets import get_dataset
    from .embed import DEFAULT_MODEL
    from .kb.presets import ALL_LAYERS, ExtractionPlan, build_from_files, dataset_out

    model = args.embed_model or DEFAULT_MODEL
    layers = tuple(x.strip() for x in args.layers.split(",") if x.strip()) if args.layers else ALL_LAYERS
    if args.layers and args.extractor != "llm":
        raise ConfigError("--layers chooses the layers the LLM makes: use it with --extractor llm")
    if args.estimate and args.extractor != "llm":
        raise ConfigError("--estimate prices LLM extraction: use it with --extractor llm")
    llm = None
    if args.extractor == "llm":
        from .kb.extract.llm import extraction_settings
        from .llm import LLMSettings
        llm = extraction_settings(LLMSettings.parse(args.llm, args.llm_model), args.draft_tokens)
    if args.demo or args.dataset:
        ds = get_dataset(args.dataset or "musique")
        out, name = dataset_out(ds.name, resolve_kb(args.out) if args.out else None)
        corpus, questions, openie, name = ds.corpus, ds.questions, ds.openie, args.out or name
    else:
        out = resolve_kb(args.out or args.corpus.name.split(".")[0])
        corpus, questions, openie, name = args.corpus, args.questions, args.openie, args.out
    plan = ExtractionPlan(args.extractor, openie, layers, llm, args.batch_size, args.propositions, args.reads)
    plan.check()
    if args.store:
        from .store.elastic import parse_spec
        parse_spec(args.store)  # a bad spec fails before the build, not after it
    if args.estimate:
        return _estimate(plan, out, corpus, questions, args)
    before = _llm_done(out, plan)
    report = build_from_files(out, corpus, questions, openie, embed_model=model, name=name,
                              progress=not args.quiet, plan=plan, sample=args.sample,
                              retry_failed=args.retry_failed)
    d = report.as_dict()
    if report.reused:
        print(f"reused: {d['passages_total']} passages, nothing new to add"
              f"{' and no failed passage to retry' if args.retry_failed else ''}; {d['size_bytes'] / 1e6:.1f} MB")
        print(report.path)
        _push(args, out)
        return 0
    if report.retried:
        print(f"retrying failed passages: {report.retried}")
    print(f"passages: {d['passages_total']} ({d['passages_added']} new); questions: {d['questions']}; "
          f"extracted: {d['extracted']}; failed: {d['failed'] or 0}; malformed items skipped: "
          f"{d['malformed_triples']}; embedded: {d['embedded']}; same_as pairs: {d['same_as_pairs']}; "
          f"{d['seconds']} s; {d['size_bytes'] / 1e6:.1f} MB")
    for run in report.llm:
        print(f"LLM {run['layer']}: {run['model']} · {run['passages']} passages in {run['calls']} calls "
              f"({run['cached_calls']} from the cache, {run['repairs']} repairs) · {run['tokens_in']:,} tokens in / "
              f"{run['tokens_out']:,} out · {run['seconds']} s · {run['failed']} failed")
    if report.llm and plan.llm is not None and plan.llm.backend == "local":
        _calibrate(out, plan, before, corpus, questions, args.sample, report.llm)
    if report.failed_total:
        print(f"failed passages in the KB: {report.failed_total} — reasons: hoptrace kb info {out.stem}; "
              f"redo them: the same command with --retry-failed")
    print(report.path)
    _push(args, out)
    return 0


def _llm_done(out: Path, plan) -> set[str]:
    if plan.extractor != "llm":
        return set()
    from .kb.build import extracted_passage_ids

    return set().union(*extracted_passage_ids(out, plan.llm_layers).values())


def _calibrate(out: Path, plan, before: set[str], corpus: Path, questions: Optional[Path],
               sample: Optional[int], runs: list[dict]) -> None:
    """After an embedded LLM build: the estimate of the passages it extracted beside what they
    cost, and the measured speed kept for later estimates on this machine."""
    from .kb.extract.llm import estimate
    from .kb.extract.llm.estimate import SPEED_FILE, calibrate
    from .kb.presets import load_sources

    new_ids = _llm_done(out, plan) - before
    run = {k: sum(r[k] for r in runs) for k in ("passages", "tokens_in", "tokens_out", "seconds", "cached_calls")}
    if not new_ids or run["cached_calls"]:  # answers from the response cache say nothing about speed
        return
    passages, _ = load_sources(corpus, questions, sample)
    forecast = estimate([p for p in passages if p.id in new_ids], list(plan.llm_layers), plan.llm,
                        plan.batch_size, reads=plan.reads)
    print(f"estimate for these {len(new_ids)} passages: {forecast.tokens_in:,} tokens in / {forecast.tokens_out:,} out, "
          f"{forecast.local_hours() * 3600:,.0f} s; measured: {run['tokens_in']:,} / {run['tokens_out']:,}, "
          f"{run['seconds']:,.0f} s")
    cal = calibrate(plan.llm.speed_key, forecast, runs)
    print(f"this machine ran {plan.llm.model} at {1 / cal['factor']:.2f}x the default speed; later estimates use that "
          f"(kept in {SPEED_FILE} in the HopTrace home)")


def _push(args, kb_path: Path) -> None:
    if not args.store:
        return
    from .store.elastic import push_kb

    rep = push_kb(kb_path, args.store, progress=not args.quiet)
    print(f"pushed to {rep.spec}: {rep.sent} documents in {rep.seconds} s")


def _estimate(plan, out: Path, corpus: Path, questions: Optional[Path], args) -> int:
    """Price the LLM layers of this build: only passages the KB at `out` lacks are counted."""
    from .kb.extract.llm import estimate
    from .kb.build import extracted_passage_ids
    from .kb.presets import load_sources

    passages, _ = load_sources(corpus, questions, args.sample)
    done = extracted_passage_ids(out, plan.llm_layers, include_failed=not args.retry_failed)
    est = estimate(passages, list(plan.llm_layers), plan.llm, plan.batch_size, done, args.price_in, args.price_out,
                   reads=plan.reads)
    print(f"KB: {out}{'' if out.exists() else ' (new)'} · {len(passages):,} passages in the source")
    print(est.render())
    return 0


def _context(kb: str, args=None, **llm_overrides):
    from .embed import get_embedder
    from .kb.presets import ensure_demo
    from .llm import LLMSettings, get_llm
    from .methods import Context
    from .store import open_store

    if kb == "demo":
        ensure_demo()
    store = open_store(kb)
    llm = get_llm(LLMSettings.parse(getattr(args, "llm", None), getattr(args, "llm_model", None), **llm_overrides))
    return Context(store, get_embedder(store.info().embed_model), llm, profile=getattr(args, "profile", None))


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


# What an experiment records of `hoptrace bench`'s arguments, and their defaults: a resume
# compares the ones given again against these.
BENCH_ARGS = {"kb": "demo", "methods": None, "questions": None, "question_set": None, "limit": None, "protocol": "per-k", "ks": None,
              "answer": False, "difficulty_samples": 0, "pause_ms": 0.0, "llm": None, "llm_model": None,
              "profile": None}


def _bench_args(args) -> dict:
    """The recorded arguments as given (None where left out), paths as text."""
    out = {}
    for k in BENCH_ARGS:
        v = getattr(args, k, None)
        out[k] = str(v) if isinstance(v, Path) else v
    return out


def cmd_bench(args) -> int:
    from .bench.report import table, write_csv, write_html, write_json
    from .bench.runner import KS, bench_plan, run_bench
    from .corpus import load_questions
    from .methods import method_names

    if args.concurrency < 1:
        raise ConfigError(f"--concurrency must be at least 1, got {args.concurrency}")
    experiments = exp = None
    asked = _bench_args(args)
    if args.resume:
        if args.no_store:
            raise ConfigError("--resume continues a stored experiment; it cannot be combined with --no-store")
        from traces.experiments import Experiments, check_resume

        experiments = Experiments(_trace_store())
        exp = experiments.get(args.resume)
        check_resume(exp, asked)
        for k, v in exp.spec["args"].items():
            setattr(args, k, Path(v) if k == "questions" and v else v)
    for k, v in BENCH_ARGS.items():
        if getattr(args, k, None) is None:
            setattr(args, k, v)
    if not args.methods:
        raise ConfigError("--methods is required (comma-separated method names), unless --resume ID")
    concurrency_llm = {"concurrency": max(args.concurrency, 4)} if args.concurrency > 1 else {}
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
    if args.questions and args.question_set:
        raise ConfigError("--questions and --question-set both name the questions; give one")
    if args.questions:
        # corpus order = rowid order, which 2Wiki's gold passage indices refer to
        questions = load_questions(args.questions, ctx.store.passages(ctx.store.all_passage_ids()))
    elif args.question_set and args.question_set != "built-in":
        from traces.questionsets import QuestionSets

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
        from traces.experiments import Experiments, kb_fingerprint, method_spec, question_record
        from .methods import make_method

        experiments = experiments or Experiments(_trace_store())
        fp = kb_fingerprint(ctx.store)
        if exp is None:
            insts = {m: make_method(m, ctx) for m in methods}
            spec = {"methods": {m: method_spec(i, m, {}) for m, i in insts.items()}, "ks": list(ks),
                    "protocol": args.protocol, "plan": bench_plan(insts, ks, args.protocol),
                    "questions": [question_record(q) for q in questions], "args": _bench_args(args),
                    "question_set": args.question_set or ("file " + args.questions.name if args.questions
                                                          else "built-in")}
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
            from retrieval import cpu
            from traces.experiments import code_version
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
                    sink=experiments.sink(exp) if exp else None, done=done, concurrency=args.concurrency)
    pause = f", {args.pause_ms:g} ms idle before each question (untimed)" if args.pause_ms else ""
    conc = f", {args.concurrency} questions in flight" if args.concurrency > 1 else ""
    print(f"{res.n_questions} questions, protocol {res.protocol}, {res.seconds} s{pause}{conc}, "
          f"LLM: {ctx.llm.describe() if ctx.llm else 'none'}")
    print(table(res))
    if exp is not None:
        experiments.finish(exp, res.to_json(include_per_question=False))
        n = len(experiments.entries(exp))
        has_gold = any(q.gold_passage_ids for q in questions)
        nxt = (f"hoptrace compare {exp.id[:12]} --metric recall@5" if has_gold else
               f"no gold passages: recall and hit rates left out; hoptrace judge {exp.id[:12]} --depth 10 pools "
               "and judges the runs, then hoptrace compare ... --metric ndcg@5")
        print(f"experiment {exp.id}: {n} runs stored, {experiments.size_bytes(exp) / 1e6:.1f} MB of traces, "
              f"storing took {exp.store_seconds:.2f} s of the {res.seconds} s · {nxt}")
    if args.json_out:
        out = args.json_out
        out.parent.mkdir(parents=True, exist_ok=True)
        write_json(res, out)
        write_csv(res, out.with_suffix(".csv"))
        write_html(res, out.with_suffix(".html"))
        print(f"wrote {out}, {out.with_suffix('.csv')}, {out.with_suffix('.html')}")
    return 0


def cmd_soak(args) -> int:
    from ui.soak import soak

    res = soak(args.minutes, args.users, args.llm_users, args.llm_method, args.cap_mb, args.max_requests, args.llm)
    print(json.dumps(res, indent=1))
    ok = (res["errors"] == 0 and res["lost"] == 0 and res["mixed_runs"] == 0 and res["sessions_missing_runs"] == 0
          and res["db_under_cap"])
    return 0 if ok else 1


def cmd_bench_concurrency(args) -> int:
    from .bench.concurrency import measure

    try:
        levels = [int(x) for x in args.levels.split(",")]
        ks = [int(x) for x in args.ks.split(",")]
    except ValueError:
        raise ConfigError(f"--levels and --ks take comma-separated integers, got {args.levels!r} / {args.ks!r}") from None
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


def _trace_store():
    from traces.store import TraceStore, default_path

    store = TraceStore(default_path(), recover=True)
    if store.recovered:
        print(f"hoptrace: warning: {store.recovered}", file=sys.stderr)
    url = os.environ.get("HOPTRACE_OTLP_ENDPOINT", "").strip()
    if url:  # each run's spans as it is stored, as the app does; sent before the command exits
        import atexit

        from traces.otel_export import LiveExport

        live = LiveExport(url)
        store.on_saved.append(live.submit)
        atexit.register(lambda: (live.flush(60.0), live.shutdown()))
    return store


def cmd_export(args) -> int:
    from traces.otel_export import JsonlFileExporter, check_reachable, endpoint_url, export_stored, otlp_exporter
    from traces.store import TraceReader, default_path

    where = endpoint_url(args.otlp) if args.otlp else args.file  # a malformed URL is named first
    reader = TraceReader(args.traces or default_path())
    try:
        ids = reader.run_ids(runs=(args.runs or "").split(","), session=args.session, experiment=args.experiment)
        if args.otlp:
            check_reachable(where)
            exporter = otlp_exporter(where)
        else:
            try:
                exporter = JsonlFileExporter(Path(args.file))
            except OSError as e:
                raise InputError(f"cannot write {args.file}: {e.strerror}") from e
        rep = export_stored(reader, ids, exporter, where)
    finally:
        reader.close()
    print(f"exported {rep.runs} runs as {rep.spans} spans to {where} in {rep.seconds} s"
          + (f"; {rep.failed_spans} spans were refused or lost" if rep.failed_spans else ""))
    return 1 if rep.failed_spans else 0


def cmd_experiments(args) -> int:
    from traces.experiments import Experiments

    exps = Experiments(_trace_store()).list(limit=args.limit)
    if args.json:
        print(json.dumps([e.__dict__ for e in exps], indent=1, default=str))
        return 0
    if not exps:
        print("no experiments stored yet: `hoptrace bench` or `hoptrace reproduce` make one")
        return 0
    for e in exps:
        print(f"{e.describe()} · {e.provenance()}")
    return 0


def cmd_compare(args) -> int:
    from traces.compare import compare, render_text, write_html
    from traces.experiments import Experiments

    experiments = Experiments(_trace_store())
    exp = experiments.get(args.experiment)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()] if args.methods else None
    judged = None
    from traces.judging.measures import is_judged_metric

    if is_judged_metric(args.metric):
        from traces.judging.judged import judged_for

        judged = judged_for(experiments.traces, exp, "", [s.strip() for s in args.judges.split(",") if s.strip()],
                            args.rel)
    cmp = compare(experiments, exp, args.metric, methods, judged)
    print(render_text(cmp))
    if args.json_out:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        args.json_out.write_text(json.dumps(cmp.to_json(), indent=1, default=str))
        print(f"wrote {args.json_out}")
    if args.html_out:
        args.html_out.parent.mkdir(parents=True, exist_ok=True)
        write_html(cmp, args.html_out)
        print(f"wrote {args.html_out}")
    return 0


def cmd_reproduce(args) -> int:
    from .bench.reproduce import render, reproduce, write_html, write_json

    for flag in ("limit", "questions_limit"):
        if getattr(args, flag) is not None and getattr(args, flag) < 1:
            raise ConfigError(f"--{flag.replace('_', '-')} must be at least 1, got {getattr(args, flag)}")
    ctx = _context(args.kb, args)
    questions = ctx.store.questions()
    if not questions:
        raise ConfigError(f"KB {args.kb} has no questions with gold passages; reproduce needs them")
    if args.questions_limit:
        questions = questions[: args.questions_limit]
    from .bench.reproduce import uses_llm, select_rows
    llm_rows = {r.key for r in select_rows(args.paper, not args.no_llm_rows) if uses_llm(r)}
    if llm_rows and ctx.llm is not None:
        n = min(args.limit or len(questions), len(questions))
        print(f"{len(llm_rows)} rows need the LLM: {len(llm_rows) * n} runs on {n} questions "
              f"(a minute or more each on the embedded model; --limit N runs fewer)", file=sys.stderr)
    experiments, exp = _reproduce_experiment(ctx, args, questions, select_rows(args.paper, not args.no_llm_rows))
    rep = reproduce(ctx, args.kb, questions, args.paper, progress=not args.quiet,
                    include_llm=not args.no_llm_rows, llm_limit=args.limit, dataset=args.dataset,
                    sink=experiments.sink(exp))
    experiments.finish(exp, rep.to_json())
    print(f"LLM: {ctx.llm.describe() if ctx.llm else 'none'}")
    print(render(rep))
    print(f"experiment {exp.id}: every run's trace kept · hoptrace compare {exp.id[:12]} --metric recall@5")
    for path, write in ((args.json_out, write_json), (args.html_out, write_html)):
        if path:
            path.parent.mkdir(parents=True, exist_ok=True)
            write(rep, path)
            print(f"wrote {path}")
    return 0


def _reproduce_experiment(ctx, args, questions, rows):
    """`reproduce` keeps its runs as an experiment, each table row a method of it."""
    from traces.experiments import Experiments, kb_fingerprint, method_spec, question_record
    from .methods import make_method

    experiments = Experiments(_trace_store())
    spec = {"methods": {r.key: method_spec(make_method(r.method, ctx, **dict(r.settings)), r.method, dict(r.settings))
                        for r in rows},
            "ks": sorted({int(m.split("@")[1]) for r in rows for d in r.paper.values() for m in d if "@" in m}),
            "protocol": "per-k", "questions": [question_record(q) for q in questions],
            "args": {"paper": args.paper, "kb": args.kb, "limit": args.limit, "questions_limit": args.questions_limit,
                     "no_llm_rows": args.no_llm_rows, "dataset": args.dataset}}
    exp = experiments.start("reproduce", args.kb, kb_fingerprint(ctx.store), ctx.llm.describe() if ctx.llm else "none",
                            spec)
    return experiments, exp


def cmd_silver(args) -> int:
    from .embed import DEFAULT_MODEL, get_embedder
    from .kb.extract.silver import evaluate

    if args.passages is not None and args.passages < 1:
        raise ConfigError(f"--passages must be at least 1, got {args.passages}")
    if args.kb:
        return _silver_kb(args)
    args.passages = args.passages or 100
    if args.extractor == "rules":
        from .kb.extract.rules import RulesExtractor
        extractor, what = RulesExtractor(("triples",), n_process=1), "rules (LLM-free)"
    else:
        from .kb.extract.llm import extraction_settings, llm_extractors
        from .llm import LLMSettings, get_llm
        llm = get_llm(extraction_settings(LLMSettings.parse(args.llm, args.llm_model), args.draft_tokens))
        if llm is None:
            raise ConfigError("--extractor llm needs an LLM (--llm local, openai or a URL)")
        if args.reads == "one":  # the joint prompt, scored on its triples
            extractor = llm_extractors(llm, ("triples", "events", "propositions"), reads="one")[0]
        else:
            extractor = llm_extractors(llm, ("triples",))[0]
        what = f"llm ({llm.describe()}, reads {args.reads})"
    sc, seconds = evaluate(extractor, args.passages, get_embedder(DEFAULT_MODEL))
    d = {"extractor": what, "seconds": round(seconds, 1), "seconds_per_passage": round(seconds / max(1, sc.passages), 3),
         **sc.as_dict()}
    print(f"{what} on {sc.passages} passages, against GPT-3.5 OpenIE ({sc.reference_triples} triples, "
          f"{sc.reference_entities} entities):")
    return _silver_report(sc, f"extracted) · {d['seconds_per_passage']} s a passage", d, args.json_out)


def _silver_report(sc, tail: str, record: dict, json_out: Optional[Path]) -> int:
    """The scores line both `silver` forms print, and their JSON record."""
    print(f"  entity recall {sc.entity_recall:.3f} · triple recall {sc.triple_recall:.3f} · precision "
          f"{sc.precision:.3f} ({sc.extracted_triples} triples {tail}")
    if json_out:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(record, indent=2))
    return 0


def _silver_kb(args) -> int:
    """`hoptrace silver --kb KB`: the KB's own index against the silver reference."""
    from .embed import DEFAULT_MODEL, get_embedder
    from .kb.extract.silver import embedding_similarity, kb_extractions, reference_for, score

    path = resolve_kb(args.kb)
    if not path.exists():
        raise ConfigError(f"no KB at {path} (build it first, or name an existing KB)")
    extracted = kb_extractions(path)
    reference = reference_for((ex.passage_id for ex in extracted), first=args.passages)
    if not reference:
        raise ConfigError(f"none of the {len(extracted):,} passages of {args.kb} is in the silver reference "
                          "(the bundled MuSiQue passages with GPT-3.5 OpenIE triples)")
    sc = score(extracted, reference, embedding_similarity(get_embedder(DEFAULT_MODEL)))
    failed = sum(1 for ex in extracted if ex.failed and ex.passage_id in reference)
    within = f" (of the reference's first {args.passages})" if args.passages else ""
    print(f"KB {args.kb}: {sc.passages} of its {len(extracted):,} passages are in the silver reference{within} "
          f"({sc.reference_triples} triples, {sc.reference_entities} entities){f'; {failed} failed, not scored' if failed else ''}:")
    return _silver_report(sc, "in the KB)", {"kb": str(path), **sc.as_dict()}, args.json_out)


def cmd_record_showcase(args) -> int:
    from .showcase import choose_questions, record

    if args.questions < 1:
        raise ConfigError(f"--questions must be at least 1, got {args.questions}")
    ctx = _context(args.kb, args)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    questions = choose_questions(ctx.store.questions(), args.questions)
    if not questions:
        raise ConfigError(f"KB {args.kb} has no questions with gold passages to record")
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

    out = record(ctx, args.kb, questions, methods, out=args.out, on_run=done, update=args.update)
    print(f"wrote {out} ({len(asked)} questions × {len(methods)} methods, {time.time() - t0:.0f} s, "
          f"LLM {ctx.llm.describe()})")
    if failed:
        # Written anyway, to be looked at, but not to be shipped as is: a visitor would see
        # the errors as the method's behaviour.
        print(f"hoptrace: error: {len(failed)} of the recorded runs ended in error, e.g. {failed[0][:200]}; "
              "look at them before committing the recording", file=sys.stderr)
        return 1
    return 0


def cmd_kb(args) -> int:
    from .store import open_store

    info = open_store(args.kb).info()
    if args.json:
        print(json.dumps({"backend": info.backend, "location": info.location, "embed_model": info.embed_model,
                          "embed_dim": info.embed_dim, "counts": info.counts, "extraction": info.extraction,
                          "meta": info.meta}, indent=1))
        return 0
    print(render_kb_info(info))
    return 0


def render_kb_info(info) -> str:
    """`hoptrace kb info`: what the KB holds, who extracted it, what failed and what the LLM cost."""
    lines = [f"{info.meta.get('name', '?')} · {info.backend} · {info.location}",
             f"embedder: {info.embed_model} ({info.embed_dim}-d)",
             "counts: " + ", ".join(f"{k} {v:,}" for k, v in info.counts.items())]
    if info.extraction:
        lines.append("extraction (passages per layer):")
        for row in info.extraction:
            lines.append(f"  {row['layer']:<13} {row['extractor']:<32} {row['status']:<6} {row['passages']:>7,}")
            lines.extend(f"      reason: {r[:200]}" for r in row["reasons"])
    runs = info.meta.get("llm_extraction") or []
    if runs:
        lines.append("LLM extraction runs:")
        for r in runs:
            lines.append(f"  {r['finished']}  {r['layer']:<13} {r['model']} · {r['passages']} passages, {r['calls']} "
                         f"calls ({r['cached_calls']} cached, {r['repairs']} repairs) · {r['tokens_in']:,} tok in / "
                         f"{r['tokens_out']:,} out · {r['seconds']} s · {r['failed']} failed")
        t_in, t_out = sum(r["tokens_in"] for r in runs), sum(r["tokens_out"] for r in runs)
        secs = sum(r["seconds"] for r in runs)
        lines.append(f"  total: {t_in:,} tokens in / {t_out:,} out · {secs / 60:.1f} min")
    last = info.meta.get("last_build")
    if last:
        lines.append(f"last build: {last.get('passages_added', 0)} passages added, {last.get('seconds')} s")
    return "\n".join(lines)


def cmd_bench_app(args) -> int:
    from ui.benchmark import bench_app

    if args.users:
        from ui import load as load_mod
        from ui.load import load_test

        methods = tuple(m.strip() for m in args.methods.split(",") if m.strip())
        res = load_test(args.users, args.minutes, methods, solo=args.solo,
                        max_requests=args.max_requests, app_dir=args.app_dir or load_mod.REPO_ROOT)
        if args.compare_bench:
            res["column_vs_bench"] = load_mod.compare_with_bench(res["method_latency_shown"], methods)
        print(json.dumps(res, indent=1))
        return 0
    print(json.dumps(bench_app(runs=args.runs), indent=1))
    return 0


def cmd_bench_store(args) -> int:
    from .bench.store_scale import render, run
    from .paths import home

    try:
        sizes = [int(x) for x in args.sizes.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"--sizes takes comma-separated integers, got {args.sizes!r}") from None
    if not sizes or any(n < 100 for n in sizes):
        raise ConfigError(f"--sizes: each size must be at least 100 passages, got {args.sizes!r}")
    rows = run(sizes, args.dir or home() / "scale", args.queries, args.keep)
    print(render(rows))
    if args.json_out:
        args.json_out.write_text(json.dumps(rows, indent=1))
    return 0


def cmd_serve(args) -> int:
    from .llm import LLMSettings
    from ui.app import main as serve

    # The flags win over the environment (README's --llm table); parsed here so a bad spec
    # fails before the app starts.
    serve(host=args.host, port=args.port, llm_settings=LLMSettings.parse(args.llm, args.llm_model),
          profile=args.profile, public=args.public, otlp=args.otlp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
