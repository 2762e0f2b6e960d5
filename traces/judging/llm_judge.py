"""The LLM judge: pooled passages graded 0–3 by a model, in the manner of UMBRELA.

Two ways of asking, both with a JSON schema (the small Qwen models need one):
- `listwise` (default): one request a question shows the question, then its pooled passages
  numbered, and asks which passages give a fact the answer is built from, in the order of the
  reasoning, after a short answer. Seeing the others, a second-hop passage can be recognised
  through the first, which a passage alone cannot show. A pool larger than WINDOW passages is
  sent in windows; the question comes before the passages, so the embedded server reads the
  instructions and the question once and reuses them as a cached prefix.
- `pointwise`: one request a pair, the UMBRELA shape: the question and one passage, a grade 0–3.

A listwise reply grades a cited passage 2, or 3 when it also holds the model's answer; an uncited
one 0. Its score (for AUC) falls with the citation's place. A reply that is not usable JSON gets
the client's one repair request; if that fails too, every pair of the request is recorded as
failed with the reason, never graded 0. Each request is stored as a run (method `judge`) in the
experiment's session, so its prompt, reply and tokens open like any other trace.
"""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, Iterable, Optional, Sequence

from retrieval.core.errors import HopTraceError
from retrieval.core.records import Passage, Question
from retrieval.trace.model import RunResult, StageFailed, Tracer

from .answer_rule import contains, matchable
from .qrels import Judgment

STRATEGIES = ("listwise", "pointwise")
VERSIONS = {"listwise": "listwise-1", "pointwise": "pointwise-1"}
# Passages a listwise request shows at most. Split in two, the model cites a passage or two in every
# window, also in one without gold; yet one window of a whole depth-10 pool (~21 passages on the demo)
# measured worse on the same 8 questions: AUC 0.56 against 0.65 (docs/judging.md).
WINDOW = 15
PASSAGE_CHARS = 420   # a passage is cut to about this much: the facts are at its start, the tokens are the cost

_SYSTEM = "You assess search results for questions. You reply only with JSON."

_LISTWISE = (
    "A question may need several facts chained together: the first passage names a person, place or work, and a "
    "second passage tells something about it. Below are a question and numbered passages from a search engine.\n"
    "First give a short answer to the question (at most 6 words; write \"unknown\" if the passages do not give "
    "it). Then list the numbers of the passages whose facts the answer is built from, in the order of the "
    "reasoning: the passage about what the question names first, the passage that holds the answer last. Leave "
    "out passages that are only on the same topic. List no passage if none helps.\n"
    'Reply as {"answer": "...", "evidence": [numbers]}.\n\n')

_POINTWISE = (
    "Grade how well the passage helps answer the question, which may need several facts chained together:\n"
    "0 = unrelated to the question;\n"
    "1 = on a related topic, but gives nothing needed for the answer;\n"
    "2 = gives part of what is needed: one step of the chain, or part of the answer;\n"
    "3 = gives the answer, alone or together with one other step.\n"
    'Reply as {"grade": 0|1|2|3}.\n\n')

LISTWISE_SCHEMA = {"type": "object", "properties": {
    "answer": {"type": "string", "maxLength": 60},
    "evidence": {"type": "array", "items": {"type": "integer", "minimum": 1, "maximum": 99}, "maxItems": 8}},
    "required": ["answer", "evidence"]}
POINTWISE_SCHEMA = {"type": "object", "properties": {"grade": {"type": "integer", "enum": [0, 1, 2, 3]}},
                    "required": ["grade"]}


def _clip(p: Passage) -> str:
    text = p.text if len(p.text) <= PASSAGE_CHARS else p.text[:PASSAGE_CHARS].rsplit(" ", 1)[0] + " …"
    return f"{p.title}: {text}"


def listwise_messages(question: str, passages: Sequence[Passage]) -> list[dict]:
    docs = "\n".join(f"[{i}] {_clip(p)}" for i, p in enumerate(passages, 1))
    return [{"role": "system", "content": _SYSTEM},
            {"role": "user", "content": f"{_LISTWISE}Question: {question}\n\nPassages:\n{docs}"}]


def pointwise_messages(question: str, passage: Passage) -> list[dict]:
    return [{"role": "system", "content": _SYSTEM},
            {"role": "user", "content": f"{_POINTWISE}Question: {question}\n\nPassage: {_clip(passage)}"}]


def parse_listwise(n: int) -> Callable:
    def check(value) -> dict:
        if not isinstance(value, dict) or not isinstance(value.get("evidence"), list):
            raise ValueError('expected {"answer": "...", "evidence": [passage numbers]}')
        ev = []
        for x in value["evidence"]:
            if isinstance(x, bool) or not isinstance(x, int) or not 1 <= x <= n:
                raise ValueError(f"evidence {x!r} is not a passage number 1–{n}")
            if x not in ev:
                ev.append(x)
        answer = value.get("answer")
        return {"answer": answer.strip() if isinstance(answer, str) else "", "evidence": ev}
    return check


def parse_pointwise(value) -> int:
    g = value.get("grade") if isinstance(value, dict) else value
    if isinstance(g, bool) or not isinstance(g, int) or g not in (0, 1, 2, 3):
        raise ValueError('expected {"grade": 0, 1, 2 or 3}')
    return g


@dataclass
class Estimate:
    requests: int
    tokens_in: int
    tokens_out: int
    seconds: Optional[float]   # None for an endpoint whose speed is not known here

    def describe(self) -> str:
        t = f", about {self.seconds / 60:.0f} minutes" if self.seconds is not None else ""
        return f"{self.requests} requests, ~{self.tokens_in:,} tokens read and ~{self.tokens_out:,} written{t}"


# Measured on these 2 cores (docs/usage.md, "The LLM"): the embedded model reads ~80 tokens/s and writes ~45 ms a token.
READ_TOKENS_S, WRITE_S = 80.0, 0.045
OUT_TOKENS = {"listwise": 24, "pointwise": 6}


def windows(passages: Sequence[Passage]) -> list[list[Passage]]:
    n = max(1, -(-len(passages) // WINDOW))
    size = -(-len(passages) // n)   # even windows: 16 passages go as 8 + 8, not 15 + 1
    return [list(passages[i:i + size]) for i in range(0, len(passages), size)]


def requests_of(work: dict[str, list[Passage]], strategy: str) -> list[tuple[str, list[Passage]]]:
    if strategy == "pointwise":
        return [(q, [p]) for q, ps in work.items() for p in ps]
    return [(q, w) for q, ps in work.items() for w in windows(ps)]


def estimate(llm, questions: dict[str, Question], work: dict[str, list[Passage]], strategy: str,
             local: bool) -> Estimate:
    reqs = requests_of(work, strategy)
    count = llm.backend.count_tokens if llm is not None and getattr(llm, "_backend", None) else _rough_tokens
    t_in = 0
    for q, ps in reqs:
        msgs = (listwise_messages(questions[q].text, ps) if strategy == "listwise"
                else pointwise_messages(questions[q].text, ps[0]))
        t_in += count("\n".join(m["content"] for m in msgs))
    t_out = OUT_TOKENS[strategy] * len(reqs)
    secs = t_in / READ_TOKENS_S + t_out * WRITE_S if local else None
    return Estimate(len(reqs), t_in, t_out, secs)


def _rough_tokens(text: str) -> int:
    return max(1, len(text) // 4)   # ~4 characters a token for English with Qwen's tokenizer


@dataclass
class JudgeRun:
    judgments: list[Judgment] = field(default_factory=list)
    requests: int = 0
    failed_requests: int = 0
    seconds: float = 0.0
    tokens_in: int = 0
    tokens_out: int = 0


def judge(llm, questions: dict[str, Question], work: dict[str, list[Passage]], strategy: str = "listwise",
          owner: str = "", store_run: Optional[Callable[[RunResult], str]] = None, concurrency: int = 1,
          on_done: Optional[Callable[[list[Judgment]], None]] = None,
          progress: Optional[Callable[[int, int], None]] = None) -> JudgeRun:
    """Grades every pair of `work` (question id → its passages to judge). `store_run` keeps each
    request's trace and returns its id; `on_done` gets each request's judgments as they come (so
    an interrupted judging keeps what it did: a resume judges only the rest)."""
    if strategy not in STRATEGIES:
        raise HopTraceError(f"unknown judge strategy {strategy!r}; choose {', '.join(STRATEGIES)}")
    reqs = requests_of(work, strategy)
    out = JudgeRun(requests=len(reqs))
    t0 = time.perf_counter()
    done = [0]

    def one(item: tuple[str, list[Passage]]) -> list[Judgment]:
        q, ps = item
        run, js = _request(llm, questions[q], ps, strategy, owner)
        rid = store_run(run) if store_run else ""
        for j in js:
            j.run_id = rid
        return js, run

    def collect(js, run) -> None:
        out.judgments.extend(js)
        out.tokens_in += run.tokens_in
        out.tokens_out += run.tokens_out
        if run.status != "ok":
            out.failed_requests += 1
        if on_done:
            on_done(js)
        done[0] += 1
        if progress:
            progress(done[0], len(reqs))

    if concurrency > 1:
        with ThreadPoolExecutor(concurrency, thread_name_prefix="judge") as pool:
            for js, run in pool.map(one, reqs):
                collect(js, run)
    else:
        for item in reqs:
            collect(*one(item))
    out.seconds = time.perf_counter() - t0
    return out


def _request(llm, q: Question, ps: list[Passage], strategy: str, owner: str) -> tuple[RunResult, list[Judgment]]:
    tracer = Tracer()
    version = VERSIONS[strategy]
    t0 = time.perf_counter()
    judgments: list[Judgment] = []
    error = None
    try:
        with tracer.stage("judge", f"LLM judge ({strategy}): {len(ps)} pooled passage(s)") as st:
            st.payload = {"question_id": q.id, "strategy": strategy, "prompt_version": version,
                          "passages": [p.id for p in ps]}
            now = time.time()
            if strategy == "listwise":
                reply = llm.json(st, "judge", listwise_messages(q.text, ps), LISTWISE_SCHEMA,
                                 parse_listwise(len(ps)), max_tokens=80)
                answer = reply["answer"]
                found = matchable([answer]) if answer.lower() != "unknown" else []
                order = {n: i for i, n in enumerate(reply["evidence"])}
                for n, p in enumerate(ps, 1):
                    cited = n in order
                    holds = bool(found) and contains(p, found)
                    grade = (3 if holds else 2) if cited else 0
                    score = (1.0 - 0.05 * order[n] + (0.5 if holds else 0.0)) if cited else (0.25 if holds else 0.0)
                    judgments.append(Judgment(q.id, p.id, grade, "llm", llm.model, version, now, score=score,
                                              reason=("cited" + (f" #{order[n] + 1}" if cited else "") if cited
                                                      else "not cited") + (f"; holds its answer {answer!r}"
                                                                           if holds else ""), owner=owner))
                st.payload.update(reply)
            else:
                grade = llm.json(st, "judge", pointwise_messages(q.text, ps[0]), POINTWISE_SCHEMA, parse_pointwise,
                                 max_tokens=12)
                judgments.append(Judgment(q.id, ps[0].id, grade, "llm", llm.model, version, now, score=float(grade),
                                          owner=owner))
                st.payload["grade"] = grade
            st.payload["grades"] = {j.passage_id: j.grade for j in judgments}
    except StageFailed as e:
        error = str(e)
        judgments = [Judgment(q.id, p.id, None, "llm", llm.model, version, time.time(), status="failed",
                              reason=error, owner=owner) for p in ps]
    run = RunResult("judge", q.text, {"strategy": strategy, "prompt_version": version, "question_id": q.id},
                    stages=tracer.stages, latency_ms=round((time.perf_counter() - t0) * 1000, 3),
                    status="error" if error else "ok", error=error)
    return run, judgments


def pairs_to_judge(pool_pairs: Iterable, done: set[tuple[str, str]], passages: dict[str, Passage]
                   ) -> dict[str, list[Passage]]:
    """question id → the pooled passages not yet judged by this judge, in pool order."""
    out: dict[str, list[Passage]] = {}
    for pp in pool_pairs:
        if (pp.question_id, pp.passage_id) not in done:
            out.setdefault(pp.question_id, []).append(passages[pp.passage_id])
    return out
