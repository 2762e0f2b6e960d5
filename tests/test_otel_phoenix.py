"""A real Arize Phoenix receives HopTrace's spans: stored GRIEVER, SAG and GRASP runs sent with
`hoptrace export --otlp`, and a run sent live as it is stored; Phoenix's own REST API is read back.

Phoenix is the session's (tests/phoenix_server.py, the `phoenix` fixture in conftest.py).
"""
from __future__ import annotations

import json
import time
import urllib.request
from collections import Counter
from pathlib import Path

import pytest
from openinference.semconv.trace import DocumentAttributes, SpanAttributes

from retrieval.cli import main
from retrieval.showcase import SHOWCASE_DIR, load
from traces.otel.export import LiveExport
from traces.otel.spans import RunContext, run_spans, trace_id
from traces.storage.store import TraceStore

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
KIND = SpanAttributes.OPENINFERENCE_SPAN_KIND


def _get(url: str):
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


def phoenix_spans(url: str, tid: int, expect: int, wait_s: float = 60.0) -> list[dict]:
    """Phoenix's spans of one trace, once it has ingested `expect` of them (ingestion is async)."""
    deadline = time.time() + wait_s
    while True:
        spans = _get(f"{url}/v1/projects/default/spans?limit=1000&trace_id={tid:032x}")["data"]
        if len(spans) >= expect or time.time() > deadline:
            return spans
        time.sleep(0.5)


def _documents(attributes: dict, field: str) -> list:
    """One field of a span's retrieved documents, in order (Phoenix returns attributes flat:
    `retrieval.documents.3.document.id`)."""
    prefix = SpanAttributes.RETRIEVAL_DOCUMENTS + "."
    found = {}
    for key, value in attributes.items():
        if key.startswith(prefix) and key.endswith("." + field):
            found[int(key[len(prefix):].split(".")[0])] = value
    return [found[i] for i in sorted(found)]


def _showcase_runs():
    sc = load(SHOWCASE_DIR / "demo.json.gz")
    item = next(it for it in sc.items if all(m in it.runs for m in ("griever", "sag", "grasp")))
    return item, [item.runs[m] for m in ("griever", "sag", "grasp")]


def _check_trace(url: str, run, rid: str, session: str, gold) -> list[dict]:
    sent = run_spans(run, RunContext(rid, session, "demo", tuple(gold)))
    got = phoenix_spans(url, trace_id(rid), len(sent))
    assert len(got) == len(sent), f"{run.method}: Phoenix holds {len(got)} of {len(sent)} spans"
    assert Counter(s["span_kind"] for s in got) == Counter(s.attributes[KIND] for s in sent)
    ids = {s["context"]["span_id"] for s in got}
    roots = [s for s in got if not s.get("parent_id")]
    assert len(roots) == 1 and roots[0]["name"] == run.method
    assert all(s["parent_id"] in ids for s in got if s.get("parent_id"))  # every parent is in the trace
    attrs = {s["name"]: s["attributes"] for s in got}
    assert attrs[run.method][SpanAttributes.SESSION_ID] == session
    # LLM spans carry the tokens as recorded
    calls = [c for st in run.stages for c in st.llm_calls]
    llm = [s["attributes"] for s in got if s["span_kind"] == "LLM"]
    assert sorted(a[SpanAttributes.LLM_TOKEN_COUNT_COMPLETION] for a in llm) == sorted(c.tokens_out for c in calls)
    assert sorted(a[SpanAttributes.LLM_TOKEN_COUNT_PROMPT] for a in llm) == sorted(c.tokens_in for c in calls)
    return got


def test_phoenix_receives_stored_griever_sag_and_grasp_runs_as_sent(phoenix, tmp_path, monkeypatch):
    item, runs = _showcase_runs()
    store = TraceStore(tmp_path / "traces.sqlite")
    sid = store.new_session("demo", item.question)
    rids = [store.save_run(sid, "demo", r, item.gold) for r in runs]
    monkeypatch.setenv("HOPTRACE_HOME", str(tmp_path))
    assert main(["export", "--otlp", phoenix, "--runs", ",".join(rids), "--traces",
                 str(tmp_path / "traces.sqlite")]) == 0
    got = {r.method: _check_trace(phoenix, r, rid, sid, item.gold) for r, rid in zip(runs, rids)}
    # GRIEVER's retrieval stages arrive with their documents, in order, with scores
    griever = runs[0]
    first = next(st for st in griever.stages if st.name == "retrieve_1")
    span = next(s for s in got["griever"] if s["name"] == "retrieve_1")
    assert span["span_kind"] == "RETRIEVER"
    ids = _documents(span["attributes"], DocumentAttributes.DOCUMENT_ID)
    assert ids == [h["passage_id"] for h in first.payload["combined"]]
    scores = _documents(span["attributes"], DocumentAttributes.DOCUMENT_SCORE)
    assert scores == [h["dense"] for h in first.payload["combined"]]
    assert span["attributes"][SpanAttributes.INPUT_VALUE].startswith(first.payload["per_sub_query"][0]["sub_query"])
    # SAG's LLM rerank is a RERANKER with an LLM child; GRASP is an agent of sub-agents
    kinds = {s["name"]: s["span_kind"] for s in got["sag"]}
    assert kinds["rerank"] == "RERANKER" and kinds["seed_events"] == "RETRIEVER" and kinds["sag"] == "CHAIN"
    grasp = {s["name"]: s for s in got["grasp"]}
    assert grasp["grasp"]["span_kind"] == "AGENT" and grasp["sub-agent 1"]["span_kind"] == "AGENT"
    assert grasp["sub1_rewrite"]["parent_id"] == grasp["sub-agent 1"]["context"]["span_id"]


def test_a_run_is_sent_live_as_it_is_stored(phoenix, tmp_path):
    item, runs = _showcase_runs()
    store = TraceStore(tmp_path / "traces.sqlite")
    live = LiveExport(phoenix)
    store.on_saved.append(live.submit)
    sid = store.new_session("demo", item.question)
    rid = store.save_run(sid, "demo", runs[0], item.gold)
    assert live.flush(30)
    _check_trace(phoenix, runs[0], rid, sid, item.gold)
    assert live.status() is None and live.watched.sent > 0
    live.shutdown()
