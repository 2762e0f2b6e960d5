"""`hoptrace methods` (every method and where it came from) and `hoptrace runs import|export`
(rankings made elsewhere, in and out of an experiment, as TREC run files)."""
from __future__ import annotations

from pathlib import Path

from ..core.errors import InputError
from .common import _experiments, plugin_args


def add_parsers(sub) -> None:
    m = sub.add_parser("methods", help="every method: built-in, ablation variant, or yours (plugin, entry point, "
                                        "HTTP endpoint), and where each came from")
    plugin_args(m)
    r = sub.add_parser("runs", help="rankings made elsewhere: import a TREC / JSONL / CSV run file into an "
                                     "experiment as a method, or export a method's runs as TREC")
    rs = r.add_subparsers(dest="runs_command", required=True)
    ri = rs.add_parser("import", help="add a run file's rankings to an experiment as a method")
    ri.add_argument("experiment", help="an experiment id (prefix), or 'new' with --kb [--question-set]")
    ri.add_argument("file")
    ri.add_argument("--method", required=True, help="the name the imported rankings go by")
    ri.add_argument("--format", choices=("trec", "jsonl", "csv"), default=None,
                    help="default: by the file's suffix (.jsonl, .csv), else TREC")
    ri.add_argument("--kb", default=None, help="with 'new': the KB whose questions the runs answer")
    ri.add_argument("--question-set", default=None, help="with 'new': a question set of the KB instead")
    re_ = rs.add_parser("export", help="a method's rankings of an experiment as a TREC run file")
    re_.add_argument("experiment")
    re_.add_argument("file")
    re_.add_argument("--method", required=True)
    re_.add_argument("--k", type=int, default=None, help="the runs made at this k (default: the largest k)")
    re_.add_argument("--tag", default=None, help="the run tag (default: the method's name)")


def cmd_methods(args) -> int:
    from ..methods import METHODS, VARIANTS, method_names, origin, uses_llm

    rows = [(n, "yes" if uses_llm(n) else "no", origin(n), METHODS[n].title if n in METHODS else "")
            for n in method_names()]
    w = max(len(n) for n, *_ in rows)
    print(f"{'method':<{w}}  LLM  from")
    for n, llm, where, title in rows:
        print(f"{n:<{w}}  {llm:<3}  {where}" + (f" · {title}" if n not in VARIANTS and where != "built-in" else ""))
    return 0   # a plugin that failed to load is named at start (cli/common.py load_plugins)


def cmd_runs(args) -> int:
    from traces.storage.experiments import kb_fingerprint, question_record
    from traces.storage.runfiles import export_run, import_run, read_run

    exps = _experiments()
    if args.runs_command == "export":
        exp = exps.get(args.experiment)
        text = export_run(exps, exp, args.method, args.tag, args.k)
        Path(args.file).write_text(text)
        print(f"wrote {args.file}: {text.count(chr(10))} lines of {args.method} "
              f"({len({ln.split()[0] for ln in text.splitlines()})} questions)")
        return 0
    run = read_run(args.file, args.format)   # a bad file fails before anything is opened or stored
    from ..core.paths import resolve_kb
    from ..store import open_store

    if args.experiment == "new":
        if not args.kb:
            raise InputError("runs import new needs --kb (the KB whose questions the run answers)")
        store = open_store(str(resolve_kb(args.kb)))
        if args.question_set:
            from traces.storage.questionsets import QuestionSets

            sets = QuestionSets(exps.traces)
            questions = sets.questions(sets.get(args.kb, args.question_set))
        else:
            questions = store.questions()
        spec = {"methods": {}, "ks": [2, 5, 10, 15], "protocol": "per-k",
                "questions": [question_record(q) for q in questions if q.id in run.hits],
                "args": {"imported": args.file, "question_set": args.question_set}}
        if not spec["questions"]:
            raise InputError(f"no question id of {Path(args.file).name} is among KB {args.kb}'s questions")
        exp = exps.start("bench", args.kb, kb_fingerprint(store), "none", spec)
    else:
        exp = exps.get(args.experiment)
        store = open_store(str(resolve_kb(exp.kb)))
    n = import_run(exps, exp, run, args.method, store)
    if args.experiment == "new":
        exps.finish(exp, {})
    print(f"imported {args.method}: {n} questions ranked from {run.path} ({run.format}) into experiment "
          f"{exp.id[:12]}\nnext: hoptrace compare {exp.id[:12]} --metric recall@5")
    return 0


COMMANDS = {"methods": cmd_methods, "runs": cmd_runs}
