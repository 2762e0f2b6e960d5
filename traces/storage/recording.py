"""Recording the shipped experiment (`hoptrace record-experiment`), one sitting at a time.

Every method on the demo's questions with answers takes about ten hours on two cores, so the
recording is cut into units — one method on a chunk of ten questions — done in a fixed order
and stored as each finishes: a sitting stops after its minutes and the next resumes where it
stopped, on this machine or another (the file it resumes from is the shipped one).

Each unit is watched (retrieval/core/idle.py). A unit that other work disturbed is not kept: its
runs are removed and it is recorded again once the machine is quiet, so every latency shipped
was measured idle. The sittings' machines and load figures are kept in the experiment's spec.
"""
from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

from retrieval.bench.runner import QuestionResult, run_bench, stable_share, summarise
from retrieval.core import cpu, idle
from retrieval.core.records import Question
from retrieval.methods import METHODS, make_method, root_method

from .experiments import Experiment, Experiments, kb_fingerprint, method_spec, question_record

# The headline comparison first: the four paper methods and the baselines reach every question
# before any ablation starts, so an unfinished recording already answers "which method wins".
MAIN_METHODS = ("bm25", "dense", "griever", "gear", "sag", "grasp")
# The rows the papers' ablation tables need (retrieval/bench/paper_tables.py), then the other baselines.
ABLATIONS = ("composed", "rrf_hybrid", "griever_full_triples", "griever_no_shortlist", "griever_rrf_first",
             "griever_path_ranking", "naivege", "syncge", "syncge_no_diversity", "gear_griever", "sag_h0",
             "sag_no_rerank", "grasp_single_pass", "grasp_no_selection", "grasp_uniform", "grasp_single_pass_uniform",
             "hipporag2_nofilter", "hipporag2")
DEFAULT_METHODS = MAIN_METHODS + ABLATIONS
CHUNK = 10
KS = (5, 10)
# Each unit runs its method once (bench's `repeat`). The LLM methods are not deterministic here
# (`bench --repeat 2` of SAG on 2 questions: stable@5 0.5), so each of their units is recorded a
# second time, as a unit of its own after the first repetition of its group: the headline figures
# come first, stable@5 after. The leaderboard's means read the first repetition (every question
# has one); stable@5 reads the questions that have both on one machine.
REPEAT = 1
LLM_REPETITIONS = 2
WATCH_INTERVAL_S = 2.0
# A summary's figures that are times: read only on the experiment's own machine (_time_on_one_machine).
TIME_KEYS = ("latency_ms", "cpu_s", "retrieval_ms", "answer_ms")


def uses_llm(method: str) -> bool:
    return bool(getattr(METHODS[root_method(method)], "uses_llm", False))


@dataclass
class Unit:
    method: str
    chunk: int                     # 0-based: questions chunk*CHUNK … +CHUNK
    questions: list[Question]
    rep: int = 1                   # which repetition (the LLM methods get LLM_REPETITIONS)


@dataclass
class Sitting:
    started_at: float
    machine: str
    minutes: float
    units: int = 0
    redone: int = 0
    runs: int = 0
    seconds: float = 0.0
    conditions: list[dict] = field(default_factory=list)   # one per kept unit
    llm_server: str = ""           # the embedded model's server build, as the machine: both shape outputs

    def as_dict(self) -> dict:
        others = [c["others_cpu_max"] for c in self.conditions if c.get("others_cpu_max") is not None]
        return {"started_at": self.started_at, "machine": self.machine, "llm_server": self.llm_server,
                "minutes": self.minutes,
                "units": self.units, "redone": self.redone, "runs": self.runs, "seconds": round(self.seconds, 1),
                "others_cpu_max": max(others) if others else None,
                "verdict": "idle" if all(c["verdict"] == "idle" for c in self.conditions) else "under load",
                "calibration_ms": [c["calibration_ms"] for c in self.conditions[:1] + self.conditions[-1:]]}


def order_questions(questions: Sequence[Question], first: Sequence[str], n: int) -> list[Question]:
    """`first` (the showcase's questions, by text) lead, then the rest in KB order: the showcase's
    runs and the experiment's are then the same questions."""
    by_text = {q.text: q for q in questions}
    lead = [by_text[t] for t in first if t in by_text]
    seen = {q.id for q in lead}
    return (lead + [q for q in questions if q.id not in seen and q.gold_passage_ids])[:n]


def plan(exp: Experiment, questions: Sequence[Question]) -> list[Unit]:
    """Every unit of the recording, in the order it is recorded: the main methods over every chunk
    (the LLM methods over their first `llm_questions`), the LLM methods' later repetitions, then
    the ablations likewise."""
    args = exp.spec.get("args", {})
    llm_n = int(args.get("llm_questions", len(questions)))
    main = [m for m in exp.methods if m in MAIN_METHODS]
    rest = [m for m in exp.methods if m not in MAIN_METHODS]
    chunks = [list(questions[i:i + CHUNK]) for i in range(0, len(questions), CHUNK)]
    units = []
    reps = int(args.get("llm_repetitions", 1))
    for group in (main, rest):
        for rep in range(1, reps + 1):
            for c, qs in enumerate(chunks):
                for m in group:
                    if uses_llm(m):
                        qs_m = [q for q in qs if questions.index(q) < llm_n]
                        if qs_m:
                            units.append(Unit(m, c, qs_m, rep))
                    elif rep == 1:
                        units.append(Unit(m, c, qs))
    return units


def fresh_model(llm) -> None:
    """The embedded model's server started anew, its prompt cache empty, before each unit: the
    answer step reads the same passages for the same question whatever method found them, so on a
    warm cache a method recorded after another answered from the other's cached prompt (GRIEVER's
    answers took 3.6 s against BM25's 12.9 s). Within a unit the cache works as in the app."""
    backend = llm.backend if llm is not None else None
    if getattr(backend, "proc", None) is not None and hasattr(backend, "stop"):
        backend.stop()
        backend.start()


def start(experiments: Experiments, ctx, kb: str, questions: Sequence[Question], methods: Sequence[str],
          llm_questions: int) -> Experiment:
    spec = {"methods": {m: method_spec(make_method(m, ctx), m, {}) for m in methods}, "ks": list(KS),
            "protocol": "slice", "questions": [question_record(q) for q in questions],
            "args": {"methods": ",".join(methods), "limit": len(questions), "llm_questions": llm_questions,
                     "answer": True, "repeat": REPEAT, "llm_repetitions": LLM_REPETITIONS, "protocol": "slice",
                     "shipped": True},
            "sittings": []}
    return experiments.start("bench", kb, kb_fingerprint(ctx.store), ctx.llm.describe(), spec)


def missing(experiments: Experiments, exp: Experiment, unit: Unit) -> list[Question]:
    have = {(e["question_id"], e["method"], e["rep"]) for e in experiments.entries(exp, repetitions=True)}
    return [q for q in unit.questions if (q.id, unit.method, unit.rep) not in have]


def discard(experiments: Experiments, exp: Experiment, method: str, question_ids: Sequence[str],
            rep: Optional[int] = None) -> int:
    """A disturbed unit's runs out of the experiment (rows and traces), to be recorded again: one
    repetition's, or (None) every repetition's."""
    traces = experiments.traces
    marks = ",".join("?" * len(question_ids))
    args = [exp.id, method, *([] if rep is None else [rep]), *question_ids]
    where = (f"experiment_id = ? AND method = ? {'' if rep is None else 'AND rep = ? '}"
             f"AND question_id IN ({marks})")
    with traces.transaction() as con:
        ids = [r[0] for r in con.execute(f"SELECT run_id FROM experiment_runs WHERE {where}", args)]
        if ids:
            con.execute(f"DELETE FROM experiment_runs WHERE {where}", args)
            traces.delete_runs(con, ",".join("?" * len(ids)), ids)
    return len(ids)


def summary(experiments: Experiments, exp: Experiment) -> dict:
    """The leaderboard's figures from the stored rows: each method over the questions it has."""
    rows: dict[str, list[QuestionResult]] = {}
    fields = QuestionResult.__dataclass_fields__
    for e in experiments.entries(exp, repetitions=True):
        rows.setdefault(e["method"], []).append(QuestionResult(**{f: v for f, v in e["row"].items() if f in fields}))
    methods = {}
    for m, rs in rows.items():
        # Every question has a first repetition and only some a second yet: means over the first,
        # so a half-recorded second repetition does not weigh its questions twice.
        first = [r for r in rs if r.rep == 1]
        s = summarise({k: first for k in exp.ks})
        s["questions"] = len({r.question_id for r in first})
        _time_on_one_machine(s, first, exp)
        _stable_on_one_machine(s, rs, exp)
        # Which server build wrote the LLM's replies, as the machine: both change greedy outputs.
        s["llm_servers"] = dict(Counter(r.llm_server for r in first))
        methods[m] = s
    return {"kb": exp.kb, "n_questions": exp.n_questions, "protocol": "slice", "ks": exp.ks, "methods": methods}


def _stable_on_one_machine(s: dict, rs: list[QuestionResult], exp: Experiment) -> None:
    """stable@k over the questions whose repetitions all ran on one machine. The embedded model's
    kernels differ by ISA (avx2 and avx512 sample other tokens from one seed), so a pair split
    across machines measures the machines as much as the method: those questions are counted
    apart (`stable_across_machines`), for the leaderboard to name."""
    twice = {r.question_id for r in rs if r.rep > 1}
    if not twice:
        return
    machines: dict[str, set] = {}
    for r in rs:
        if r.question_id in twice:
            machines.setdefault(r.question_id, set()).add(r.machine or exp.machine)
    one = [r for r in rs if r.question_id in twice and len(machines[r.question_id]) == 1]
    split = [r for r in rs if r.question_id in twice and len(machines[r.question_id]) > 1]
    for k in exp.ks:
        s[f"stable@{k}"] = stable_share(one, k)   # None when no question was repeated on one machine
    s["stable_questions"] = len({r.question_id for r in one})
    if split:
        s["stable_across_machines"] = {"questions": len({r.question_id for r in split}),
                                       **{f"stable@{k}": stable_share(split, k) for k in exp.ks}}


def _is_time(key: str) -> bool:
    return key.startswith(TIME_KEYS)


def _time_on_one_machine(s: dict, first: list[QuestionResult], exp: Experiment) -> None:
    """Scores read every question, times only the runs on the experiment's own machine: a sitting
    resumed on another machine (same-named hosts differ 2x, other CPUs more) adds questions to the
    scores, and its times are kept apart (`timed_elsewhere`), so the seconds in one column were
    all taken on one machine."""
    ref = exp.machine
    here = [r for r in first if (r.machine or ref) == ref]
    if not ref or len(here) == len(first):
        return
    timed = summarise({k: here for k in exp.ks}) if here else {}
    for key in [k for k in s if _is_time(k)]:
        s[key] = timed.get(key)
    s["timed_questions"] = len({r.question_id for r in here})
    for machine in sorted({r.machine for r in first if (r.machine or ref) != ref}):
        theirs = [r for r in first if r.machine == machine]
        t = summarise({k: theirs for k in exp.ks})
        s.setdefault("timed_elsewhere", {})[machine] = {
            "questions": len({r.question_id for r in theirs}),
            **{key: t.get(key) for key in ("latency_ms_p50", "cpu_s_per_question")}}


def record_sitting(experiments: Experiments, exp: Experiment, ctx, questions: Sequence[Question], minutes: float,
                   on_unit: Optional[Callable[[Unit, int, str], None]] = None,
                   wait_idle: Callable[[], None] = lambda: None,
                   watch: Optional[Callable[[], idle.Watch]] = None) -> Sitting:
    """Record units in order until none is left or `minutes` have passed (a unit already begun
    finishes). A unit disturbed by other work is discarded and, after `wait_idle`, recorded again,
    at most twice; then it stays out of this sitting. `watch` makes each unit's watch (the
    load average is judged once, at the sitting's start, by the CLI: after the first unit it
    counts this recording's own work)."""
    sitting = Sitting(time.time(), cpu.describe(), minutes, llm_server=ctx.llm.server if ctx.llm else "")
    # This machine's usual speed from the earlier sittings on one of its name: a slower host under
    # the same name is a disturbance like another tenant (retrieval/core/idle.py SPEED_MAX_RATIO).
    reference = idle.machine_reference_ms(exp.spec.get("sittings", []), sitting.machine)
    watch = watch or (lambda: idle.Watch(WATCH_INTERVAL_S, check_load=False, reference_ms=reference))
    store = experiments.sink(exp)

    def sink(q, label, k, run, row) -> None:
        # Marked idle as it is stored: a unit that turns out disturbed is discarded whole, so every
        # run that stays was measured idle.
        run.load = "idle"
        store(q, label, k, run, row)

    deadline = time.monotonic() + minutes * 60
    t0 = time.monotonic()
    for unit in plan(exp, questions):
        todo = missing(experiments, exp, unit)
        if not todo:
            continue
        if sitting.units and time.monotonic() >= deadline:   # a sitting records one unit at least
            break
        # A later repetition runs as bench's repetition `unit.rep` (the LLM's cache bypassed, its
        # seed moved: retrieval/bench/runner.py) with the earlier ones given as done.
        done = ({key: row for key, row in experiments.finished(exp).items()
                 if key[1] == unit.method and key[3] < unit.rep} if unit.rep > 1 else {})
        for _attempt in range(3):
            # Before each attempt, not once a unit: a unit recorded again after a disturbed attempt
            # found that attempt's prompts in the server's cache and answered in 0.8 s, not 12-16 s.
            fresh_model(ctx.llm)
            with watch() as watched:
                res = run_bench(ctx, exp.kb, todo, [unit.method], ks=KS, protocol="slice", progress=False,
                                answer=True, sink=sink, repeat=max(REPEAT, unit.rep), done=done)
            cond = watched.conditions
            n = sum(1 for r in res.per_question if r.rep == unit.rep)
            if cond.verdict == "idle":
                sitting.conditions.append(cond.as_dict())
                sitting.units += 1
                sitting.runs += n
                if on_unit:
                    on_unit(unit, n, cond.label)
                break
            discard(experiments, exp, unit.method, [q.id for q in todo], unit.rep)
            sitting.redone += 1
            if on_unit:
                on_unit(unit, 0, f"{cond.label} ({'; '.join(cond.reasons)}): discarded, recorded again")
            wait_idle()
    sitting.seconds = time.monotonic() - t0
    return sitting


def close_sitting(experiments: Experiments, exp: Experiment, sitting: Sitting, questions: Sequence[Question]) -> bool:
    """The sitting kept in the spec and the summary stored; returns whether the recording is complete."""
    if sitting.units or sitting.redone:   # a sitting that found nothing to do leaves no trace
        exp.spec.setdefault("sittings", []).append(sitting.as_dict())
    complete = not any(missing(experiments, exp, u) for u in plan(exp, questions))
    experiments.save_spec(exp)
    experiments.finish(exp, summary(experiments, exp), status="done" if complete else "paused")
    return complete


def _conditions_on(machine: str, exp: Experiment) -> dict:
    """The showcase's conditions for runs taken on `machine`: its sittings' figures only, so runs
    from the experiment's first machine are not labelled with a later sitting's."""
    sittings = [s for s in exp.spec.get("sittings", []) if s.get("machine") == machine]
    others = [s["others_cpu_max"] for s in sittings if s.get("others_cpu_max") is not None]
    calib = [c for s in sittings for c in s.get("calibration_ms", [])]
    return {"machine": machine, "load1_before": None,
            "calibration_ms": [calib[0][0], calib[-1][1]] if calib else [0.0, 0.0],
            "others_cpu_max": max(others) if others else None, "others_cpu_mean": None,
            "verdict": "idle" if all(s.get("verdict") == "idle" for s in sittings) else "under load",
            "reasons": []}


def to_showcase(experiments: Experiments, exp: Experiment, path) -> list[str]:
    """One recording serves both views: each showcase method whose runs on every showcase question
    are in the experiment gets those very runs in the showcase file (retrieval/showcase.py), with
    the experiment's fingerprint, date, code version and conditions, so the Ask page and the lab
    never disagree. Returns the methods taken over; the others keep their own recording."""
    import datetime as dt

    from retrieval import showcase

    if not path.exists():
        return []
    doc = showcase._read(path)
    by_text = {q["text"]: q["id"] for q in exp.questions}
    have: dict[tuple[str, str], str] = {(e["question_id"], e["method"]): e["run_id"] for e in experiments.entries(exp)}
    taken = []
    for m in doc["methods"]:
        ids = [have.get((by_text.get(it["question"], ""), m)) for it in doc["items"]]
        if m not in exp.methods or not all(ids):
            continue
        runs = [experiments.traces.load_run(rid)[0] for rid in ids]
        conditions = _conditions_on(sorted({r.machine or exp.machine for r in runs})[0], exp)
        for it, run in zip(doc["items"], runs):
            # A kept run was measured idle (a disturbed unit is discarded whole); runs stored before
            # the sink marked them say so here.
            run.load = run.load or conditions["verdict"]
            it["runs"][m] = run.to_dict()
        doc["fingerprints"][m] = exp.spec["methods"][m]["fingerprint"]
        doc.setdefault("profiles", {})[m] = exp.spec["methods"][m].get("profile") or "local"
        # The day its runs were recorded (their stages' clocks; a run's row is stamped when a file
        # is installed), not the experiment's last sitting's: a sitting that adds ablations leaves
        # the showcase's runs as they were.
        started = [st.started_at for run in runs for st in run.stages if st.started_at]
        doc.setdefault("recorded_on", {})[m] = dt.date.fromtimestamp(
            max(started) if started else exp.finished_at or time.time()).isoformat()
        doc.setdefault("recorded_with", {})[m] = exp.code_version
        doc.setdefault("conditions", {})[m] = conditions
        taken.append(m)
    if taken:
        showcase.write_recording(doc, path)
    return taken
