"""`hoptrace build`: build or extend a KB, estimate an LLM build, push it to Elasticsearch."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from ..core.errors import ConfigError
from ..core.paths import resolve_kb
from .common import _draft_arg, _llm_args


def add_parsers(sub) -> None:
    b = sub.add_parser("build", help="build or extend a KB")
    src = b.add_mutually_exclusive_group(required=True)
    src.add_argument("--demo", action="store_true", help="the demo KB (bundled MuSiQue + GPT-3.5 OpenIE)")
    src.add_argument("--dataset", choices=["musique", "hotpotqa", "2wiki"], help="a bundled dataset")
    src.add_argument("--corpus", type=Path,
                     help="corpus: [{id?, title, text}] or {title: [sentences]} JSON, a .jsonl ({id|_id, title?, "
                          "text|contents} a line), a .tsv (id<TAB>text[<TAB>title]) or a BEIR folder (corpus.jsonl, "
                          "queries.jsonl, qrels/<split>.tsv); records' own ids are kept")
    src.add_argument("--irds", default=None, metavar="NAME",
                     help="a collection through ir_datasets, e.g. beir/hotpotqa/test: its documents, queries and "
                          "qrels (pip install 'hoptrace[irds]'; the files must be in ir_datasets' home offline)")
    b.add_argument("--questions", type=Path,
                   help="questions file: MuSiQue, HotpotQA or 2Wiki JSON, or JSONL {id, question, answers?} with "
                        "--qrels for the gold")
    b.add_argument("--qrels", type=Path, default=None, help="TREC qrels (qid 0 docid grade): the JSONL questions' gold")
    b.add_argument("--split", default="test", help="a BEIR folder's qrels split (default test)")
    b.add_argument("--min-grade", type=int, default=1,
                   help="a graded passage is gold at this grade and above (default 1)")
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
    b.add_argument("--methods", default=None, metavar="M1,M2",
                   help="build only the layers these methods read (e.g. griever,dense), each served as soon as "
                        "its layers are whole; on an existing KB, add just the layers they lack. Default: every "
                        "method, the nearest to ready first")
    b.add_argument("--device", choices=["auto", "cpu", "cuda"], default=None,
                   help="where the build encodes: auto (default: CUDA when torch sees a GPU, else every CPU "
                        "core), cpu, or cuda")
    b.add_argument("--embed-model", default=None, help="all-MiniLM-L6-v2 (default) | all-mpnet-base-v2")
    b.add_argument("--precision", choices=["fp32", "bf16", "int8"], default=None,
                   help="the build encoder: fp32; bf16 (the same model under bf16 autocast, vectors within "
                        "cosine 0.9999 of fp32's, ~1.45x faster where the CPU has AVX512-BF16 or AMX); int8 "
                        "(the same model quantised, ~2.2x faster, slightly lower recall). Queries stay fp32. "
                        "Default: int8 for an int8 KB, else HOPTRACE_BUILD_PRECISION, else bf16 where the "
                        "CPU has it natively, else fp32 (docs/profiles.md)")
    _llm_args(b)
    _draft_arg(b)
    b.add_argument("--quiet", action="store_true")


def cmd_build(args) -> int:
    from ..corpus.datasets import get_dataset
    from ..encoders.embedder import DEFAULT_MODEL
    from ..kb.presets import ALL_LAYERS, ExtractionPlan, build_from_files, dataset_out
    from ..kb.readiness import readiness_line
    from ..methods import targets

    model = args.embed_model or DEFAULT_MODEL
    layers = tuple(x.strip() for x in args.layers.split(",") if x.strip()) if args.layers else ALL_LAYERS
    if args.layers and args.extractor != "llm":
        raise ConfigError("--layers chooses the layers the LLM makes: use it with --extractor llm")
    if args.estimate and args.extractor != "llm":
        raise ConfigError("--estimate prices LLM extraction: use it with --extractor llm")
    llm = None
    if args.extractor == "llm":
        from ..kb.extract.llm import extraction_settings
        from ..llm import LLMSettings
        llm = extraction_settings(LLMSettings.parse(args.llm, args.llm_model), args.draft_tokens)
    if args.demo or args.dataset:
        ds = get_dataset(args.dataset or "musique")
        out, name = dataset_out(ds.name, resolve_kb(args.out) if args.out else None)
        corpus, questions, openie, name = ds.corpus, ds.questions, ds.openie, args.out or name
    elif args.irds:
        from ..kb.presets import IRDS

        out = resolve_kb(args.out or args.irds.replace("/", "-"))
        corpus, questions, openie, name = IRDS + args.irds, None, args.openie, args.out or args.irds
    else:
        out = resolve_kb(args.out or args.corpus.resolve().name.split(".")[0])
        corpus, questions, openie, name = args.corpus, args.questions, args.openie, args.out
    plan = ExtractionPlan(args.extractor, openie, layers, llm, args.batch_size, args.propositions, args.reads)
    plan.check()
    serve = targets([m.strip() for m in args.methods.split(",") if m.strip()] if args.methods else None)
    if args.store:
        from ..store.elastic import parse_spec
        parse_spec(args.store)  # a bad spec fails before the build, not after it
    if args.estimate:
        return _estimate(plan, out, corpus, questions, args)
    before = _llm_done(out, plan)
    from ..kb.presets import Gold, demo_precision

    report = build_from_files(out, corpus, questions, openie, embed_model=model, name=name,
                              progress=not args.quiet, plan=plan, sample=args.sample,
                              retry_failed=args.retry_failed, targets=serve,
                              precision=demo_precision(args.precision) if args.demo else args.precision,
                              device=args.device, gold=Gold(args.qrels, args.split, args.min_grade))
    d = report.as_dict()
    if report.reused:
        print(f"reused: {d['passages_total']} passages and every layer asked for, nothing new to add"
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
    print(readiness_line(report.ready_at))
    if report.embedded:
        print(f"encoded: {sum(report.encoded.values()):,} distinct texts for {sum(report.embedded.values()):,} "
              f"vectors ({report.encoder} on {report.device}); steps: "
              + ", ".join(f"{k} {v} s" for k, v in report.steps.items()))
        print("  " + " · ".join(_layer_line(report, layer) for layer in report.embedded))
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


def _layer_line(report, layer: str) -> str:
    """One layer's share of the encoding. A layer whose texts all had vectors in another layer
    (a proposition that is also an event) encoded nothing: it says so."""
    encoded = report.encoded.get(layer, 0)
    if not encoded:
        return f"{layer} {report.embedded[layer]:,} vectors copied from other layers"
    return f"{layer} {encoded:,} texts {report.embed_seconds.get(layer, 0.0)} s"


def _llm_done(out: Path, plan) -> set[str]:
    if plan.extractor != "llm":
        return set()
    from ..kb.build import extracted_passage_ids

    return set().union(*extracted_passage_ids(out, plan.llm_layers).values())


def _calibrate(out: Path, plan, before: set[str], corpus: Path, questions: Optional[Path],
               sample: Optional[int], runs: list[dict]) -> None:
    """After an embedded LLM build: the estimate of the passages it extracted beside what they
    cost, and the measured speed kept for later estimates on this machine."""
    from ..kb.extract.llm import estimate
    from ..kb.extract.llm.estimate import SPEED_FILE, calibrate
    from ..kb.presets import load_sources

    new_ids = _llm_done(out, plan) - before
    run = {k: sum(r[k] for r in runs) for k in ("passages", "tokens_in", "tokens_out", "seconds", "cached_calls")}
    if not new_ids or run["cached_calls"]:  # answers from the response cache say nothing about speed
        return
    passages, _ = load_sources(corpus, questions, sample)
    forecast = estimate([p for p in passages if p.id in new_ids], list(plan.llm_layers), plan.llm,
                        plan.batch_size, reads=plan.reads)
    print(f"estimate for these {len(new_ids)} passages: {forecast.tokens_in:,} tokens in / {forecast.tokens_out:,} "
          f"out, "
          f"{forecast.local_hours() * 3600:,.0f} s; measured: {run['tokens_in']:,} / {run['tokens_out']:,}, "
          f"{run['seconds']:,.0f} s")
    cal = calibrate(plan.llm.speed_key, forecast, runs)
    print(f"this machine ran {plan.llm.model} at {1 / cal['factor']:.2f}x the default speed; later estimates use that "
          f"(kept in {SPEED_FILE} in the HopTrace home)")


def _push(args, kb_path: Path) -> None:
    if not args.store:
        return
    from ..store.elastic import push_kb

    rep = push_kb(kb_path, args.store, progress=not args.quiet)
    print(f"pushed to {rep.spec}: {rep.sent} documents in {rep.seconds} s")


def _estimate(plan, out: Path, corpus: Path, questions: Optional[Path], args) -> int:
    """Price the LLM layers of this build: only passages the KB at `out` lacks are counted."""
    from ..kb.build import extracted_passage_ids
    from ..kb.extract.llm import estimate
    from ..kb.presets import load_sources

    passages, _ = load_sources(corpus, questions, args.sample)
    done = extracted_passage_ids(out, plan.llm_layers, include_failed=not args.retry_failed)
    est = estimate(passages, list(plan.llm_layers), plan.llm, plan.batch_size, done, args.price_in, args.price_out,
                   reads=plan.reads)
    print(f"KB: {out}{'' if out.exists() else ' (new)'} · {len(passages):,} passages in the source")
    print(est.render())
    return 0


COMMANDS = {"build": cmd_build}
