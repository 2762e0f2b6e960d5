"""`hoptrace questions`, `judge` and `qrels`: evidence on a corpus that has no gold.

Question sets without gold are added to a KB and benched (`bench --question-set`); an
experiment's runs are pooled and judged (traces/judging/); judgments go in and out as TREC qrels.
"""
from __future__ import annotations

import sys
from pathlib import Path

from ..core.errors import ConfigError, InputError, KBError
from . import qgen
from .common import _context, _experiments, _llm_args, _trace_store, plugin_args
from .flags import emit_json, json_arg, out_arg, say


def add_parsers(sub) -> None:
    q = sub.add_parser("questions", help="question sets of a KB: add your own questions (no gold needed), "
                       "generate multi-hop ones with gold from the KB's graph, list them")
    qs = q.add_subparsers(dest="questions_command", required=True)
    qa = qs.add_parser("add", help="add a question set from a .txt (one a line), .json or .csv file")
    qa.add_argument("file", type=Path)
    qa.add_argument("--kb", required=True, help="KB name or path")
    qa.add_argument("--name", required=True, help="the set's name (bench --question-set NAME)")
    ql = qs.add_parser("list", help="the KB's question sets with their source and size")
    ql.add_argument("--kb", required=True)
    qgen.add_parsers(qs)

    j = sub.add_parser("judge", help="pool an experiment's runs (TREC depth-k) and grade the pool 0–3 with a judge")
    j.add_argument("experiment", help="experiment id (or a unique prefix of 6+ characters)")
    j.add_argument("--depth", type=int, default=10, help="pool depth: each method's top N per question (default 10)")
    j.add_argument("--judge", choices=["llm", "answer"], default=None,
                   help="llm: an LLM grades the pool; answer: a passage holding the question's answer is relevant "
                        "(LLM-free). Default: answer (no LLM judge on the embedded model agreed with gold well "
                        "enough; docs/judging.md)")
    j.add_argument("--methods", default=None, help="pool only these of the experiment's methods (comma-separated)")
    plugin_args(j)
    j.add_argument("--strategy", choices=["listwise", "pointwise"], default="listwise",
                   help="LLM judge: listwise (a question's pooled passages in one request; default) or pointwise")
    j.add_argument("--estimate", action="store_true", help="print requests, tokens and minutes; judge nothing")
    j.add_argument("--limit", type=int, default=None, metavar="N", help="judge the pools of the first N questions only")
    j.add_argument("--concurrency", type=int, default=1, metavar="N", help="requests in flight, for an endpoint")
    j.add_argument("--queue", type=int, default=None, metavar="N",
                   help="judge nothing: print the next N pooled pairs a person should grade, those whose grade can "
                        "change a verdict most first, and each method pair's verdict (settled or open)")
    j.add_argument("--metric", default="p@5", help="with --queue: the metric the verdicts are on (p@K bounds "
                                                   "them exactly; ndcg@K, jrecall@K order only). Default p@5")
    _llm_args(j)

    v = sub.add_parser("judge-validity", help="how a judge's grades agree with gold, where gold exists: AUC, "
                                               "precision / recall, Cohen's kappa, Kendall tau of the methods' ranking")
    v.add_argument("experiment")
    v.add_argument("--judge", choices=["llm", "answer", "person"], default="llm")
    v.add_argument("--rel", type=int, default=2, help="the grade counted relevant (default 2)")
    v.add_argument("--prompt-version", default=None, help="the LLM judge's prompt version (default: its newest)")
    json_arg(v, "the figures")
    out_arg(v, "the figures as JSON")
    v.add_argument("--simulate-person", action="store_true",
                   help="a person who grades gold passages 2 and others 0 grades the pool in each --order, from the "
                        "answer rule's grades: verdicts as gold's against grades given (nothing is stored)")
    v.add_argument("--order", default="queue,pool,random", help="with --simulate-person: queue, pool, random "
                                                               "(comma-separated; default all three)")
    v.add_argument("--metric", default="p@5", help="with --simulate-person: default p@5")
    v.add_argument("--depth", type=int, default=10, help="with --simulate-person: pool depth (default 10)")
    v.add_argument("--methods", default=None, help="with --simulate-person: these methods only (comma-separated)")
    v.add_argument("--step", type=int, default=None, help="with --simulate-person: grades between checkpoints "
                                                          "(default 1 %% of the pool)")
    v.add_argument("--plot", type=Path, default=None, help="with --simulate-person: write the curves as a PNG")

    r = sub.add_parser("qrels", help="an experiment's judgments as TREC qrels (qid 0 docid grade): export or import")
    rs = r.add_subparsers(dest="qrels_command", required=True)
    re_ = rs.add_parser("export", help="write the judgments used for measures (a person's over an LLM's over the "
                                       "rule's)")
    re_.add_argument("experiment")
    re_.add_argument("file", type=Path)
    re_.add_argument("--judges", default="person,llm,answer",
                     help="which sources, in the order a pair's grade is taken (default person,llm,answer)")
    re_.add_argument("--gold", action="store_true",
                     help="write the questions' gold instead, in the collection's own ids: graded as its qrels "
                          "graded them, else grade 1")
    ri = rs.add_parser("import", help="read grades from a TREC qrels file, as a person's unless --source says")
    ri.add_argument("experiment")
    ri.add_argument("file", type=Path)
    ri.add_argument("--source", choices=["person", "llm", "answer"], default="person")



def _kb_label(kb: str) -> str:
    from ..core.paths import resolve_kb

    if kb.startswith("es+") or kb == "demo":
        return kb
    if not resolve_kb(kb).exists():
        raise KBError(f"no KB named {kb!r} ({resolve_kb(kb)} does not exist); `hoptrace build` makes one")
    return kb


def cmd_questions(args) -> int:
    from traces.storage.questionsets import QuestionSets, built_in

    kb = _kb_label(args.kb)
    sets = QuestionSets(_trace_store())
    if args.questions_command in qgen.COMMANDS:
        return qgen.COMMANDS[args.questions_command](args, kb)
    if args.questions_command == "add":
        questions = _read_questions(args.file, kb)
        qs = sets.add(kb, args.name, questions, source=args.file.name)
        print(f"added to KB {kb}: {qs.describe()}")
        print(f"next: hoptrace bench --kb {kb} --question-set {qs.name!r} --methods bm25,dense,griever")
        return 0
    from ..store import open_store

    rows = []
    if kb != "demo" or _demo_built():
        store = open_store(kb)
        try:
            own = store.questions()
        finally:
            store.close()
        if own:
            rows.append(built_in(kb, own))
    rows += sets.list(kb)
    if not rows:
        print(f"KB {kb} has no question sets: `hoptrace questions add --kb {kb} FILE --name NAME` adds one")
    for s in rows:
        print(s.describe())
    return 0


def _demo_built() -> bool:
    from ..core.paths import resolve_kb

    return resolve_kb("demo").exists()


def _read_questions(path: Path, kb: str):
    """A plain file (no gold), or a MuSiQue / HotpotQA / 2Wiki file whose gold passages must be in the KB."""
    from ..corpus import load_questions
    from ..corpus.plain import plain_format, plain_or_none
    from ..store import open_store

    plain_format(path)   # a name that is no .txt, .json or .csv is refused, naming the types
    plain = plain_or_none(path)
    if plain is not None:
        return plain

    store = open_store(kb)
    try:
        return load_questions(path, store.passages(store.all_passage_ids()))
    finally:
        store.close()


def cmd_judge(args) -> int:
    from traces.judging import measured as judge_defaults
    from traces.judging.service import judge_experiment


    experiments = _experiments()
    exp = experiments.get(args.experiment)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()] if args.methods else None
    if args.queue is not None:
        return _print_queue(experiments, exp, args.queue, args.metric, methods)
    judge = args.judge or judge_defaults.default_judge(args.llm)
    if args.judge is None:
        print(f"judge: {judge} (the default. {judge_defaults.why_default(args.llm)})", file=sys.stderr)
    if judge == "llm":
        ctx = _context(exp.kb, args, **({"concurrency": max(args.concurrency, 4)} if args.concurrency > 1 else {}))
        if ctx.llm is None:
            raise ConfigError("--judge llm needs an LLM (--llm local, openai or an endpoint URL); --llm none has none")
        store, llm = ctx.store, ctx.llm
        warn = judge_defaults.warning(llm)
        if warn:
            print(f"note: {warn}", file=sys.stderr)
    else:
        from ..kb.presets import ensure_demo
        from ..store import open_store

        if exp.kb == "demo":
            ensure_demo()
        store, llm = open_store(exp.kb), None

    from ..core.progress_bar import bar

    pbar = None

    def tick(i: int, n: int) -> None:
        nonlocal pbar
        if pbar is None:
            pbar = bar(total=n, desc="judging", unit="request")
        pbar.update(i - pbar.n)
        if i >= n:
            pbar.close()

    rep = judge_experiment(experiments, exp, store, judge, args.depth, methods, llm, args.strategy,
                           concurrency=args.concurrency, estimate_only=args.estimate, limit=args.limit,
                           progress=tick)
    if pbar is not None:
        pbar.close()
    for line in rep.lines():
        print(line)
    if not args.estimate:
        print(f"next: hoptrace compare {exp.id[:12]} --metric ndcg@5 (or p@5, jrecall@5, judged@5)")
    return 1 if rep.failed and not rep.judged else 0


def _print_queue(experiments, exp, n: int, metric: str, methods) -> int:
    """`judge --queue N`: the verdicts as they stand, then the next N pairs with why each was chosen."""
    from traces.judging.queue import bounds, state, weigh

    from ..store import open_store

    if n < 1:
        raise InputError(f"--queue must be at least 1, got {n}")
    pool, prior, grades, person = state(experiments, exp, metric, "", methods)
    bs = bounds(pool, grades, person, metric, methods) if metric.lower().startswith("p@") else []
    for b in bs:
        print(b.line())
    items = weigh(pool, prior, person, metric, methods, {(b.a, b.b) for b in bs if b.settled})[:n]
    store = open_store(exp.kb)
    try:
        passages = {p.id: p for p in store.passages([it.pair.passage_id for it in items])}
    finally:
        store.close()
    texts = {q["id"]: q["text"] for q in exp.questions}
    print(f"next {len(items)} of {len(pool.pairs) - len(person)} pairs no person graded (weight: how much the grade "
          f"can move the open {metric} differences, times the doubt its automatic grade leaves):")
    for i, it in enumerate(items, 1):
        p = passages.get(it.pair.passage_id)
        print(f"{i:>3}. weight {it.weight:.3f} · {it.pair.question_id}: {texts.get(it.pair.question_id, '')}\n"
              f"     passage {it.pair.passage_id} · {p.title if p else '?'}: {(p.text if p else '')[:160]}\n"
              f"     why: {it.why}")
    print(f"grade them: in the app's Judge tab, or as TREC qrels with `hoptrace qrels import {exp.id[:12]} FILE`")
    return 0


def cmd_judge_validity(args) -> int:
    import json
    from dataclasses import asdict

    from traces.judging.validity import measure

    from ..store import open_store

    experiments = _experiments()
    exp = experiments.get(args.experiment)
    if args.simulate_person:
        return _simulate(experiments, exp, args)
    store = open_store(exp.kb)
    try:
        v = measure(experiments, exp, args.judge, store, args.rel, prompt_version=args.prompt_version)
    finally:
        store.close()
    say(args, f"experiment {exp.id[:12]} · KB {exp.kb} · {len(exp.questions)} questions · judge {args.judge}")
    for line in v.lines():
        say(args, line)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(asdict(v), indent=1, default=str))
        say(args, f"wrote {args.out}")
    if args.json:
        emit_json(asdict(v))
    return 0


def _simulate(experiments, exp, args) -> int:
    from traces.judging.simulate import plot, simulate

    from ..store import open_store

    orders = [o.strip() for o in args.order.split(",") if o.strip()]
    methods = [m.strip() for m in args.methods.split(",") if m.strip()] if args.methods else None
    store = open_store(exp.kb)
    try:
        sim = simulate(experiments, exp, store, args.metric, args.depth, orders, methods, args.step)
    finally:
        store.close()
    for line in sim.lines():
        say(args, line)
    if args.plot:
        plot(sim, args.plot)
        say(args, f"wrote {args.plot}")
    if args.out:
        import json
        from dataclasses import asdict

        args.out.write_text(json.dumps(asdict(sim), indent=1))
        say(args, f"wrote {args.out}")
    if args.json:
        from dataclasses import asdict

        emit_json(asdict(sim))
    return 0


def cmd_qrels(args) -> int:
    from traces.judging.qrels import Judgment, Qrels, read_trec, write_trec
    from traces.storage.experiments import Experiments

    traces = _trace_store()
    experiments = Experiments(traces)
    exp = experiments.get(args.experiment)
    qrels = Qrels(traces)
    if args.qrels_command == "export" and args.gold:
        lines = [f"{q['id']} 0 {p} {g}" for q in exp.questions
                 for p, g in (q.get("grades") or dict.fromkeys(q.get("gold") or (), 1)).items()]
        args.file.parent.mkdir(parents=True, exist_ok=True)
        args.file.write_text("".join(line + "\n" for line in lines))
        print(f"wrote {len(lines)} gold judgments of experiment {exp.id[:12]} to {args.file}")
        return 0
    if args.qrels_command == "export":
        judges = [s.strip() for s in args.judges.split(",") if s.strip()]
        n = write_trec(qrels.effective(exp.id, "", judges), args.file)
        print(f"wrote {n} judgments of experiment {exp.id[:12]} to {args.file}")
        return 0
    from ..store import open_store

    store = open_store(exp.kb)
    try:
        known = set(store.all_passage_ids())
    finally:
        store.close()
    rows = read_trec(args.file, {q["id"] for q in exp.questions}, known)
    from traces.judging.pool import Pools

    pool = Pools(experiments).get(exp.id)
    if pool is not None:   # grades the queue and the verdicts cannot place are refused, not kept
        pooled = {(pp.question_id, pp.passage_id) for pp in pool.pairs}
        outside = [(q, p) for q, p, _ in rows if (q, p) not in pooled]
        if outside:
            raise InputError(f"{args.file.name}: {len(outside)} grade(s) are for pairs not in the experiment's depth-"
                             f"{pool.depth} pool (e.g. {outside[0][0]} {outside[0][1]}); pool deeper or leave them "
                             "out. Nothing was imported")
    import time

    now = time.time()
    judge = "person" if args.source == "person" else f"imported from {args.file.name}"
    qrels.put(exp.id, [Judgment(q, p, g, args.source, judge, f"qrels file {args.file.name}", now) for q, p, g in rows])
    print(f"imported {len(rows)} judgments into experiment {exp.id[:12]} as {args.source}'s grades")
    return 0


COMMANDS = {"questions": cmd_questions, "judge": cmd_judge, "judge-validity": cmd_judge_validity, "qrels": cmd_qrels}
