"""Runs as OpenTelemetry spans named by the OpenInference conventions, for Arize Phoenix, Langfuse
or any OTLP collector (docs/trace-schema.md, "OpenTelemetry"). The mapping only; where the
spans go (a collector, a file, live from the app) is traces/otel/export.py.

A run is one trace: a root span (CHAIN; AGENT for GRASP, whose planner directs sub-agents, each
an AGENT span over its stages), a child span per stage of the kind that fits what it did, and an
LLM span per LLM call under its stage. Spans are built directly as the SDK's ReadableSpan, with
the times the trace recorded and ids derived from the run id, so exporting a run twice sends the
same spans and a collector can tell them apart from anything else it holds.
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Callable, Iterable, Optional

from openinference.semconv.trace import (
    DocumentAttributes,
    EmbeddingAttributes,
    MessageAttributes,
    OpenInferenceMimeTypeValues,
    OpenInferenceSpanKindValues,
    RerankerAttributes,
    SpanAttributes,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from retrieval.trace.gold import gold_fates
from retrieval.trace.model import LLMCall, RunResult, Stage, dumps

Kind = OpenInferenceSpanKindValues
SCOPE = InstrumentationScope("hoptrace", "1")
JSON = OpenInferenceMimeTypeValues.JSON.value

# HopTrace's own attributes (OpenInference has no name for them), under one prefix.
RUN_ID = "hoptrace.run.id"
METHOD = "hoptrace.method"
KB = "hoptrace.kb"
GOLD_IDS = "hoptrace.gold.ids"
# JSON {passage id: {"rank": n | null, "lost_at": null | the last stage that held it | "never retrieved"}}
GOLD_FATES = "hoptrace.gold.fates"
STAGE_STATUS = "hoptrace.stage.status"
STAGE_PAYLOAD = "hoptrace.stage.payload"  # the stage's payload, JSON, as stored
LLM_CACHED = "hoptrace.llm.cached"
# A run's cost (retrieval/llm/prices.py): where the price came from, the embedded model's CPU
# seconds, and which repetition of `bench --repeat` the run was.
COST_SOURCE = "hoptrace.cost.source"
CPU_SECONDS = "hoptrace.cost.cpu_seconds"
REPETITION = "hoptrace.repetition"
LLM_PURPOSE = "hoptrace.llm.purpose"

# Which stage is which kind, by the names the methods give their stages (docs/trace-schema.md
# lists them). A stage not named here is a CHAIN.
_EMBEDDING = re.compile(r"^encode(_\d+)?$")
_RERANKER = re.compile(r"^(rerank|dense_rerank|read(_\d+)?|read_expanded_\d+)$")  # SAG's LLM rerank, GEAR's reader
_RETRIEVER = re.compile(r"^(bm25|dense|bm25_candidates|base(_\d+)?|retrieve(_\d+)?|direct_chunks|seed_events"
                        r"|single_pass|passage_link|sub\d+_search_\d+|sub\d+_vote_\d+)$")
_SUB_AGENT = re.compile(r"^sub(\d+)_")

# Where a stage's payload keeps what it retrieved, most specific first, and the fields that say a
# hit's text and score.
_DOC_KEYS = ("ranked", "candidates", "top", "chunks", "combined", "reranked", "fused", "passages", "selected",
             "events", "propositions")
_TEXT_KEYS = ("event", "proposition", "title")
_SCORE_KEYS = ("score", "rrf", "dense", "similarity", "votes", "sigma")


def span_kind(stage: Stage) -> str:
    name = stage.name
    if _EMBEDDING.match(name):
        return Kind.EMBEDDING.value
    if _RERANKER.match(name):
        return Kind.RERANKER.value
    if _RETRIEVER.match(name):
        return Kind.RETRIEVER.value
    return Kind.CHAIN.value


def root_kind(run: RunResult) -> str:
    return Kind.AGENT.value if run.method.split("[")[0].startswith("grasp") else Kind.CHAIN.value


# --- ids and times -----------------------------------------------------------------------------
def _id(bits: int, *parts: str) -> int:
    n = int(hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[: bits // 4], 16)
    return n or 1  # an all-zero id is invalid


def trace_id(run_id: str) -> int:
    return _id(128, "hoptrace", run_id)


def _ns(seconds: float) -> int:
    return int(round(seconds * 1e9))


def _end_ns(start_s: float, latency_ms: float) -> int:
    # start + latency in nanoseconds, not (start + latency) in seconds: a double holds today's
    # unix time to ~0.2 µs, which would blur a 2 ms stage.
    return _ns(start_s) + int(round(latency_ms * 1e6))


@dataclass
class _Span:
    """A span being planned: its attributes and times; `build` makes the SDK record."""
    name: str
    span_id: int
    parent: Optional[int]
    start_ns: int
    end_ns: int
    attributes: dict
    error: Optional[str] = None

    def build(self, tid: int, resource: Resource) -> ReadableSpan:
        ctx = SpanContext(tid, self.span_id, is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED))
        parent = (SpanContext(tid, self.parent, is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED))
                  if self.parent else None)
        status = Status(StatusCode.ERROR, self.error) if self.error else Status(StatusCode.OK)
        return ReadableSpan(self.name, context=ctx, parent=parent, resource=resource, attributes=self.attributes,
                            kind=SpanKind.INTERNAL, status=status, start_time=self.start_ns,
                            end_time=max(self.end_ns, self.start_ns), instrumentation_scope=SCOPE)


# --- documents --------------------------------------------------------------------------------
Texts = Callable[[list[str]], dict[str, str]]  # passage ids → their text (the KB's), may be partial


def _hits(payload: dict) -> list[dict]:
    for key in _DOC_KEYS:
        value = payload.get(key)
        if isinstance(value, list) and value and isinstance(value[0], dict) and (
                "passage_id" in value[0] or any(t in value[0] for t in _TEXT_KEYS)):
            return value
    return []


def _doc_attrs(prefix: str, hits: list[dict], texts: dict[str, str]) -> dict:
    out = {}
    for i, h in enumerate(hits):
        p = f"{prefix}.{i}."
        pid = h.get("passage_id")
        if pid:
            out[p + DocumentAttributes.DOCUMENT_ID] = str(pid)
        content = texts.get(pid) if pid else None
        if content is None:
            content = next((str(h[k]) for k in _TEXT_KEYS if h.get(k)), "")
        out[p + DocumentAttributes.DOCUMENT_CONTENT] = content
        score = next((h[k] for k in _SCORE_KEYS if isinstance(h.get(k), (int, float))), None)
        if score is not None:
            out[p + DocumentAttributes.DOCUMENT_SCORE] = float(score)
        meta = {k: v for k, v in h.items() if k not in ("passage_id",) and isinstance(v, (str, int, float, bool))}
        if meta:
            out[p + DocumentAttributes.DOCUMENT_METADATA] = json.dumps(meta, ensure_ascii=False)
    return out


_VOTE = re.compile(r"^sub(\d+)_vote_(\d+)$")


def _query(stage: Stage, run: RunResult) -> str:
    p = stage.payload
    vote = _VOTE.match(stage.name)
    if vote:  # GRASP's vote ranks what the same round's search statement found
        search = next((s for s in run.stages if s.name == f"sub{vote[1]}_search_{vote[2]}"), None)
        p = {**(search.payload if search else {}), **p}
    for key in ("query", "statement", "bm25_query"):
        if isinstance(p.get(key), str) and p[key]:
            return p[key]
    subs = p.get("per_sub_query")
    if isinstance(subs, list) and subs and isinstance(subs[0], dict):
        return " | ".join(str(s.get("sub_query", "")) for s in subs)
    return run.question


# --- LLM calls ----------------------------------------------------------------------------------
_ROLE = re.compile(r"^\[(system|user|assistant|tool)\]\n", re.M)


def messages(prompt: str) -> list[tuple[str, str]]:
    """The chat messages of a recorded prompt ("[role]\\ncontent" blocks, llm/client.render_prompt)."""
    parts = _ROLE.split(prompt)
    if len(parts) < 3:
        return [("user", prompt)]
    return [(parts[i], parts[i + 1].rstrip("\n")) for i in range(1, len(parts) - 1, 2)]


def llm_attributes(call: LLMCall) -> dict:
    a = {SpanAttributes.OPENINFERENCE_SPAN_KIND: Kind.LLM.value, SpanAttributes.LLM_MODEL_NAME: call.model,
         SpanAttributes.LLM_TOKEN_COUNT_PROMPT: call.tokens_in,
         SpanAttributes.LLM_TOKEN_COUNT_COMPLETION: call.tokens_out,
         SpanAttributes.LLM_TOKEN_COUNT_TOTAL: call.tokens_in + call.tokens_out,
         SpanAttributes.INPUT_VALUE: call.prompt, SpanAttributes.OUTPUT_VALUE: call.completion,
         LLM_CACHED: bool(call.cached), LLM_PURPOSE: call.purpose}
    if call.params:
        a[SpanAttributes.LLM_INVOCATION_PARAMETERS] = json.dumps(call.params)
    for i, (role, content) in enumerate(messages(call.prompt)):
        a[f"{SpanAttributes.LLM_INPUT_MESSAGES}.{i}.{MessageAttributes.MESSAGE_ROLE}"] = role
        a[f"{SpanAttributes.LLM_INPUT_MESSAGES}.{i}.{MessageAttributes.MESSAGE_CONTENT}"] = content
    a[f"{SpanAttributes.LLM_OUTPUT_MESSAGES}.0.{MessageAttributes.MESSAGE_ROLE}"] = "assistant"
    a[f"{SpanAttributes.LLM_OUTPUT_MESSAGES}.0.{MessageAttributes.MESSAGE_CONTENT}"] = call.completion
    return a


# --- stages -------------------------------------------------------------------------------------
def stage_attributes(stage: Stage, run: RunResult, before: Optional[Stage], texts: Texts) -> dict:
    """The span attributes of one stage: its kind's OpenInference fields, and the payload as JSON."""
    kind = span_kind(stage)
    payload = dumps(stage.payload).decode()
    a = {SpanAttributes.OPENINFERENCE_SPAN_KIND: kind, STAGE_STATUS: stage.status, STAGE_PAYLOAD: payload,
         SpanAttributes.METADATA: json.dumps({"title": stage.title, "status": stage.status,
                                              "message": stage.message}, ensure_ascii=False)}
    if stage.tokens_in or stage.tokens_out:
        a[SpanAttributes.LLM_TOKEN_COUNT_PROMPT] = stage.tokens_in
        a[SpanAttributes.LLM_TOKEN_COUNT_COMPLETION] = stage.tokens_out
        a[SpanAttributes.LLM_TOKEN_COUNT_TOTAL] = stage.tokens_in + stage.tokens_out
    hits = _hits(stage.payload)
    lookup = texts([h["passage_id"] for h in hits if h.get("passage_id")]) if hits else {}
    if kind == Kind.RETRIEVER.value:
        a[SpanAttributes.INPUT_VALUE] = _query(stage, run)
        a.update(_doc_attrs(SpanAttributes.RETRIEVAL_DOCUMENTS, hits, lookup))
    elif kind == Kind.EMBEDDING.value:
        a[SpanAttributes.EMBEDDING_MODEL_NAME] = str(stage.payload.get("model", ""))
        text = _query(stage, run)
        a[SpanAttributes.INPUT_VALUE] = text
        a[f"{SpanAttributes.EMBEDDING_EMBEDDINGS}.0.{EmbeddingAttributes.EMBEDDING_TEXT}"] = text
    elif kind == Kind.RERANKER.value:
        a.update(_reranker(stage, run, before, hits, lookup, texts))
    else:
        a[SpanAttributes.INPUT_VALUE] = _query(stage, run)
        a[SpanAttributes.OUTPUT_VALUE] = payload
        a[SpanAttributes.OUTPUT_MIME_TYPE] = JSON
    return a


def _reranker(stage: Stage, run: RunResult, before: Optional[Stage], hits: list[dict], lookup: dict,
              texts: Texts) -> dict:
    p = stage.payload
    a = {RerankerAttributes.RERANKER_QUERY: run.question, SpanAttributes.INPUT_VALUE: run.question}
    model = stage.llm_calls[0].model if stage.llm_calls else str(p.get("reranker") or p.get("model") or "")
    if model:
        a[RerankerAttributes.RERANKER_MODEL_NAME] = model
    if stage.name.startswith("read"):
        # GEAR's reader: passages in, proximal triples out (eq. 1)
        inputs = [{"title": t} for t in p.get("passages_read", [])]
        outputs = [{"title": " | ".join(map(str, t))} for t in p.get("proximal_triples", [])]
        top_k = p.get("max_triples", len(outputs))
    else:
        inputs = _hits(before.payload) if before is not None else []
        if isinstance(p.get("from"), int):
            inputs = inputs[: p["from"]]
        outputs = hits
        top_k = p.get("k_event", len(outputs))
    lookup = {**lookup, **texts([h["passage_id"] for h in inputs if h.get("passage_id")])}
    a.update(_doc_attrs(RerankerAttributes.RERANKER_INPUT_DOCUMENTS, inputs, lookup))
    a.update(_doc_attrs(RerankerAttributes.RERANKER_OUTPUT_DOCUMENTS, outputs, lookup))
    a[RerankerAttributes.RERANKER_TOP_K] = int(top_k) if isinstance(top_k, (int, float)) else len(outputs)
    return a


# --- a run ----------------------------------------------------------------------------------------
@dataclass
class RunContext:
    """What a run's spans say beyond the run itself: its stored id, session or experiment, KB, gold."""
    run_id: str
    session_id: str = ""
    kb: str = ""
    gold: tuple[str, ...] = ()


def _no_texts(ids: list[str]) -> dict[str, str]:
    return {}


def run_spans(run: RunResult, ctx: RunContext, texts: Texts = _no_texts,
              resource: Optional[Resource] = None) -> list[ReadableSpan]:
    """The spans of one run, root first."""
    resource = resource or Resource.create({"service.name": "hoptrace"})
    tid = trace_id(ctx.run_id)
    starts = [s.started_at for s in run.stages if s.started_at > 0]
    t0 = min(starts) if starts else 0.0
    end = max([_end_ns(s.started_at, s.latency_ms) for s in run.stages if s.started_at > 0]
              + [_end_ns(t0, run.latency_ms)])
    root = _Span(run.method, _id(64, ctx.run_id, "root"), None, _ns(t0), end, _root_attributes(run, ctx),
                 error=run.error if run.status == "error" else None)
    planned = [root]
    agents: dict[str, _Span] = {}
    previous: Optional[Stage] = None
    for seq, st in enumerate(run.stages):
        parent = root.span_id
        m = _SUB_AGENT.match(st.name) if root_kind(run) == Kind.AGENT.value else None
        if m:
            agent = agents.get(m.group(1))
            if agent is None:
                agent = agents[m.group(1)] = _Span(f"sub-agent {m.group(1)}", _id(64, ctx.run_id, "agent", m.group(1)),
                                                   root.span_id, _ns(st.started_at), _ns(st.started_at),
                                                   {SpanAttributes.OPENINFERENCE_SPAN_KIND: Kind.AGENT.value,
                                                    SpanAttributes.AGENT_NAME: f"sub-agent {m.group(1)}"})
                planned.append(agent)
            agent.end_ns = max(agent.end_ns, _end_ns(st.started_at, st.latency_ms))
            if st.name.endswith("_rewrite") and st.payload.get("sub_question"):
                agent.attributes[SpanAttributes.INPUT_VALUE] = str(st.payload["sub_question"])
            parent = agent.span_id
        sid = _id(64, ctx.run_id, "stage", str(seq))
        planned.append(_Span(st.name, sid, parent, _ns(st.started_at), _end_ns(st.started_at, st.latency_ms),
                             stage_attributes(st, run, previous, texts),
                             error=(st.message or "error") if st.status == "error" else None))
        at = st.started_at
        for j, call in enumerate(st.llm_calls):
            # Runs stored before calls had their own start: laid end to end from the stage's start.
            start = call.started_at if call.started_at > 0 else at
            at = start + call.latency_ms / 1000
            planned.append(_Span(f"llm {call.purpose or st.name}", _id(64, ctx.run_id, "llm", str(seq), str(j)), sid,
                                 _ns(start), _end_ns(start, call.latency_ms), llm_attributes(call), error=call.error))
        previous = st
    return [s.build(tid, resource) for s in planned]


def _root_attributes(run: RunResult, ctx: RunContext) -> dict:
    gold = list(ctx.gold) or list(run.gold)
    a = {SpanAttributes.OPENINFERENCE_SPAN_KIND: root_kind(run), SpanAttributes.INPUT_VALUE: run.question,
         SpanAttributes.OUTPUT_VALUE: json.dumps({"answer": run.answer, "ranked": [
             {"passage_id": r.passage_id, "title": r.title, "score": r.score} for r in run.ranked]},
             ensure_ascii=False),
         SpanAttributes.OUTPUT_MIME_TYPE: JSON, RUN_ID: ctx.run_id, METHOD: run.method,
         SpanAttributes.METADATA: json.dumps({"method": run.method, "kb": ctx.kb, "config": run.config,
                                              "status": run.status}, ensure_ascii=False, default=str),
         SpanAttributes.LLM_TOKEN_COUNT_PROMPT: run.tokens_in,
         SpanAttributes.LLM_TOKEN_COUNT_COMPLETION: run.tokens_out,
         SpanAttributes.LLM_TOKEN_COUNT_TOTAL: run.tokens_in + run.tokens_out}
    cost = run.cost or {}
    if cost.get("usd") is not None:   # OpenInference's cost attribute; a price unknown is left out, not 0
        a[SpanAttributes.LLM_COST_TOTAL] = cost["usd"]
    if cost:
        a[COST_SOURCE] = cost.get("source") or ""
        if cost.get("cpu_s") is not None:
            a[CPU_SECONDS] = cost["cpu_s"]
    if run.repetition is not None:
        a[REPETITION] = run.repetition
    if root_kind(run) == Kind.AGENT.value:
        a[SpanAttributes.AGENT_NAME] = "GRASP planner"
    if ctx.session_id:
        a[SpanAttributes.SESSION_ID] = ctx.session_id
    if ctx.kb:
        a[KB] = ctx.kb
    if gold:
        a[GOLD_IDS] = gold
        a[GOLD_FATES] = json.dumps({f.passage_id: {"rank": f.rank, "lost_at": None if f.rank else
                                                   (f.last_seen or "never retrieved")}
                                    for f in gold_fates(run, gold)})
    return a


def spans_of(runs: Iterable[tuple[RunResult, RunContext]], texts: Texts = _no_texts) -> Iterable[list[ReadableSpan]]:
    resource = Resource.create({"service.name": "hoptrace"})
    for run, ctx in runs:
        yield run_spans(run, ctx, texts, resource)
