"""`hoptrace reproduce` and `silver`: a paper's tables on a KB, and an extractor scored against silver triples."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from ..core.errors import ConfigError
from ..core.paths import resolve_kb
from .common import _context, _draft_arg, _llm_args, _trace_store
from .flags import emit_json, json_arg, out_arg, outputs, positive, say


def add_parsers(sub) -> None:
    rp = sub.add_parser("reproduce", help="a paper's tables on a KB: our figures beside the paper's, and its claims")
    rp.add_argument("paper", choices=["griever", "gear", "sag", "grasp"])
    rp.add_argument("--kb", default="demo")
    rp.add_argument("--limit", type=int, default=None, metavar="N", help="the first N questions, for every row")
    rp.add_argument("--llm-limit", type=int, default=None, metavar="N",
                    help="the first N questions for the rows that need an LLM (the others run on all, or --limit)")
    rp.add_argument("--no-llm-rows", action="store_true", help="skip the rows that need an LLM")
    rp.add_argument("--dataset", choices=["musique", "2wiki", "hotpotqa"], default=None,
                    help="which of the paper's columns to compare with (default: the KB's data set)")
    json_arg(rp, "the result")
    out_arg(rp, "the result (JSON) or a self-contained HTML report with plots", repeatable=True)
    rp.add_argument("--html", dest="html_out", type=Path, metavar="PATH",
                    help="write a self-contained HTML report to PATH (the same as --out PATH.html)")
    _llm_args(rp, profile_help="the rows' hyperparameters: paper (default here: the paper's rows as the paper "
                               "states them), or local (HopTrace's measured choices)")
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
    json_arg(sv, "the scores")
    out_arg(sv, "the scores as JSON")
    _llm_args(sv)
    _draft_arg(sv)


def cmd_reproduce(args) -> int:
    from ..bench.reproduce import render, reproduce, write_html, write_json

    positive(args.limit, "--limit")
    positive(args.llm_limit, "--llm-limit")
    files = outputs(args)
    ctx = _context(args.kb, args)
    questions = ctx.store.questions()
    if not questions:
        raise ConfigError(f"KB {args.kb} has no questions with gold passages; reproduce needs them")
    if args.limit:
        questions = questions[: args.limit]
    from ..bench.paper_tables import PAPERS
    from ..bench.reproduce import select_rows, uses_llm
    llm_rows = {r.key for r in select_rows(args.paper, not args.no_llm_rows) if uses_llm(r)}
    if llm_rows and ctx.llm is not None:
        n = min(args.llm_limit or len(questions), len(questions))
        print(f"{len(llm_rows)} rows need the LLM: {len(llm_rows) * n} runs on {n} questions "
              f"(a minute or more each on the embedded model; --llm-limit N runs fewer)", file=sys.stderr)
    experiments, exp = _reproduce_experiment(ctx, args, questions, select_rows(args.paper, not args.no_llm_rows))
    rep = reproduce(ctx, args.kb, questions, args.paper, progress=not args.quiet,
                    include_llm=not args.no_llm_rows, llm_limit=args.llm_limit, dataset=args.dataset,
                    sink=experiments.sink(exp))
    experiments.finish(exp, rep.to_json())
    say(args, f"LLM: {ctx.llm.describe() if ctx.llm else 'none'}")
    say(args, render(rep))
    first = next(iter(rep.metrics), "recall@5")
    say(args, f"experiment {exp.id}: every run's trace kept · hoptrace compare {exp.id[:12]} --metric {first} "
              f"(the paper's measure: {PAPERS[args.paper]['evaluation'].measure}@k)")
    for suffix, write in ((".json", write_json), (".html", write_html)):
        for path in files.get(suffix, []):
            path.parent.mkdir(parents=True, exist_ok=True)
            write(rep, path)
            say(args, f"wrote {path}")
    if args.json:
        emit_json(rep.to_json())
    return 0


def _reproduce_experiment(ctx, args, questions, rows):
    """`reproduce` keeps its runs as an experiment, each table row a method of it."""
    from traces.storage.experiments import Experiments, kb_fingerprint, method_spec, question_record

    from ..bench.paper_tables import PAPERS
    from ..bench.reproduce import paper_ks
    from ..methods import make_method

    experiments = Experiments(_trace_store())
    evaluation = PAPERS[args.paper]["evaluation"]
    profile = ctx.profile or "paper"
    spec = {"methods": {r.key: method_spec(make_method(r.method, ctx, profile, **dict(r.settings)), r.method,
                                           dict(r.settings)) for r in rows},
            "ks": paper_ks(rows, evaluation), "protocol": evaluation.protocol, "profile": profile,
            "questions": [question_record(q) for q in questions],
            "args": {"paper": args.paper, "kb": args.kb, "limit": args.limit, "llm_limit": args.llm_limit,
                     "no_llm_rows": args.no_llm_rows, "dataset": args.dataset},
            "llm_server": ctx.llm.server if ctx.llm else ""}
    exp = experiments.start("reproduce", args.kb, kb_fingerprint(ctx.store), ctx.llm.describe() if ctx.llm else "none",
                            spec)
    return experiments, exp


def cmd_silver(args) -> int:
    from ..encoders.embedder import DEFAULT_MODEL, get_embedder
    from ..kb.extract.silver import evaluate

    if args.passages is not None and args.passages < 1:
        raise ConfigError(f"--passages must be at least 1, got {args.passages}")
    if args.kb:
        return _silver_kb(args)
    args.passages = args.passages or 100
    if args.extractor == "rules":
        from ..kb.extract.rules import RulesExtractor
        extractor, what = RulesExtractor(("triples",), n_process=1), "rules (LLM-free)"
    else:
        from ..kb.extract.llm import extraction_settings, llm_extractors
        from ..llm import LLMSettings, get_llm
        llm = get_llm(extraction_settings(LLMSettings.parse(args.llm, args.llm_model), args.draft_tokens))
        if llm is None:
            raise ConfigError("--extractor llm needs an LLM (--llm local, openai or a URL)")
        if args.reads == "one":  # the joint prompt, scored on its triples
            extractor = llm_extractors(llm, ("triples", "events", "propositions"), reads="one")[0]
        else:
            extractor = llm_extractors(llm, ("triples",))[0]
        what = f"llm ({llm.describe()}, reads {args.reads})"
    sc, seconds = evaluate(extractor, args.passages, get_embedder(DEFAULT_MODEL))
    d = {"extractor": what, "seconds": round(seconds, 1), "seconds_per_passage": round(seconds / max(1, sc.passages),
                                                                                       3),
         **sc.as_dict()}
    say(args, f"{what} on {sc.passages} passages, against GPT-3.5 OpenIE ({sc.reference_triples} triples, "
          f"{sc.reference_entities} entities):")
    return _silver_report(sc, f"extracted) · {d['seconds_per_passage']} s a passage", d, args)


def _silver_report(sc, tail: str, record: dict, args) -> int:
    """The scores line both `silver` forms print, and their JSON record (--out, --json)."""
    say(args, f"  entity recall {sc.entity_recall:.3f} · triple recall {sc.triple_recall:.3f} · precision "
              f"{sc.precision:.3f} ({sc.extracted_triples} triples {tail}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(record, indent=2))
    if args.json:
        emit_json(record)
    return 0


def _silver_kb(args) -> int:
    """`hoptrace silver --kb KB`: the KB's own index against the silver reference."""
    from ..encoders.embedder import DEFAULT_MODEL, get_embedder
    from ..kb.extract.silver import embedding_similarity, kb_extractions, reference_for, score

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
    say(args, f"KB {args.kb}: {sc.passages} of its {len(extracted):,} passages are in the silver reference{within} "
          f"({sc.reference_triples} triples, {sc.reference_entities} "
          f"entities){f'; {failed} failed, not scored' if failed else ''}:")
    return _silver_report(sc, "in the KB)", {"kb": str(path), **sc.as_dict()}, args)


COMMANDS = {"reproduce": cmd_reproduce, "silver": cmd_silver}
