"""The UI renderers escape every untrusted string."""
from retrieval.trace import RankedPassage, RunResult, Stage, Subgraph
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


def test_graph_iframe_is_sandboxed_and_self_contained():
    g = Subgraph()
    g.edge(g.node("q", "question", EVIL), g.node("p1", "passage", "</script><script>alert(1)</script>"), "retrieved")
    out = render.graph_iframe(g, {"p1"})
    assert out.startswith("<iframe sandbox='allow-scripts'")
    assert "<script" not in out.split("srcdoc=", 1)[0]
    assert "cdn" not in out.lower() or "cdn_resources" not in out
    assert "vis-network" in out or "vis.Network" in out  # the library is inlined, not fetched
    assert "<img" not in out and "</script><script>alert" not in out
