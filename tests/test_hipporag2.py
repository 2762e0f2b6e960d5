"""HippoRAG 2 (retrieval/methods/hipporag2/): the graph, Personalized PageRank, the seed rule,
recognition memory (scripted double and the real embedded model), its hop map, and a KB appended
to after its graph was built."""
import dataclasses

import numpy as np
import pytest
from embedded import TEST_MODEL, cached_calls, real_llm
from llm_double import scripted_llm

from retrieval.kb.build import build_kb
from retrieval.kb.extract.rules import RulesExtractor
from retrieval.methods import Context, make_method
from retrieval.methods.hipporag2 import graph as hgraph
from retrieval.methods.hipporag2 import ppr
from retrieval.store.base import GraphRows
from retrieval.store.sqlite import SQLiteStore
from retrieval.trace import hopmap, hopmap_view

EVIL = "<img src=x onerror=alert(1)></script><script>alert(2)</script>"
Q = "Who was the first president of the association which published Journal of Psychotherapy Integration?"


def _chain() -> hgraph.PhraseGraph:
    """Alpha — Beta — Gamma — Delta as triples of passages p1, p2, p3; p4 names nothing; "alpha"
    and "ALPHA" are one phrase; Delta and Gamma are aliases."""
    return hgraph.build(GraphRows(["p1", "p2", "p3", "p4"],
                                  [("Alpha", "Beta", "p1"), ("beta", "Gamma", "p2"), ("Gamma", "Delta", "p3"),
                                   ("ALPHA", "Beta", "p1")],
                                  [("Gamma", "Delta", 0.9), ("Delta", "Gamma", 0.9), ("Alpha", "Nowhere", 0.95)]))


def test_the_graph_has_the_three_kinds_of_edge_with_the_reference_weights():
    g = _chain()
    assert g.phrases == ["Alpha", "Beta", "Gamma", "Delta"] and g.passages == ["p1", "p2", "p3", "p4"]
    assert g.edge_counts == {"relation": 3, "context": 6, "synonym": 1}
    a, b, c, d = range(4)
    p1 = g.passage_index["p1"]
    # Alpha — Beta is stated twice, each stored both ways; a passage edge counts once; a synonym
    # pair both ways: 2 × similarity.
    assert g.adjacency[a, b] == 4.0 and g.adjacency[a, p1] == 1.0 and g.adjacency[c, d] == pytest.approx(2 + 1.8)
    assert g.kind(c, d) == "relation" and g.kind(a, p1) == "context"
    assert list(g.phrase_passages) == [1, 2, 2, 1]
    assert (g.adjacency != g.adjacency.T).nnz == 0


def test_ppr_ranks_passages_by_their_distance_from_the_seed():
    g = _chain()
    reset = np.zeros(g.n_nodes)
    reset[0] = 1.0   # Alpha
    x, parts = ppr.attributed(g, {"alpha": reset}, 0.5)
    mass = {p: x[g.passage_index[p]] for p in g.passages}
    # By hand: p1 touches the seed, p2 is one phrase further, p3 two; p4 is isolated and not a seed.
    assert mass["p1"] > mass["p2"] > mass["p3"] > mass["p4"] == 0.0
    assert x.sum() == pytest.approx(1.0) and parts["alpha"] == pytest.approx(x)
    # It is PageRank: x = (1 − d)·s + d·Pᵀx, with the isolated node's (nil) mass aside.
    deg = np.asarray(g.adjacency.sum(axis=1)).ravel()
    p = np.divide(g.adjacency.toarray(), deg[:, None], out=np.zeros((g.n_nodes, g.n_nodes)), where=deg[:, None] > 0)
    assert x == pytest.approx((1 - 0.5) * reset + 0.5 * p.T @ x)
    path = ppr.strongest_paths(g, 0.5, 0, [g.passage_index["p3"]])[g.passage_index["p3"]]
    assert [g.label(n) for n in path][0] == "Alpha" and [g.label(n) for n in path][-1] == "p3"


def test_the_seeds_follow_the_rule(ctx):
    run = make_method("hipporag2_nofilter", ctx).run(Q, k=5)
    assert run.status == "ok", run.error
    st = {s.name: s for s in run.stages}
    assert st["recognition_memory"].status == "skipped"
    facts = {f["fact"].casefold(): f["score"] for f in st["query_to_triple"].payload["facts"]}
    assert len(facts) == 5 and max(facts.values()) == 1.0   # min-max over every fact
    seeds = st["seeds"].payload
    assert 0 < len(seeds["phrase_seeds"]) <= 5
    for s in seeds["phrase_seeds"]:
        # Each fact's score ÷ the passages the phrase occurs in, averaged over the facts naming it.
        scores = [facts[f] / s["occurs_in_passages"] for f in s["from_facts"]]
        assert s["weight"] == pytest.approx(sum(scores) / len(scores), abs=1e-4)   # scores shown to 4 places
    dense = seeds["passage_seeds_top"]
    assert dense[0]["dense"] == 1.0 and dense[0]["weight"] == pytest.approx(0.05)
    ranked = st["ppr"].payload["ranked"]
    assert [r["passage_id"] for r in ranked] == run.ranked_ids()
    assert all(r["mass_from"] for r in ranked) and any(r.get("strongest_path") for r in ranked)


def test_recognition_memory_keeps_drops_and_falls_back(ctx):
    llm, backend = scripted_llm({"recognition memory": ['{"kept": [2, 1]}', '{"kept": []}']})
    method = make_method("hipporag2", dataclasses.replace(ctx, llm=llm))
    run = method.run(Q, k=5)
    st = {s.name: s for s in run.stages}
    linked = st["query_to_triple"].payload["facts"]
    assert [f["fact"] for f in st["recognition_memory"].payload["kept"]] == [linked[1]["fact"], linked[0]["fact"]]
    assert len(st["recognition_memory"].payload["dropped"]) == 3
    assert "Question: " + Q in backend.requests[0][1][-1]["content"]
    seeded = {f for s in st["seeds"].payload["phrase_seeds"] for f in s["from_facts"]}
    assert seeded <= {linked[0]["fact"].casefold(), linked[1]["fact"].casefold()}
    assert "ppr" in st and "dense_fallback" not in st
    # Nothing kept: dense passage retrieval, as the paper does.
    run = method.run(Q, k=5)
    st = {s.name: s for s in run.stages}
    assert st["recognition_memory"].status == "empty" and "ppr" not in st
    assert run.ranked_ids() == [h.id for h in ctx.store.knn("passages", ctx.embedder.encode_query(Q).vector, 5)]


@pytest.mark.slow
def test_hipporag2_with_the_embedded_model(ctx):
    run = make_method("hipporag2", dataclasses.replace(ctx, llm=real_llm())).run(Q, k=5)
    assert run.status == "ok", run.error
    memory = next(s for s in run.stages if s.name == "recognition_memory")
    assert memory.status in ("ok", "empty") and memory.llm_calls[0].model == TEST_MODEL
    assert memory.llm_calls[0].tokens_in > 0 and not cached_calls(run)
    kept = memory.payload["kept"]
    assert len(kept) + len(memory.payload["dropped"]) == 5 and len(run.ranked) == 5


def test_its_hop_map_draws_seeds_mass_and_paths_and_keeps_hostile_names_as_text(ctx):
    run = make_method("hipporag2_nofilter", ctx).run(Q, k=5)
    gold = run.ranked_ids()[:1]
    ppr_stage = next(s for s in run.stages if s.name == "ppr")
    ppr_stage.subgraph.nodes[0].label = EVIL
    hm = hopmap.build(run, gold)
    assert hm.layers == ["question", "facts (score)", "phrases (% of reset · of PPR mass)", "passages"]
    by_kind = {}
    for n in hm.nodes:
        by_kind.setdefault(n.kind, []).append(n)
    assert any(n.role == "PPR seed" for n in by_kind["entity"])
    assert any(e.kind in ("relation", "context", "synonym") and e.weight for e in hm.edges)
    assert any(n.gold for n in by_kind["passage"])
    doc = hopmap_view.document([hopmap_view.ViewerRun("hipporag2_nofilter", run, tuple(gold))],
                               vis_src="static/vis.js")
    assert any(n["f"] == EVIL for n in hopmap_view.unpacked(doc)["maps"][0]["nodes"])
    frame = hopmap_view.iframe([hopmap_view.ViewerRun("hipporag2_nofilter", run, tuple(gold))],
                               vis_src="static/vis.js")
    assert "<img" not in frame


def test_a_kb_appended_to_after_its_graph_was_built_ranks_the_new_passage(small_corpus, embedder, tmp_path):
    passages, _ = small_corpus
    path = tmp_path / "kb.sqlite"
    build_kb(path, passages[:30], [RulesExtractor(n_process=1)], embedder, progress=False)
    first = SQLiteStore(path)
    before = make_method("hipporag2_nofilter", Context(first, embedder)).run("anything at all", k=3)
    assert before.status == "ok", before.error
    graph, built = hgraph.graph_for(first)
    assert not built and len(graph.passages) == 30
    build_kb(path, passages[:40], [RulesExtractor(n_process=1)], embedder, progress=False)
    new = passages[35]
    after = make_method("hipporag2_nofilter", Context(SQLiteStore(path), embedder)).run(new.title, k=3)
    assert after.stages[0].payload["passage_nodes"] == 40 and "now" in after.stages[0].payload["built"]
    assert new.id in after.ranked_ids()
