"""Runs as OpenTelemetry spans with the OpenInference conventions (traces/otel/spans.py), written to OTLP
JSON, sent live without ever costing a request (traces/otel/export.py), read back from a trace file
without changing it."""
from __future__ import annotations

import json
import socket
import threading
import time

import pytest
from openinference.semconv.trace import DocumentAttributes, MessageAttributes, RerankerAttributes, SpanAttributes
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from retrieval.core.errors import InputError
from retrieval.trace.model import LLMCall, RankedPassage, RunResult, Stage
from traces.otel.export import JsonlFileExporter, LiveExport, PassageTexts, check_reachable, endpoint_url
from traces.otel.spans import GOLD_FATES, GOLD_IDS, STAGE_PAYLOAD, RunContext, run_spans, trace_id
from traces.storage.store import TraceReader, TraceStore

KIND = SpanAttributes.OPENINFERENCE_SPAN_KIND
T0 = 1_790_000_000.0
GOLD = ("p-gold", "p-lost")


def _call(purpose: str, start: float) -> LLMCall:
    return LLMCall("qwen-test", "[system]\nAnswer in JSON.\n\n[user]\nRank these events.", '{"keep": [1]}', 120, 9,
                   350.0, False, None, purpose, start, {"max_tokens": 64, "temperature": 0.0, "seed": 0})


def _run(method: str = "sag") -> RunResult:
    coarse = Stage("coarse_rank", "Coarse", T0 + 0.2, 10.0, payload={"events": [
        {"rank": 1, "event": "A met B in Paris.", "similarity": 0.8},
        {"rank": 2, "event": "B was born in Lyon.", "similarity": 0.7},
        {"rank": 3, "event": "C is a river.", "similarity": 0.1}]})
    rerank = Stage("rerank", "LLM rerank", T0 + 0.3, 400.0, payload={"from": 2, "k_event": 1, "selected": [
        {"event": "B was born in Lyon.", "passage_id": "p-gold"}]})
    rerank.add_llm_call(_call("rerank", T0 + 0.31))
    stages = [
        Stage("encode", "Encode", T0, 5.0, payload={"model": "all-MiniLM-L6-v2", "dim": 384}),
        Stage("bm25", "BM25", T0 + 0.1, 2.0, payload={"query": "where was B born", "candidates": [
            {"passage_id": "p-gold", "title": "B", "score": 12.5}, {"passage_id": "p-lost", "title": "C",
                                                                    "score": 3.0}]}),
        coarse, rerank,
        Stage("merge", "Merge", T0 + 0.8, 1.0, status="error", message="boom", payload={"k_out": 2}),
        Stage("ranking", "Ranking", T0 + 0.81, 0.5, payload={"ranked": [{"rank": 1, "passage_id": "p-gold"}]}),
    ]
    return RunResult(method, "Where was B born?", {"k": 2}, [RankedPassage("p-gold", 1.0, "B")], stages, 900.0)


def _by_name(spans):
    return {s.name: s for s in spans}


def test_each_stage_becomes_a_span_of_the_kind_that_fits_with_its_times_and_parent():
    spans = run_spans(_run(), RunContext("run-1", "sess-1", "demo", GOLD),
                      texts=lambda ids: {"p-gold": "B was born in Lyon in 1901."})
    root, by = spans[0], _by_name(spans)
    stage_spans = [s for s in spans[1:] if s.attributes[KIND] != "LLM"]
    assert len(stage_spans) == 6 and root.parent is None
    assert all(s.parent.span_id == root.context.span_id for s in stage_spans)
    assert {s.context.trace_id for s in spans} == {trace_id("run-1")}
    assert all(KIND in s.attributes for s in spans)  # every span says its kind
    assert [by[n].attributes[KIND] for n in ("sag", "encode", "bm25", "coarse_rank", "rerank", "merge", "llm rerank")] \
        == ["CHAIN", "EMBEDDING", "RETRIEVER", "CHAIN", "RERANKER", "CHAIN", "LLM"]
    # recorded start and latency become the span's times
    assert by["bm25"].start_time == int(round((T0 + 0.1) * 1e9))
    assert by["bm25"].end_time - by["bm25"].start_time == 2_000_000
    assert root.start_time == int(round(T0 * 1e9)) and root.end_time == int(round((T0 + 0.9) * 1e9))
    # the LLM call is a child of its stage, at its own start
    llm = by["llm rerank"]
    assert llm.parent.span_id == by["rerank"].context.span_id and llm.start_time == int(round((T0 + 0.31) * 1e9))
    assert not by["merge"].status.is_ok and by["merge"].status.description == "boom"


def test_the_kinds_carry_their_openinference_attributes():
    by = _by_name(run_spans(_run(), RunContext("run-1", "sess-1", "demo", GOLD),
                            texts=lambda ids: {"p-gold": "B was born in Lyon in 1901."}))
    ret = by["bm25"].attributes
    docs = SpanAttributes.RETRIEVAL_DOCUMENTS
    assert ret[SpanAttributes.INPUT_VALUE] == "where was B born"
    assert ret[f"{docs}.0.{DocumentAttributes.DOCUMENT_ID}"] == "p-gold"
    assert ret[f"{docs}.0.{DocumentAttributes.DOCUMENT_CONTENT}"] == "B was born in Lyon in 1901."  # the KB's text
    assert ret[f"{docs}.1.{DocumentAttributes.DOCUMENT_CONTENT}"] == "C"  # no text: the title
    assert ret[f"{docs}.1.{DocumentAttributes.DOCUMENT_SCORE}"] == 3.0
    assert json.loads(ret[STAGE_PAYLOAD])["candidates"][0]["score"] == 12.5  # the payload as stored
    emb = by["encode"].attributes
    assert emb[SpanAttributes.EMBEDDING_MODEL_NAME] == "all-MiniLM-L6-v2"
    assert not any("vector" in k for k in emb)  # no vectors by default
    rr = by["rerank"].attributes
    assert rr[RerankerAttributes.RERANKER_QUERY] == "Where was B born?" and rr[RerankerAttributes.RERANKER_TOP_K] == 1
    assert rr[RerankerAttributes.RERANKER_MODEL_NAME] == "qwen-test"
    inputs = [v for k, v in rr.items() if k.startswith(RerankerAttributes.RERANKER_INPUT_DOCUMENTS)
              and k.endswith(DocumentAttributes.DOCUMENT_CONTENT)]
    assert inputs == ["A met B in Paris.", "B was born in Lyon."]  # the coarse list's first `from`
    assert rr[f"{RerankerAttributes.RERANKER_OUTPUT_DOCUMENTS}.0.{DocumentAttributes.DOCUMENT_ID}"] == "p-gold"
    llm = by["llm rerank"].attributes
    assert llm[SpanAttributes.LLM_MODEL_NAME] == "qwen-test"
    assert (llm[SpanAttributes.LLM_TOKEN_COUNT_PROMPT], llm[SpanAttributes.LLM_TOKEN_COUNT_COMPLETION],
            llm[SpanAttributes.LLM_TOKEN_COUNT_TOTAL]) == (120, 9, 129)
    assert json.loads(llm[SpanAttributes.LLM_INVOCATION_PARAMETERS])["max_tokens"] == 64
    msg = SpanAttributes.LLM_INPUT_MESSAGES
    assert [llm[f"{msg}.{i}.{MessageAttributes.MESSAGE_ROLE}"] for i in (0, 1)] == ["system", "user"]
    assert llm[f"{msg}.1.{MessageAttributes.MESSAGE_CONTENT}"] == "Rank these events."
    assert llm[f"{SpanAttributes.LLM_OUTPUT_MESSAGES}.0.{MessageAttributes.MESSAGE_CONTENT}"] == '{"keep": [1]}'


def test_the_root_names_the_session_the_gold_and_the_stage_that_lost_each():
    root = run_spans(_run(), RunContext("run-1", "sess-1", "demo", GOLD))[0].attributes
    assert root[SpanAttributes.SESSION_ID] == "sess-1" and root[SpanAttributes.INPUT_VALUE] == "Where was B born?"
    assert list(root[GOLD_IDS]) == list(GOLD)
    fates = json.loads(root[GOLD_FATES])
    assert fates["p-gold"] == {"rank": 1, "lost_at": None}
    assert fates["p-lost"] == {"rank": None, "lost_at": "bm25"}  # last held by BM25, then gone
    assert root[SpanAttributes.LLM_TOKEN_COUNT_TOTAL] == 129


def test_grasp_is_an_agent_whose_sub_agents_group_their_stages():
    stages = [Stage("plan", "Plan", T0, 10.0), Stage("sub1_rewrite", "r", T0 + 0.1, 5.0,
                                                     payload={"sub_question": "Who?"}),
              Stage("sub1_search_1", "s", T0 + 0.2, 5.0, payload={"statement": "who", "propositions": [
                  {"proposition": "X founded Y.", "sigma": 0.9}]}),
              Stage("sub2_rewrite", "r", T0 + 0.3, 5.0), Stage("synthesis", "S", T0 + 0.4, 5.0)]
    spans = run_spans(RunResult("grasp", "Q?", stages=stages, latency_ms=405.0), RunContext("g-1"))
    by = _by_name(spans)
    assert by["grasp"].attributes[KIND] == "AGENT"
    assert by["sub-agent 1"].attributes[KIND] == "AGENT"
    assert by["sub-agent 1"].attributes[SpanAttributes.INPUT_VALUE] == "Who?"
    assert by["sub1_search_1"].parent.span_id == by["sub-agent 1"].context.span_id
    assert by["sub2_rewrite"].parent.span_id == by["sub-agent 2"].context.span_id
    assert by["plan"].parent.span_id == by["grasp"].context.span_id
    content = f"{SpanAttributes.RETRIEVAL_DOCUMENTS}.0.{DocumentAttributes.DOCUMENT_CONTENT}"
    assert by["sub1_search_1"].attributes[content] \
        == "X founded Y."
    assert abs(by["sub-agent 1"].end_time - (T0 + 0.205) * 1e9) < 1e3  # its last stage's end (float seconds)


def test_the_same_run_exported_twice_gives_the_same_ids():
    a = run_spans(_run(), RunContext("run-1"))
    b = run_spans(_run(), RunContext("run-1"))
    c = run_spans(_run(), RunContext("run-2"))
    assert [s.context.span_id for s in a] == [s.context.span_id for s in b]
    assert not {s.context.span_id for s in a} & {s.context.span_id for s in c}


def test_otlp_json_file_has_hex_ids_and_one_request_a_line(tmp_path):
    out = tmp_path / "spans.jsonl"
    ex = JsonlFileExporter(out)
    ex.export(run_spans(_run(), RunContext("run-1")))
    ex.export(run_spans(_run("bm25"), RunContext("run-2")))
    ex.shutdown()
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(lines) == 2
    spans = lines[0]["resourceSpans"][0]["scopeSpans"][0]["spans"]
    assert len(spans) == 8
    assert all(len(s["traceId"]) == 32 and int(s["traceId"], 16) == trace_id("run-1") for s in spans)
    assert all(len(s["spanId"]) == 16 for s in spans) and sum("parentSpanId" not in s for s in spans) == 1


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_bad_endpoints_and_unknown_runs_are_named(tmp_path):
    with pytest.raises(InputError, match="not an http"):
        endpoint_url("ftp://collector")
    assert endpoint_url("http://127.0.0.1:6006") == "http://127.0.0.1:6006/v1/traces"
    url = f"http://127.0.0.1:{_closed_port()}/v1/traces"
    with pytest.raises(InputError, match=f"collector at {url} cannot be reached"):
        check_reachable(url, timeout_s=2)
    store = TraceStore(tmp_path / "traces.sqlite")
    rid = store.save_run(store.new_session("demo", "Q"), "demo", _run(), GOLD)
    reader = TraceReader(tmp_path / "traces.sqlite")
    assert reader.run_ids(runs=[rid]) == [rid]
    with pytest.raises(InputError, match="no stored run with id 'nope'"):
        reader.run_ids(runs=[rid, "nope"])
    with pytest.raises(InputError, match="no experiment 'x1'"):
        reader.run_ids(experiment="x1")


def test_a_trace_file_of_an_older_schema_is_named_and_left_as_it_was(tmp_path):
    import sqlite3

    old = tmp_path / "old.sqlite"
    con = sqlite3.connect(old)
    con.execute("CREATE TABLE sessions (id TEXT PRIMARY KEY)")
    con.execute("CREATE TABLE runs (id TEXT PRIMARY KEY, session_id TEXT, method TEXT, question TEXT)")
    con.commit()
    con.close()
    before = old.read_bytes()
    with pytest.raises(InputError, match=r"older schema \(table 'runs' lacks created_at, gold, k, kb, result\)"):
        TraceReader(old)
    assert old.read_bytes() == before
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"not a database at all" * 100)
    with pytest.raises(InputError, match="is not a HopTrace trace file"):
        TraceReader(junk)


class _Stuck(SpanExporter):
    """A scripted test double of a collector that hangs: export waits until released."""

    def __init__(self):
        self.release = threading.Event()
        self.calls = 0

    def export(self, spans):
        self.calls += 1
        self.release.wait()
        return SpanExportResult.FAILURE

    def shutdown(self):
        self.release.set()


def test_a_hung_collector_never_holds_up_storing_and_the_failure_is_said(tmp_path):
    store = TraceStore(tmp_path / "traces.sqlite")
    stuck = _Stuck()
    live = LiveExport("http://127.0.0.1:9", texts=PassageTexts(lambda kb: tmp_path / "none.sqlite"), exporter=stuck,
                      max_runs_waiting=4)
    store.on_saved.append(live.submit)
    sid = store.new_session("demo", "Q")
    ids = [store.save_run(sid, "demo", _run(), GOLD) for _ in range(20)]  # returns while the export hangs
    assert len(store.session_runs(sid)) == 20 and len(set(ids)) == 20
    stuck.release.set()
    live.flush(timeout_s=20)
    assert stuck.calls >= 1
    assert "span export to http://127.0.0.1:9/v1/traces is failing" in live.status()
    live.shutdown()


def test_a_collector_that_is_down_costs_a_stored_run_nothing_and_is_said_once(tmp_path):
    store = TraceStore(tmp_path / "traces.sqlite")
    live = LiveExport(f"http://127.0.0.1:{_closed_port()}", texts=PassageTexts(lambda kb: tmp_path / "none.sqlite"))
    store.on_saved.append(live.submit)
    sid = store.new_session("demo", "Q")
    for _ in range(5):
        store.save_run(sid, "demo", _run(), GOLD)
    live.flush(timeout_s=30)
    assert len(store.session_runs(sid)) == 5
    status = live.status()
    assert status and "failing since" in status and "runs are still stored" in status
    live.shutdown()


def test_a_listener_that_raises_is_logged_once_per_kind_with_its_text(tmp_path, caplog):
    store = TraceStore(tmp_path / "traces.sqlite")
    calls = []

    def broken_export(run_id, *rest):
        calls.append(run_id)
        raise (ValueError if len(calls) < 4 else KeyError)(f"collector said no to {run_id}")

    store.on_saved.append(broken_export)
    sid = store.new_session("demo", "Q")
    with caplog.at_level("WARNING", logger="hoptrace"):
        ids = [store.save_run(sid, "demo", _run(), GOLD) for _ in range(5)]
    assert len(store.session_runs(sid)) == 5 and calls == ids   # every run stored, every one announced
    said = [r.getMessage() for r in caplog.records if "broken_export" in r.getMessage()]
    assert len(said) == 2, said   # one ValueError line, one KeyError line
    assert "ValueError" in said[0] and f"collector said no to {ids[0]}" in said[0]
    assert "KeyError" in said[1] and ids[3] in said[1]


def test_public_mode_sends_spans_only_where_the_operator_said(tmp_path, monkeypatch):
    """No input of the app names an endpoint; only the operator's flag or environment does."""
    from ui.state import live_export

    monkeypatch.delenv("HOPTRACE_OTLP_ENDPOINT", raising=False)
    assert live_export(None) is None
    monkeypatch.setenv("HOPTRACE_OTLP_ENDPOINT", "http://127.0.0.1:9")
    live = live_export(None)
    assert live.url == "http://127.0.0.1:9/v1/traces"
    live.shutdown()


# --- a bulk export that loses nothing -------------------------------------------------------------
class _Throttled:
    """A real OTLP/HTTP receiver on loopback that refuses and stalls batches on a schedule, as a
    collector on two busy cores does: every 3rd request answers 503, every 5th is held past the
    client's time-out and dropped unread; the rest are decoded and their span ids kept."""

    def __init__(self, refuse_every: int = 3, stall_every: int = 5, stall_s: float = 1.5, fail_after: int = 0):
        import http.server

        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        self.span_ids: set[bytes] = set()
        self.trace_ids: set[bytes] = set()
        self.requests = self.refused = self.stalled = 0
        me = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                me.requests += 1
                n = me.requests
                if fail_after and n > fail_after or refuse_every and n % refuse_every == 0:
                    me.refused += 1
                    self.send_response(503)
                    self.end_headers()
                    return
                if stall_every and n % stall_every == 0:
                    me.stalled += 1
                    time.sleep(stall_s)
                    return   # the client gave up: nothing stored, no answer
                req = ExportTraceServiceRequest()
                req.ParseFromString(body)
                for rs in req.resource_spans:
                    for ss in rs.scope_spans:
                        for sp in ss.spans:
                            me.span_ids.add(sp.span_id)
                            me.trace_ids.add(sp.trace_id)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.end_headers()

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1/traces"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def many_runs(tmp_path_factory):
    """300 stored runs (2,400 spans): the size at which a queue-and-drop export lost spans."""
    path = tmp_path_factory.mktemp("bulk") / "traces.sqlite"
    store = TraceStore(path)
    sid = store.new_session("demo", "Q")
    ids = [store.save_run(sid, "demo", _run(m), GOLD) for m in ("sag", "griever", "gear") * 100]
    return path, ids


def _sent_span_ids(path, ids) -> set[bytes]:
    reader = TraceReader(path)
    out = set()
    for rid in ids:
        run, info = reader.load_run(rid)
        out |= {s.context.span_id.to_bytes(8, "big") for s in run_spans(run, RunContext(
            rid, info["session_id"], info["kb"], tuple(info["gold"])))}
    reader.close()
    return out


def test_a_receiver_that_refuses_and_stalls_batches_ends_up_with_every_span(many_runs, monkeypatch):
    from traces.otel import export
    from traces.otel.export import export_stored, otlp_exporter

    monkeypatch.setattr(export, "BACKOFF_S", (0.05, 0.2))
    path, ids = many_runs
    recv = _Throttled()
    reader = TraceReader(path)
    try:
        rep = export_stored(reader, ids, otlp_exporter(recv.url, timeout_s=0.5), recv.url,
                            texts=PassageTexts(lambda kb: path.parent / "none.sqlite"), deadline_s=120)
    finally:
        reader.close()
        recv.close()
    expected = _sent_span_ids(path, ids)
    assert recv.refused >= 3 and recv.stalled >= 2, "the receiver must have refused and stalled batches"
    assert rep.undelivered == [] and rep.runs == 300 and rep.spans == len(expected) == 2400
    assert recv.span_ids == expected, f"the receiver holds {len(recv.span_ids)} of {len(expected)} spans"
    assert len(recv.trace_ids) == 300 and rep.retries >= recv.refused // 2
    assert rep.line().endswith(f"0 lost; {rep.retries} batches sent again after a refusal or time-out")


def test_a_deadline_that_passes_names_the_undelivered_runs_and_the_resume_sends_exactly_those(
        many_runs, tmp_path, monkeypatch, capsys):
    from retrieval.cli import main
    from traces.otel import export

    monkeypatch.setattr(export, "BACKOFF_S", (0.05, 0.1))
    monkeypatch.setenv("HOPTRACE_HOME", str(tmp_path))
    path, ids = many_runs
    first = ids[:100]
    # A receiver that takes the reachability check and 3 batches (60 runs), then refuses everything
    # until a 3-second deadline has passed.
    down = _Throttled(refuse_every=0, stall_every=0, fail_after=4)
    try:
        rc = main(["export", "--otlp", down.url, "--runs", ",".join(first), "--traces", str(path),
                   "--deadline", "0.05"])
    finally:
        down.close()
    out = capsys.readouterr().out
    assert rc == 1
    assert "exported 60 runs as 480 spans" in out and "40 runs NOT delivered by the deadline" in out
    resume = next((tmp_path / "exports").glob("undelivered-*.txt"))
    listed = [x for x in resume.read_text().splitlines() if not x.startswith("#")]
    assert listed == first[60:] and f"--resume {resume}" in out and first[60] in out
    up = _Throttled(refuse_every=0, stall_every=0)
    try:
        assert main(["export", "--otlp", up.url, "--resume", str(resume), "--traces", str(path)]) == 0
    finally:
        up.close()
    assert up.span_ids == _sent_span_ids(path, first[60:])
    assert (down.span_ids | up.span_ids) == _sent_span_ids(path, first)
    assert "exported 40 runs as 320 spans" in capsys.readouterr().out
