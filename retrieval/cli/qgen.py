"""`hoptrace questions generate | generated | review`: multi-hop questions with gold composed from a
KB's own graph (retrieval/qgen/), checked, stored and reviewed (traces/storage/generations.py)."""
from __future__ import annotations

import time

from ..core.errors import ConfigError
from ..core.paths import resolve_kb
from .common import _draft_arg, _experiments, _llm_args, _trace_store


def add_parsers(qs) -> None:
    g = qs.add_parser("generate", help="compose multi-hop questions with gold passages from the KB's graph (bridge, "
                                       "3-hop chain, comparison), drop those a single passage answers, keep a set")
    g.add_argument("--kb", required=True)
    g.add_argument("--n", type=int, default=50, help="questions to keep (default 50)")
    g.add_argument("--name", default=None, help="the set's name (default generated-<mode>); the same name resumes")
    g.add_argument("--mode", default="template", choices=["template", "llm", "template-only"],
                   help="template (default): the question written from the two triples, the LLM only rephrasing it "
                        "without seeing the bridge; llm: the LLM writes question and answer from the passages; "
                        "template-only: the template itself, no LLM writing (the checks still use the LLM)")
    g.add_argument("--seed", type=int, default=0, help="order in which candidate pairs are tried")
    g.add_argument("--checks", default="full", choices=["full", "llm-free"],
                   help="full (default): the LLM also checks each question is answered from all its passages and "
                        "from none alone; llm-free: only the checks that need no model (with --mode template-only, "
                        "no LLM at all)")
    g.add_argument("--estimate", action="store_true", help="print LLM requests and tokens; call nothing, store nothing")
    _llm_args(g)
    _draft_arg(g)
    s = qs.add_parser("generated", help="a generated set's questions, kept and dropped with their reasons")
    s.add_argument("name")
    s.add_argument("--kb", required=True)
    s.add_argument("--dropped", action="store_true", help="the dropped ones, with their reasons")
    r = qs.add_parser("review", help="keep, edit or drop one generated question (its id from `questions generated`)")
    r.add_argument("name")
    r.add_argument("qid")
    r.add_argument("action", choices=["keep", "edit", "drop"])
    r.add_argument("--kb", required=True)
    r.add_argument("--question-text", default="", metavar="TEXT", help="with edit: the new wording")
    r.add_argument("--answer-text", default=None, metavar="TEXT", help="with edit: the new answer (default: unchanged)")
    v = qs.add_parser("validity", help="do generated questions rank methods as real ones do? Kendall tau between "
                                       "two experiments' rankings, and each pair's verdict under both")
    v.add_argument("real", help="the experiment on real questions (id or 6+ character prefix)")
    v.add_argument("generated", help="the experiment on generated questions")
    v.add_argument("--kb", required=True)
    v.add_argument("--metric", default="recall@5")


def _kb_path(kb: str):
    if kb.startswith("es+"):
        raise ConfigError("question generation reads the KB file: use the SQLite KB the Elasticsearch one was "
                          "pushed from")
    if kb == "demo":
        from ..kb.presets import ensure_demo

        ensure_demo()
    return resolve_kb(kb)


def cmd_generate(args, kb: str) -> int:
    from traces.storage.generations import generate_set, open_kb_file

    from ..llm import LLMSettings, get_llm
    from ..qgen.generate import estimate

    if args.n < 1:
        raise ConfigError(f"--n must be at least 1, got {args.n}")
    name = args.name or f"generated-{args.mode}"
    path = _kb_path(kb)
    settings = LLMSettings.parse(args.llm, args.llm_model)
    if args.estimate:
        from ..kb.extract.llm.estimate import LOCAL_GEN_TOK_S, LOCAL_PROMPT_TOK_S, token_counter

        count, how = token_counter(settings)
        con = open_kb_file(path)
        try:
            est = estimate(con, args.n, args.mode, count, LOCAL_PROMPT_TOK_S, LOCAL_GEN_TOK_S, args.seed)
        finally:
            con.close()
        print(f"estimate for {args.n} kept questions on KB {kb} ({args.mode}; tokens counted with {how}): "
              f"{est.describe()}")
        return 0
    llm_free = args.checks == "llm-free" and args.mode == "template-only"
    llm = None if llm_free else get_llm(settings)
    if llm is None and not llm_free:
        raise ConfigError("question generation needs an LLM: --llm local (the embedded model) or an endpoint, or "
                          "--mode template-only --checks llm-free")
    t0 = time.time()

    def progress(g) -> None:
        mark = "kept" if g.kept else f"dropped: {g.reason}"
        print(f"[{time.time() - t0:6.0f} s] {g.kind:<10} {mark:<60.60} {g.question or g.template}", flush=True)

    rep = generate_set(_trace_store(), kb, path, name, args.n, llm, args.mode, seed=args.seed, on_result=progress,
                       local_model=llm is not None and settings.backend == "local",
                       llm_checks=args.checks == "full")
    print("\n".join(rep.lines()))
    if rep.qset is not None:
        print(rep.qset.describe())
        if rep.qset.meta.get("note"):
            print(f"note: {rep.qset.meta['note']}")
        print(f"next: hoptrace questions generated --kb {kb} {name!r} · hoptrace bench --kb {kb} --question-set "
              f"{name!r} --methods bm25,dense,griever")
    return 0


def cmd_generated(args, kb: str) -> int:
    from traces.storage.generations import Generations

    rows = Generations(_trace_store()).rows(kb, args.name)
    if not rows:
        raise ConfigError(f"KB {kb} has no generated set named {args.name!r} (`hoptrace questions list --kb {kb}`)")
    shown = [r for r in rows if not r.kept] if args.dropped else [r for r in rows if r.kept]
    for r in shown:
        state = r.status + (" · reviewed" if r.reviewed else "")
        print(f"{r.qid} · {r.kind} · {r.hops} hops · {state}" + (f" · {r.reason}" if r.reason else ""))
        print(f"  Q: {r.question or '(none)'}\n  A: {r.answer} · gold: {', '.join(r.gold)}\n  template: {r.template}")
    print(f"{len(shown)} of {len(rows)} tried are {'dropped' if args.dropped else 'kept'}")
    return 0


def cmd_review(args, kb: str) -> int:
    from traces.storage.generations import Generations

    row = Generations(_trace_store()).review(kb, args.name, "", args.qid, args.action, args.question_text,
                                             args.answer_text)
    print(f"{row.qid}: {row.status}" + (f" · {row.reason}" if row.reason else "") + f" · Q: {row.question} · "
          f"A: {row.answer}")
    return 0


def cmd_validity(args, kb: str) -> int:
    from traces.judging.validity import rank_agreement
    from traces.stats.compare import compare

    exps = _experiments()
    real, gen = exps.get(args.real), exps.get(args.generated)
    ra = rank_agreement(compare(exps, real, args.metric), compare(exps, gen, args.metric))
    print(f"{args.metric}: real questions (experiment {real.id[:12]}, {len(real.questions)} q) vs generated "
          f"(experiment {gen.id[:12]}, {len(gen.questions)} q)")
    print(f"{'method':<20} {'real':>8} {'generated':>10}")
    for m in sorted(ra.means_gold, key=lambda m: -ra.means_gold[m]):
        print(f"{m:<20} {ra.means_gold[m]:>8.3f} {ra.means_judged[m]:>10.3f}")
    print(f"Kendall tau {ra.tau} (p {ra.p})" if ra.tau is not None else "Kendall tau: fewer than 2 methods")
    same = sum(v["same"] for v in ra.verdicts)
    print(f"pair verdicts (paired randomization test, Holm): {same} of {len(ra.verdicts)} as the real questions'")
    for v in ra.verdicts:
        print(f"  {v['a'] + ' vs ' + v['b']:<28} real: {v['gold']:<22} generated: {v['judged']:<22}"
              + ("" if v["same"] else "  <- differs"))
    return 0


COMMANDS = {"generate": cmd_generate, "generated": cmd_generated, "review": cmd_review, "validity": cmd_validity}
