"""`hoptrace judge`: pool an experiment's runs and grade the pool with one judge.

The experiment's stored runs are pooled (pool.py), the pairs this judge has not graded yet are
judged (a killed judging resumes where it stopped; failed pairs are tried again), and every
judgment is stored as it comes, with its source. Nothing of the experiment's runs changes.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Optional

from retrieval.core.errors import ConfigError, InputError
from retrieval.core.records import Question
from retrieval.llm.probe import probe

from ..storage.experiments import Experiment, Experiments
from . import answer_rule, llm_judge
from .pool import Pool, Pools, make_pool
from .qrels import Qrels

JUDGES = ("llm", "answer")


@dataclass
class JudgeReport:
    judge: str                      # "llm" | "answer"
    describe: str                   # the model and strategy, or the rule
    pool: Pool
    pooled: int                     # pairs in the pool
    already: int                    # judged by this judge before this call
    judged: int = 0                 # judged now (ok)
    failed: int = 0                 # recorded as failed now
    skipped: int = 0                # the rule could not judge (no usable answer)
    seconds: float = 0.0
    tokens_in: int = 0
    tokens_out: int = 0
    requests: int = 0
    estimate: Optional[llm_judge.Estimate] = None
    grades: dict[int, int] = field(default_factory=dict)

    @property
    def seconds_per_pair(self) -> Optional[float]:
        n = self.judged + self.failed
        return self.seconds / n if n else None

    def lines(self) -> list[str]:
        p = self.pool
        out = [f"pool: depth {p.depth} of {', '.join(p.methods)} · {len(p.by_question())} questions · "
               f"{self.pooled} pairs (deduplicated)",
               f"judge: {self.judge} — {self.describe}"]
        if self.estimate is not None:
            out.append(f"to judge: {self.pooled - self.already} pairs · {self.estimate.describe()}")
            return out
        per = f", {self.seconds_per_pair:.2f} s a pair" if self.seconds_per_pair else ""
        out.append(f"judged now: {self.judged} · failed: {self.failed} · judged before: {self.already}"
                   + (f" · not judgeable by the rule: {self.skipped}" if self.skipped else "")
                   + f" · {self.seconds:.1f} s{per}"
                   + (f" · {self.requests} requests, {self.tokens_in:,} tokens in / {self.tokens_out:,} out"
                      if self.requests else ""))
        if self.grades:
            out.append("grades: " + " · ".join(f"{g}: {self.grades.get(g, 0)}" for g in range(4)))
        return out


def questions_of(exp: Experiment, store=None) -> dict[str, Question]:
    """The experiment's questions with their answers: stored in its spec, or for experiments made
    before answers were kept there, taken from the KB's own questions by id."""
    kb_q = {}
    if store is not None and any("answers" not in q for q in exp.questions):
        kb_q = {q.id: q for q in store.questions()}
    out = {}
    for q in exp.questions:
        answers = q.get("answers")
        if answers is None:
            answers = kb_q[q["id"]].answers if q["id"] in kb_q else []
        out[q["id"]] = Question(q["id"], q["text"], list(answers), list(q.get("gold") or []), q.get("hops"),
                                q.get("type"))
    return out


def ensure_pool(experiments: Experiments, exp: Experiment, depth: int, methods: Optional[list[str]] = None) -> Pool:
    """The experiment's pool at `depth`: the stored one if it was made at that depth over the same
    methods, else made now from the stored runs and kept."""
    pools = Pools(experiments)
    have = pools.get(exp.id)
    wanted = methods or list(dict.fromkeys(e["method"] for e in experiments.entries(exp)))
    if have is not None and have.depth == depth and have.methods == wanted:
        return have
    pool = make_pool(experiments, exp, depth, wanted)
    pools.save(pool)
    return pool


def judge_experiment(experiments: Experiments, exp: Experiment, store, judge: str, depth: int = 10,
                     methods: Optional[list[str]] = None, llm=None, strategy: str = "listwise", owner: str = "",
                     concurrency: int = 1, estimate_only: bool = False, limit: Optional[int] = None,
                     progress: Optional[Callable[[int, int], None]] = None) -> JudgeReport:
    """`limit`: judge only the pools of the experiment's first `limit` questions (a trial before the whole)."""
    if judge not in JUDGES:
        raise ConfigError(f"unknown judge {judge!r}; choose {' or '.join(JUDGES)}")
    if concurrency < 1:
        raise ConfigError(f"--concurrency must be at least 1, got {concurrency}")
    if limit is not None and limit < 1:
        raise ConfigError(f"--limit must be at least 1, got {limit}")
    pool = ensure_pool(experiments, exp, depth, methods)
    if limit:
        keep = {q["id"] for q in exp.questions[:limit]}
        pool = Pool(pool.experiment_id, pool.depth, pool.methods, [p for p in pool.pairs if p.question_id in keep],
                    pool.created_at)
    qrels = Qrels(experiments.traces)
    questions = questions_of(exp, store)
    passages = {p.id: p for p in store.passages(list({pp.passage_id for pp in pool.pairs}))}
    lost = [pp.passage_id for pp in pool.pairs if pp.passage_id not in passages]
    if lost:
        raise InputError(f"{len(lost)} pooled passage(s) are not in KB {exp.kb} (e.g. {lost[0]}); was it rebuilt?")
    if judge == "answer":
        if not any(answer_rule.matchable(q.answers) for q in questions.values()):
            raise InputError(f"experiment {exp.id[:12]}'s questions give no answers, so the answer rule cannot "
                             "judge them; use --judge llm, or grade the pool in the app's Judge view")
        t0 = time.perf_counter()
        js, skipped = answer_rule.judge(((questions[pp.question_id], passages[pp.passage_id]) for pp in pool.pairs),
                                        owner)
        # The rule is instant and deterministic, so it grades the whole pool again; what it had
        # graded before is counted as before, not as judged now (24 pairs read 6 + 18, not 24 + 18).
        before = {(j.question_id, j.passage_id) for j in qrels.all(exp.id, owner, "answer", "ok")}
        again = sum((j.question_id, j.passage_id) in before for j in js)
        qrels.put(exp.id, js)
        rep = JudgeReport("answer", answer_rule.RULE + " (LLM-free, instant)", pool, len(pool.pairs), again,
                          judged=len(js) - again, skipped=skipped, seconds=time.perf_counter() - t0)
        rep.grades = _grades(js)
        return rep
    if llm is None:
        raise ConfigError("--judge llm needs an LLM (--llm local, openai or an endpoint URL); --llm none has none")
    if concurrency > 1 and llm.settings.backend == "local":
        raise ConfigError("--concurrency N needs an LLM endpoint (--llm http://host:port/v1 or openai): the embedded "
                          "model serves one request at a time")
    version = llm_judge.VERSIONS[strategy] if strategy in llm_judge.VERSIONS else strategy
    done = {(j.question_id, j.passage_id) for j in qrels.all(exp.id, owner, "llm", "ok")
            if j.prompt_version == version and j.judge == llm.model}
    work = llm_judge.pairs_to_judge(pool.pairs, done, passages)
    local = llm.settings.backend == "local"
    rep = JudgeReport("llm", f"{llm.describe()} · {strategy} prompt {version}", pool, len(pool.pairs), len(done))
    if estimate_only:
        rep.estimate = llm_judge.estimate(llm, questions, work, strategy, local)
        return rep

    if llm.settings.backend != "local":
        probe(llm, "judge probe", "the judge's LLM endpoint", "nothing was judged or stored")

    def store_run(run) -> str:
        return experiments.traces.save_run(exp.session_id, exp.kb, run)

    res = llm_judge.judge(llm, questions, work, strategy, owner, store_run, concurrency,
                          on_done=lambda js: qrels.put(exp.id, js), progress=progress)
    rep.judged = sum(j.status == "ok" for j in res.judgments)
    rep.failed = sum(j.status == "failed" for j in res.judgments)
    rep.seconds, rep.tokens_in, rep.tokens_out, rep.requests = res.seconds, res.tokens_in, res.tokens_out, res.requests
    rep.grades = _grades(res.judgments)
    return rep


def _grades(js) -> dict[int, int]:
    out: dict[int, int] = {}
    for j in js:
        if j.status == "ok":
            out[j.grade] = out.get(j.grade, 0) + 1
    return out
