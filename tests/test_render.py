"""The UI renderers escape every untrusted string."""
from retrieval.trace.model import RankedPassage, RunResult, Stage, Subgraph
from ui import render

EVIL = "<img src=x onerror=alert(1)>"


def test_titles_payloads_and_errors_are_escaped():
    st = Stage("bm25", EVIL, payload={"candidates": [{"title": EVIL, "passage_id": "p1"}], "query": EVIL},
               message=EVIL, status="error")
    run = RunResult("m", EVIL, ranked=[RankedPassage("p1", 1.0, EVIL)], stages=[st], status="error", error=EVIL)
    out = render.column_html(EVIL, [st], run, {"p1"}, running=False)
    assert "<img" not in out and "&lt;img src=x onerror=alert(1)&gt;" in out
    assert "ht-gold" in out  # the gold passage is highlighted
    assert "<img" not in render.error_html(EVIL)
    # a live run's running lines travel on their own (render.live_lines), escaped alike
    live = Stage("query_entities", EVIL)
    live.report(llm="writing", purpose=EVIL, tokens_out=3)
    lines = render.live_lines({EVIL: live})
    assert "<img" not in lines and lines.count("&lt;img src=x onerror=alert(1)&gt;") == 3


def test_graph_iframe_is_sandboxed_small_and_fetches_only_from_this_server():
    import html
    import re

    g = Subgraph()
    g.edge(g.node("q", "question", EVIL), g.node("p1", "passage", "</script><script>alert(1)</script>"), "retrieved")
    out = render.graph_iframe(g, {"p1"})
    assert out.startswith("<iframe sandbox='allow-scripts'")
    assert "<script" not in out.split("srcdoc=", 1)[0]
    doc = html.unescape(out.split('srcdoc="', 1)[1])
    assert len(out) < 5_000  # data only: vis-network is not inlined into every update
    urls = re.findall(r"(?:src|href)='([^']+)'", doc)
    # the app's own route, relative (no CDN, no host, no server path)
    assert sorted(urls) == [f"hoptrace-static/{f}" for f in sorted(render.VIS_FILES)], urls
    assert all(render.vis_file(f).exists() for f in render.VIS_FILES)
    assert "vis.Network" in doc
    # the untrusted labels stay data: no tag or script end inside the inline script
    script = doc.split("<div id='g'></div><script>", 1)[1].rsplit("</script>", 1)[0]
    assert "<" not in script and "alert(1)" in script
    assert "<img" not in out


def test_nested_payloads_fold_but_are_never_cut():
    long_tail = "the last words of a long nested value " * 20 + "END-OF-VALUE"
    rows = [{"beam": i, "candidates": [{"add": f"triple {i}.{j}", "raw": 0.5, "note": long_tail}
                                       for j in range(3)]} for i in range(40)]
    st = Stage("beam_search", "Beam search", payload={"steps": rows, "detail": {"a": [EVIL] * 50}})
    out = render.stage_html(st, set())
    assert out.count("END-OF-VALUE") == 40 * 3          # every nested value, whole
    assert "<details class='ht-nested'>" in out          # folded, not truncated
    assert "triple 39.2" in out                           # rows past the first 25 are folded, not dropped
    assert "<img" not in out and out.count("&lt;img") >= 50        # all 50, plus the folded preview


def test_a_reused_encoding_is_named_beside_the_latency():
    enc = Stage("encode", "Encode query", latency_ms=6.4, payload={"reused": {"ms": 6.3, "wall_ms": 0.1,
                                                                                "what": ["query encoding"]}})
    own = Stage("dense_rerank", "Dense scores", latency_ms=0.3)
    run = RunResult("composed", "q?", stages=[enc, own], latency_ms=7.9)
    html = render.column_html("composed", [enc, own], run, set(), running=False)
    assert "7.9 ms (incl. 6.3 ms shared)" in html and "6.4 ms (incl. 6.3 ms shared)" in html
    assert "0.3 ms ·" in html  # a stage that reused nothing reads as before


def test_a_live_hop_map_is_given_the_changed_maps_not_sent_again():
    """Issue 88: a live run's first stage makes the hop map's frame, marked with its session; a later
    stage is only the maps that changed (hidden box → LIVE_MAP_JS → the frame), escaped."""
    import base64
    import json

    def run(method):
        g = Subgraph()
        g.edge(g.node("q", "question", EVIL), g.node("p1", "passage", EVIL), "retrieved")
        return RunResult(method, EVIL, stages=[Stage("retrieve", "Retrieve", subgraph=g)])

    done, running = {"griever": run("griever")}, {"sag": run("sag").stages, "gear": run("gear").stages}
    frame = render.hop_maps(done, {"p1"}, "sag · retrieve", partial=running, question=EVIL, live_id=EVIL)
    assert "data-live=\"&lt;img src=x onerror=alert(1)&gt;\"" in frame
    later = render.live_map(done, {"p1"}, running, {"sag"}, "sag · retrieve", EVIL, 7, question=EVIL)
    assert "<img" not in later and later.count("&lt;img src=x onerror=alert(1)&gt;") == 1   # data-run
    data = json.loads(base64.b64decode(later.split("data-hopmap-live='", 1)[1].split("'", 1)[0]))
    assert [m["method"] for m in data["maps"]] == ["sag"]                  # the changed method's map only
    assert data["order"] == ["griever", "gear", "sag"] and data["method"] == "sag" and data["seq"] == 7
    assert any(n["f"] == EVIL for n in data["maps"][0]["nodes"])          # whole, as data
    assert len(later) * 5 < len(frame)
