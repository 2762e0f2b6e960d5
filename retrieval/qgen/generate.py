"""One candidate at a time: compose its question, run the checks, and record every step as a
traced run (method `qgen`), so the LLM calls that made or dropped a question open like any run.

Stages of a run: `hops` (the facts and gold passages, as a subgraph), `compose` (template, then the
LLM's rephrasing; or the LLM from the passages), `checks` (bridge named, answer in the question,
answer in gold, duplicate), `answerable` (the LLM with all the gold passages gets the answer),
`shortcut` (the LLM with each passage alone), and the verdict.
"""
from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Optional

from ..core.errors import ConfigError
from ..trace.model import RunResult, StageFailed, Tracer
from . import checks
from .compose import (
    MODES,
    PROMPT_VERSION,
    QA_SCHEMA,
    QUESTION_SCHEMA,
    clean_question,
    compose_messages,
    rephrase_messages,
    template,
)
from .pairs import Candidate, mine

METHOD = "qgen"
# Candidates tried per kept question asked for, at most; the measured pass rate on the demo was
# far above 1 in 8, and a bound keeps a KB that yields little from running for hours.
MAX_TRIES_PER_KEPT = 8


@dataclass
class Generated:
    """A candidate's outcome: kept (passed every check) or dropped, with its reason."""
    key: str
    kind: str
    hops: int
    gold: list[str]
    bridges: list[str]
    question: str
    answer: str
    template: str
    kept: bool
    reason: str = ""
    seconds: float = 0.0
    probes: list[dict] = field(default_factory=list)
    run: Optional[RunResult] = None


def candidates(con: sqlite3.Connection, seed: int = 0) -> list[Candidate]:
    found = mine(con, seed)
    if not found:
        raise ConfigError("this KB has nothing to bridge on: no triple's object is what another passage is about "
                          "(its title), and no two passages give a year for the same kind of fact; a KB built with "
                          "entity-linked triples (OpenIE or the LLM extractor) has them")
    return found


def texts(con: sqlite3.Connection) -> dict[str, tuple[str, str]]:
    return {pid: (title, text) for pid, title, text in con.execute("SELECT id, title, text FROM passages")}


def generate(llm, con: sqlite3.Connection, n: int, mode: str = "template", done: Iterable[str] = (),
             kept_before: Iterable[str] = (), on_result: Optional[Callable[[Generated], None]] = None,
             seed: int = 0, max_tries: Optional[int] = None, llm_checks: bool = True,
             cands: Optional[list[Candidate]] = None) -> list[Generated]:
    """Try candidates until `n` are kept (counting `kept_before`, a resumed generation's), skipping
    the keys in `done`. `on_result` gets each outcome as it is decided (to store it at once).
    `cands`: the KB's candidates when the caller mined them already (`candidates`)."""
    if n < 1:
        raise ConfigError(f"--n must be at least 1, got {n}")
    if mode not in MODES:
        raise ConfigError(f"--mode must be one of {', '.join(MODES)}, got {mode!r}")
    if llm is None and (llm_checks or mode != "template-only"):
        raise ConfigError("question generation needs an LLM (to rephrase or write, and for the shortcut check); "
                          "choose --llm local (the embedded model) or an endpoint")
    cands = cands if cands is not None else candidates(con, seed)
    passages = texts(con)
    done = set(done)
    kept = list(kept_before)
    budget = max_tries if max_tries is not None else n * MAX_TRIES_PER_KEPT
    out: list[Generated] = []
    for c in cands:
        if len(kept) >= n or budget <= 0:
            break
        if c.key in done:
            continue
        budget -= 1
        g = one(llm, c, passages, mode, kept, llm_checks)
        if g.kept:
            kept.append(g.question)
        out.append(g)
        if on_result:
            on_result(g)
    return out


def one(llm, c: Candidate, passages: dict[str, tuple[str, str]], mode: str, kept: list[str],
        llm_checks: bool = True) -> Generated:
    """`llm_checks=False` skips the answerability and shortcut probes (recorded as skipped): an
    LLM-free generation with --mode template-only, whose questions no model has checked."""
    tracer = Tracer()
    t0 = time.perf_counter()
    g = Generated(c.key, c.kind, c.hops, c.gold, c.bridges, "", c.answer, template(c), False)
    with tracer.stage("hops", f"{c.kind.capitalize()}: {c.hops} passages") as st:
        st.payload = {"kind": c.kind, "facts": [f.__dict__ for f in c.facts], "bridges": c.bridges,
                      "answer": c.answer, "gold": c.gold, "template": g.template}
        graph = st.graph()
        prev = None
        for f in c.facts:
            node = graph.node(f.passage_id, "passage", f.title)
            if prev is not None:
                graph.edge(prev, node, "bridge" if c.kind != "comparison" else "compared", f.subject)
            prev = node
    try:
        with tracer.stage("compose", f"Compose ({mode})") as st:
            if mode == "template-only":
                g.question = g.template
            elif mode == "template":
                g.question = llm.json(st, "rephrase", rephrase_messages(c), QUESTION_SCHEMA, clean_question,
                                      max_tokens=80)
            else:
                reply = llm.json(st, "compose", compose_messages(c, passages), QA_SCHEMA, _clean_qa, max_tokens=120)
                g.question, g.answer = reply
            st.payload = {"mode": mode, "prompt_version": PROMPT_VERSION, "template": g.template,
                          "question": g.question, "answer": g.answer}
    except StageFailed as e:
        g.reason = f"{checks.COMPOSE_FAILED}: {e}"
    if not g.reason:
        with tracer.stage("checks", "Checks: bridge named, answer given away, answer in gold, duplicate") as st:
            texts_ = [passages[pid][0] + " " + passages[pid][1] for pid in c.gold]
            g.reason = (checks.names_bridge(g.question, c.bridges)
                        or checks.answer_in_question(g.question, g.answer, c.kind)
                        or checks.answer_in_gold(g.answer, c.kind, texts_)
                        or checks.duplicate(g.question, kept) or "")
            st.payload = {"failed": g.reason or None}
    if not g.reason and not llm_checks:
        with tracer.stage("shortcut", "Answerable and shortcut checks: not run (LLM-free checks)") as st:
            st.status, st.message = "skipped", "--checks llm-free: no LLM asked; a passage alone may answer it"
    if not g.reason and llm_checks:
        try:
            with tracer.stage("answerable", "Answerable: the question with all its gold passages") as st:
                g.reason, got = checks.answerable(llm, st, g.question, g.answer,
                                                  [(pid, *passages[pid]) for pid in c.gold])
                g.reason = g.reason or ""
                st.payload = {"answer": got, "gold_answer": g.answer, "failed": g.reason or None}
        except StageFailed as e:
            g.reason = f"the answerability check failed: {e}"
    if not g.reason and llm_checks:
        try:
            with tracer.stage("shortcut", "Shortcut: the question with each passage alone") as st:
                reason, g.probes = checks.shortcut(llm, st, g.question, g.answer, c.kind,
                                                   [(pid, *passages[pid]) for pid in c.gold])
                g.reason = reason or ""
                st.payload = {"probes": g.probes, "failed": g.reason or None}
        except StageFailed as e:
            g.reason = f"the shortcut check failed: {e}"
    g.kept = not g.reason
    with tracer.stage("verdict", "Kept" if g.kept else "Dropped") as st:
        st.payload = {"kept": g.kept, "reason": g.reason, "question": g.question, "answer": g.answer}
    g.seconds = round(time.perf_counter() - t0, 2)
    g.run = RunResult(METHOD, g.question or g.template, {"mode": mode, "prompt_version": PROMPT_VERSION},
                      stages=tracer.stages, latency_ms=g.seconds * 1000, status="ok", answer=g.answer, gold=c.gold)
    return g


def _clean_qa(value) -> tuple[str, str]:
    q = clean_question(value)
    a = " ".join(str(value.get("answer", "")).split())
    if not a:
        raise ValueError("the answer is empty")
    return q, a


@dataclass
class Estimate:
    candidates: int
    calls: int
    tokens_in: int
    tokens_out: int
    seconds_local: float

    def describe(self) -> str:
        return (f"up to {self.candidates} candidates · up to {self.calls} LLM requests · ~{self.tokens_in:,} tokens in "
                f"/ ~{self.tokens_out:,} out · embedded model: up to ~{self.seconds_local / 60:,.0f} min "
                "(each dropped before the shortcut check saves its 2–3 probe requests)")


def estimate(con: sqlite3.Connection, n: int, mode: str, count_tokens: Callable[[str], int], prompt_tok_s: float,
             gen_tok_s: float, seed: int = 0) -> Estimate:
    """Requests and tokens for the candidates `generate` may try, calling nothing."""
    if n < 1:
        raise ConfigError(f"--n must be at least 1, got {n}")
    cands = candidates(con, seed)[: n * MAX_TRIES_PER_KEPT]
    passages = texts(con)
    calls = t_in = t_out = 0
    for c in cands:
        if mode != "template-only":
            first = rephrase_messages(c) if mode == "template" else compose_messages(c, passages)
            t_in += sum(count_tokens(m["content"]) for m in first)
            t_out += 40 if mode == "template" else 60
            calls += 1
        for pid in c.gold:  # the shortcut probes, question ~25 tokens
            title, text = passages[pid]
            t_in += count_tokens(title + " " + text) + 60
            t_out += 12
            t_in += count_tokens(text)  # the answerability probe reads them all
        t_out += 12
        calls += 1 + len(c.gold)
    return Estimate(len(cands), calls, t_in, t_out, t_in / prompt_tok_s + t_out / gen_tok_s)
