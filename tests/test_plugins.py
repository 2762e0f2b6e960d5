"""A user's own retriever beside the papers': discovered from a file, a module or an entry point,
or served over HTTP on loopback; traced, stored, benched and compared like HopTrace's own; runs
made elsewhere imported from TREC files. Everything runs on the small real KB."""
from __future__ import annotations

import http.server
import json
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from retrieval.core.errors import InputError
from retrieval.methods import make_method, origin
from retrieval.methods.plugins import load_endpoint, load_plugin, problems
from retrieval.methods.plugins.loader import load_entry_points

ROOT = Path(__file__).resolve().parent.parent
Q = "Who was the first president of the association which published Journal of Psychotherapy Integration?"


def _write(tmp_path, name: str, code: str) -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(code))
    return str(path)


def _problem(spec: str) -> str:
    return next(p.reason for p in problems() if p.plugin == spec)


def test_a_function_in_a_file_is_a_method_its_hits_mapped_by_id_title_and_text(tmp_path, ctx):
    p = ctx.store.passages(ctx.store.all_passage_ids()[:3])
    spec = _write(tmp_path, "t_func.py", f'''
        """Three hits, each named another way, and two that are no passage of the KB."""
        NAME = "t_func"

        def retrieve(question, k, kb):
            return [{{"id": {p[0].id!r}, "score": 3}}, {{"title": {p[1].title!r}, "score": 2}},
                    {{"text": {("  " + p[2].text.upper() + " ")!r}}}, {{"title": "Nowhere at all"}},
                    {p[0].id!r}, "chunk-not-here"]
    ''')
    assert load_plugin(spec) == ["t_func"] and origin("t_func") == "file t_func.py"
    assert load_plugin(spec) == []                                   # loading again changes nothing
    run = make_method("t_func", ctx).run(Q, k=10)
    assert run.status == "ok" and [s.name for s in run.stages] == ["call", "map", "ranking"]
    assert run.ranked_ids() == [p[0].id, p[1].id, p[2].id]
    m = next(s for s in run.stages if s.name == "map").payload
    assert m["mapped_by"] == {"id": 1, "title": 1, "text": 1} and m["not_in_kb"] == 2
    assert "2 of 6 hits are not in this KB" in m["problems"]
    assert "1 hit repeats a passage ranked higher (kept once)" in m["problems"]
    assert [h["hit"] for h in m["not_in_kb_first"]] == [{"title": "Nowhere at all"}, {"id": "chunk-not-here"}]
    # more than k: told, and the first k count
    two = make_method("t_func", ctx).run(Q, k=2)
    assert len(two.ranked) == 2 and "6 hits returned for k = 2; the first 2 count" in \
        next(s for s in two.stages if s.name == "map").payload["problems"]


def test_a_method_subclass_in_a_file_keeps_its_own_stages(tmp_path, ctx):
    spec = _write(tmp_path, "t_cls.py", '''
        from dataclasses import dataclass
        from retrieval.methods import Method
        from retrieval.methods.base import final_stage
        from retrieval.methods.plugins import KBView
        from retrieval.trace.model import RankedPassage

        @dataclass
        class Cfg:
            depth: int = 20

        class Twice(Method):
            name = "t_cls"
            title = "BM25 twice"
            Config = Cfg

            def retrieve(self, question, k, tracer):
                kb = KBView(self.ctx)
                with tracer.stage("first", "BM25 on the question") as st:
                    hits = kb.bm25(question, self.config.depth)
                    st.payload = {"hits": len(hits)}
                with tracer.stage("second", "BM25 on the top title") as st:
                    top = kb.texts([hits[0][0]])[hits[0][0]][0]
                    more = kb.bm25(top, k)
                    st.payload = {"query": top}
                ranked = [RankedPassage(pid, s) for pid, s in dict(hits[:k] + more).items()][:k]
                return final_stage(tracer, ranked, question, "two BM25 passes")
    ''')
    assert load_plugin(spec) == ["t_cls"]
    run = make_method("t_cls", ctx, depth=5).run(Q, k=4)
    assert run.status == "ok" and [s.name for s in run.stages] == ["first", "second", "ranking"]
    assert run.config["depth"] == 5 and len(run.ranked) == 4


def test_an_installed_packages_entry_point_is_discovered(tmp_path, ctx, monkeypatch):
    site = tmp_path / "site"
    (site / "t_ep_pkg").mkdir(parents=True)
    (site / "t_ep_pkg" / "__init__.py").write_text("def search(question, k, kb):\n    return kb.dense(question, k)\n")
    info = site / "t_ep_pkg-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: t-ep-pkg\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[hoptrace.methods]\nt_ep = t_ep_pkg:search\n")
    monkeypatch.syspath_prepend(str(site))
    assert "t_ep" in load_entry_points()
    assert origin("t_ep") == "entry point t_ep (t_ep_pkg:search)"
    dense = make_method("dense", ctx).run(Q, k=5)
    assert make_method("t_ep", ctx).run(Q, k=5).ranked_ids() == dense.ranked_ids()


def test_bad_plugins_are_named_and_everything_else_works(tmp_path, ctx):
    broken = _write(tmp_path, "t_broken.py", "import no_such_module_anywhere\n")
    assert load_plugin(broken) == []
    assert _problem(broken) == "ModuleNotFoundError: No module named 'no_such_module_anywhere'"
    empty = _write(tmp_path, "t_empty.py", "X = 1\n")
    assert load_plugin(empty) == [] and "defines neither retrieve" in _problem(empty)
    clash = _write(tmp_path, "t_clash.py", "NAME = 'griever'\ndef retrieve(q, k, kb):\n    return []\n")
    assert load_plugin(clash) == [] and "method name 'griever' is taken (built-in)" in _problem(clash)
    wrong = _write(tmp_path, "t_wrong.py", "def retrieve(question):\n    return []\n")
    assert load_plugin(wrong) == [] and "should take (question, k, kb)" in _problem(wrong)
    assert make_method("griever", ctx).run(Q, k=5).status == "ok"
    # a method that raises mid-run: a failed run carrying the error, stored like any run
    raising = _write(tmp_path, "t_raises.py", "def retrieve(q, k, kb):\n    raise RuntimeError('index offline')\n")
    load_plugin(raising)
    run = make_method("t_raises", ctx).run(Q, k=5)
    assert run.status == "error" and run.error == "RuntimeError: index offline"
    from traces.storage.store import TraceStore
    traces = TraceStore(tmp_path / "t.sqlite")
    back, _ = traces.load_run(traces.save_run(traces.new_session("small", Q), "small", run))
    assert back.status == "error" and back.error == "RuntimeError: index offline"
    # what it returns is not a list of hits
    bad = _write(tmp_path, "t_badhits.py", "def retrieve(q, k, kb):\n    return [{'score': 1}]\n")
    load_plugin(bad)
    run = make_method("t_badhits", ctx).run(Q, k=5)
    assert run.status == "error" and "hit 1 has none of 'id', 'title', 'text'" in run.error


class _Service:
    """A retriever service on loopback, answering as `reply(body)` says."""

    def __init__(self, reply):
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                code, out, delay = reply(body)
                time.sleep(delay)
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.end_headers()
                    self.wfile.write(out if isinstance(out, bytes) else json.dumps(out).encode())
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/search"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def test_an_http_method_good_slow_failing_malformed_and_outside_the_kb(ctx):
    p = ctx.store.passages(ctx.store.all_passage_ids()[:2])
    mode = {"now": "good"}

    def reply(body):
        if mode["now"] == "good":
            return 200, {"hits": [{"title": p[0].title, "score": 2.0}, {"id": p[1].id, "score": 1.0},
                                  {"title": "A page this KB lacks", "text": "elsewhere", "score": 0.5}],
                         "stages": [{"name": "rerank", "ms": 12.5, "payload": {"model": "mine", "k": body["k"]}}]}, 0
        if mode["now"] == "slow":
            return 200, [], 2.0
        if mode["now"] == "500":
            return 500, {"error": "boom"}, 0
        return 200, b"<html>not json</html>", 0

    svc = _Service(reply)
    try:
        assert load_endpoint(f"t_svc={svc.url}") == ["t_svc"] and origin("t_svc") == "HTTP endpoint"
        run = make_method("t_svc", ctx).run(Q, k=5)
        assert run.status == "ok" and [s.name for s in run.stages] == ["request", "remote.rerank", "map", "ranking"]
        remote = next(s for s in run.stages if s.name == "remote.rerank")
        assert remote.latency_ms == 12.5 and remote.payload["k"] == 5
        m = next(s for s in run.stages if s.name == "map")
        assert run.ranked_ids() == [p[0].id, p[1].id] and m.message.startswith("1 of 3 hits are not in this KB")
        assert svc.url not in json.dumps([s.payload for s in run.stages])   # the operator's URL stays theirs
        mode["now"] = "slow"
        run = make_method("t_svc", ctx, timeout_s=0.5).run(Q, k=5)
        assert run.status == "error" and run.error == "the endpoint did not answer within 0.5 s"
        mode["now"] = "500"
        run = make_method("t_svc", ctx).run(Q, k=5)
        assert run.status == "error" and run.error == "the endpoint answered HTTP 500 (Internal Server Error)"
        mode["now"] = "junk"
        run = make_method("t_svc", ctx).run(Q, k=5)
        assert run.status == "error" and run.error.startswith("the endpoint's reply is not JSON")
    finally:
        svc.close()
    assert load_endpoint("t_bad=ftp://x") == [] and "should start with http://" in _problem("t_bad")


def test_the_examples_bm25s_plugin_and_http_service(tmp_path, ctx):
    import subprocess

    from retrieval.bench.runner import run_bench
    from retrieval.core.records import Passage

    assert load_plugin(str(ROOT / "examples" / "bm25s_plugin.py")) == ["bm25s"]
    run = make_method("bm25s", ctx).run(Q, k=5)
    assert run.status == "ok" and [s.name for s in run.stages] == ["index", "search", "ranking"]
    assert len(run.ranked) == 5
    # The service over the KB's passages plus one it does not hold.
    ids = ctx.store.all_passage_ids()
    corpus = [{"title": p.title, "text": p.text} for p in ctx.store.passages(ids)]
    extra = Passage.make("Psychotherapy Integration Society",
                         "A society that published the Journal of Psychotherapy Integration, first president P. W.")
    corpus.append({"title": extra.title, "text": extra.text})
    (tmp_path / "c.json").write_text(json.dumps(corpus))
    from appbench.page import free_port
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(ROOT / "examples" / "http_retriever.py"), str(tmp_path / "c.json"),
                             str(port)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        url = f"http://127.0.0.1:{port}/search"
        for _ in range(100):
            try:
                import urllib.request
                urllib.request.urlopen(urllib.request.Request(url, b'{"question": "x", "k": 1}'), timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        load_endpoint(f"t_example_svc={url}")
        res = run_bench(ctx, "small", ctx.store.questions(), ["t_example_svc", "bm25s"], ks=(5,), progress=False)
        assert set(res.methods) == {"t_example_svc", "bm25s"} and res.methods["t_example_svc"]["recall@5"] > 0
        run = make_method("t_example_svc", ctx).run(Q, k=10)
        m = next(s for s in run.stages if s.name == "map").payload
        assert m["not_in_kb"] == 1 and m["not_in_kb_first"][0]["hit"]["title"] == extra.title
        assert {s.name for s in run.stages} >= {"remote.tokenize", "remote.bm25s"}
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_a_trec_run_round_trips_and_bad_lines_are_named(tmp_path, ctx):
    from retrieval.bench.runner import run_bench
    from traces.stats.compare import compare
    from traces.storage.experiments import Experiments, kb_fingerprint, question_record
    from traces.storage.runfiles import export_run, import_run, read_run
    from traces.storage.store import TraceStore

    exps = Experiments(TraceStore(tmp_path / "t.sqlite"))
    questions = ctx.store.questions()
    spec = {"methods": {"griever": {}, "bm25": {}}, "ks": [5, 10], "questions": [question_record(q) for q in questions]}
    exp = exps.start("bench", "small", kb_fingerprint(ctx.store), "none", spec)
    run_bench(ctx, "small", questions, ["griever", "bm25"], ks=(5, 10), progress=False, sink=exps.sink(exp))
    for k in (5, 10):
        path = tmp_path / f"griever{k}.run"
        path.write_text(export_run(exps, exp, "griever", k=k))
        assert import_run(exps, exp, read_run(path), f"griever_copy{k}", ctx.store) == len(questions)
        c = compare(exps, exp, f"recall@{k}", methods=["griever", f"griever_copy{k}"])
        assert [r["scores"]["griever"] for r in c.rows] == [r["scores"][f"griever_copy{k}"] for r in c.rows]
        assert c.pairs[0].ties == len(questions)
    assert "griever_copy5" in Experiments(exps.traces).get(exp.id).methods
    # bad lines, each named with its line; nothing stored
    qid, pid = questions[0].id, ctx.store.all_passage_ids()[0]
    bad = {"short.run": (f"{qid} Q0 {pid} 1 2.0\n", "short.run line 1: a TREC run line has 6 fields"),
           "rank.run": (f"{qid} Q0 {pid} one 2.0 t\n", "rank.run line 1: rank should be a number"),
           "q.run": (f"{qid} Q0 {pid} 1 2.0 t\nnope Q0 {pid} 1 1.0 t\n",
                     "q.run line 2: question id 'nope' is not in experiment"),
           "doc.run": (f"{qid} Q0 {pid} 1 2.0 t\n{qid} Q0 chunk-x 2 1.0 t\n",
                       "doc.run line 2: passage id 'chunk-x' is not in KB small")}
    before = len(exps.entries(exp))
    for name, (text, problem) in bad.items():
        (tmp_path / name).write_text(text)
        with pytest.raises(InputError, match=problem.replace("(", r"\(")):
            import_run(exps, exp, read_run(tmp_path / name), "bad_" + name, ctx.store)
    assert len(exps.entries(exp)) == before
    with pytest.raises(InputError, match="already holds a method named 'griever'"):
        import_run(exps, exp, read_run(tmp_path / "griever5.run"), "griever", ctx.store)


def test_the_notebook_api_takes_plugins_and_names_the_ones_that_fail(tmp_path, small_kb):
    from retrieval.api import HopTrace

    good = _write(tmp_path, "t_api.py", "def retrieve(question, k, kb):\n    return kb.bm25(question, k)\n")
    bad = _write(tmp_path, "t_api_bad.py", "raise RuntimeError('no index')\n")
    with pytest.warns(UserWarning, match="t_api_bad.py not loaded: RuntimeError: no index"):
        h = HopTrace(str(small_kb), llm="none", plugins=[good, bad])
    run = h.ask("t_api", Q, k=3)
    assert run.status == "ok" and run.ranked_ids() == h.ask("bm25", Q, k=3).ranked_ids()
    assert "t_api" in h.methods()


def test_a_bad_numeric_environment_variable_is_named_where_it_is_read(monkeypatch):
    """Read when used, not at import: a bad value names the variable and the value."""
    import ui.ask
    from retrieval.core.envvars import whole_number
    from retrieval.core.errors import ConfigError
    from retrieval.methods.plugins import http

    for var in ("HOPTRACE_METHOD_TIMEOUT_S", "HOPTRACE_PLUGIN_TIMEOUT_S"):
        monkeypatch.setenv(var, "soon")
    with pytest.raises(ConfigError, match="HOPTRACE_METHOD_TIMEOUT_S must be a number, got 'soon'"):
        http.EndpointConfig()
    with pytest.raises(ConfigError, match="HOPTRACE_PLUGIN_TIMEOUT_S must be a number, got 'soon'"):
        ui.ask.plugin_limit_s()
    monkeypatch.setenv("HOPTRACE_METHOD_TIMEOUT_S", "12")
    monkeypatch.setenv("HOPTRACE_PLUGIN_TIMEOUT_S", "-1")
    assert http.EndpointConfig().timeout_s == 12.0
    with pytest.raises(ConfigError, match="HOPTRACE_PLUGIN_TIMEOUT_S must be positive, got '-1'"):
        ui.ask.plugin_limit_s()
    monkeypatch.setenv("GRADIO_SERVER_PORT", "70000")
    with pytest.raises(ConfigError, match="GRADIO_SERVER_PORT must be from 1 to 65535, got '70000'"):
        whole_number("GRADIO_SERVER_PORT", 7860, 1, 65535)
    monkeypatch.delenv("GRADIO_SERVER_PORT")
    assert whole_number("GRADIO_SERVER_PORT", 7860, 1, 65535) == 7860
