"""Each method as its paper says (issue 14): one test per corrected behaviour, each on a KB
where the right outcome can be stated, plus `hoptrace reproduce` on a tiny KB."""
import dataclasses
import json
import sqlite3

import pytest
from llm_double import scripted_llm

from retrieval.core.errors import ConfigError
from retrieval.corpus import load_corpus
from retrieval.kb.build import build_kb
from retrieval.kb.extract.openie_import import OpenIEImport
from retrieval.kb.extract.rules import RulesExtractor
from retrieval.methods import Context, make_method
from retrieval.store.sqlite import SQLiteStore

# A hand-built KB: the bridge entity is "Marlowe Press" in the first-hop passage and
# "Marlowe Press Limited" in the second-hop passage; same_as pairs the two names.
PASSAGES = [
    ("Kingsbridge Gazette", "The Kingsbridge Gazette is a weekly newspaper published by Marlowe Press.",
     [["Kingsbridge Gazette", "published by", "Marlowe Press"]]),
    ("Marlowe Press Limited", "Marlowe Press Limited was founded by Edith Varn in 1921 in Leeds.",
     [["Marlowe Press Limited", "founded by", "Edith Varn"]]),
    ("Harbour Times", "The Harbour Times is a daily newspaper printed in Dover by Selwyn Print.",
     [["Harbour Times", "printed by", "Selwyn Print"]]),
    ("Selwyn Print", "Selwyn Print was founded by Tomas Orr, a printer from Kent.",
     [["Selwyn Print", "founded by", "Tomas Orr"]]),
    ("Edith Varn", "Edith Varn was an English publisher and suffragist born in York.",
     [["Edith Varn", "born in", "York"]]),
]
QUESTION = "Who founded the publisher of the Kingsbridge Gazette?"


@pytest.fixture(scope="module")
def alias_ctx(tmp_path_factory, embedder):
    d = tmp_path_factory.mktemp("alias")
    corpus = [{"title": t, "text": x} for t, x, _ in PASSAGES]
    (d / "corpus.json").write_text(json.dumps(corpus))
    (d / "openie.json").write_text(json.dumps({"docs": [
        {"passage": f"{t}\n{x}", "extracted_triples": tr, "extracted_entities": sorted({e for s, _, o in tr
                                                                                         for e in (s, o)})}
        for t, x, tr in PASSAGES]}))
    path = d / "alias.sqlite"
    build_kb(path, load_corpus(d / "corpus.json"), [OpenIEImport(d / "openie.json"),
                                                    RulesExtractor(("events", "propositions"))],
             embedder, name="alias", progress=False, synonym_threshold=0.99)
    con = sqlite3.connect(path)
    with con:  # the alias pair, stated rather than left to the embedding threshold
        for a, b in (("Marlowe Press", "Marlowe Press Limited"), ("Marlowe Press Limited", "Marlowe Press")):
            con.execute("INSERT OR IGNORE INTO same_as(entity, alias, similarity, method) VALUES(?,?,?,?)",
                        (a, b, 0.93, "test"))
    con.close()
    return Context(SQLiteStore(path), embedder)


def _stage(run, name):
    return next(s for s in run.stages if s.name == name)


def _second_hop_ids(run) -> set:
    st = _stage(run, "retrieve_2")
    return {n.id for n in (st.subgraph.nodes if st.subgraph else []) if n.type == "passage"}


def test_griever_reaches_a_bridge_alias_that_only_unretrieved_passages_contain(alias_ctx):
    """§4.2.3: the same_as record is selected by the retrieved passages, then all its aliases
    join the next-hop filter, so "Marlowe Press Limited" (only in an unretrieved passage) is found."""
    founder = next(p.id for p in alias_ctx.store.passages(alias_ctx.store.all_passage_ids())
                   if p.title == "Marlowe Press Limited")
    run = make_method("griever", alias_ctx).run(QUESTION, k=1)
    assert run.status == "ok", run.error
    join = _stage(run, "join_1").payload
    assert "Marlowe Press" in join["E_i"] and "Marlowe Press Limited" in join["E_i"]
    assert join["aliases_only_outside_retrieved"] == ["Marlowe Press Limited"]
    assert founder in _second_hop_ids(run)
    # The earlier behaviour (an alias must itself occur in a retrieved passage) loses the bridge.
    old = make_method("griever", alias_ctx, same_as_match="alias").run(QUESTION, k=1)
    assert "Marlowe Press Limited" not in _stage(old, "join_1").payload["E_i"]
    assert founder not in _second_hop_ids(old)


def test_griever_e_i_is_the_join_side_of_scored_triples_within_e_j(alias_ctx):
    run = make_method("griever", alias_ctx).run(QUESTION, k=1)
    join = _stage(run, "join_1").payload
    assert set(join["E_i"]) - {a["alias"] for a in join["aliases_added"]} <= set(join["E_j"])
    # The query matched "Kingsbridge Gazette", so that triple joins on the publisher, never on itself.
    assert "Kingsbridge Gazette" not in join["E_i"]


def test_sag_k_direct_changes_c_out(ctx):
    """Eq. 4: C_out = event chunks ∪ exactly K_direct direct chunks (Table 7's splits)."""
    q = ctx.store.questions()[0].text
    two = make_method("sag", ctx, k_event=2, k_direct=2).run(q, k=10)
    eight = make_method("sag", ctx, k_event=2, k_direct=8).run(q, k=10)
    m2, m8 = _stage(two, "merge").payload, _stage(eight, "merge").payload
    assert m2["c_direct"] == 2 and m8["c_direct"] == 8
    assert m2["from_direct"] <= 2 < m8["from_direct"]
    assert len(two.ranked) < len(eight.ranked)
    assert set(m8["direct_filled"]) >= set(m2["direct_filled"])


def test_sag_k_event_zero_asks_the_llm_nothing_for_the_rerank(ctx):
    ents = json.dumps({"entities": [{"name": "Journal of Psychotherapy Integration", "type": "work"}]})
    llm, backend = scripted_llm({"query entities": [ents]})
    run = make_method("sag", dataclasses.replace(ctx, llm=llm), k_event=0, k_direct=10).run(
        ctx.store.questions()[0].text, k=10)
    assert run.status == "ok", run.error
    assert backend.purposes() == ["query entities"]
    assert _stage(run, "rerank").status == "skipped"
    assert _stage(run, "merge").payload["from_events"] == 0 and len(run.ranked) == 10


def test_sag_no_rerank_is_named_for_what_it_does(ctx):
    run = make_method("sag_no_rerank", ctx).run(ctx.store.questions()[0].text, k=10)
    assert _stage(run, "rerank").payload["reranker"] == "none"
    with pytest.raises(ConfigError, match="sag_no_rerank"):
        make_method("sag_light", ctx)


def test_sag_trace_names_near_misses_and_pruned_frontier(ctx):
    run = make_method("sag", ctx, frontier_budget=1).run(ctx.store.questions()[0].text, k=10)
    hop = _stage(run, "expansion").payload["hops"][0]
    assert hop["pruned"] == len(hop["pruned_entities"]) and all(isinstance(n, str) for n in hop["pruned_entities"])
    seeds = _stage(run, "seed_events").payload
    assert all(seeds["tau"] - 0.1 <= e["similarity"] < seeds["tau"] for e in seeds["near_misses_below_tau"])
    assert "near_misses" in _stage(run, "entity_expansion").payload["expanded"][0]


def _grasp_script(next_keywords):
    plan = json.dumps({"plan": "p", "sub_questions": ["Who published Journal of Psychotherapy Integration?"]})
    rewrite = json.dumps({"statement": "Journal of Psychotherapy Integration is published by",
                          "keywords": ["Psychotherapy"]})
    again = {"observations": ["not yet"], "action": "QUERY_AGAIN", "answer": "",
             "next_statement": "American Psychological Association publishes the journal"}
    if next_keywords is not None:
        again["next_keywords"] = next_keywords
    done = {"observations": ["APA"], "action": "DONE", "answer": "APA", "next_statement": "", "next_keywords": []}
    return {"plan": [plan], "rewrite": [rewrite], "select entities": [json.dumps({"selected": [1]})] * 2,
            "evaluate": [json.dumps(again), json.dumps(done)], "synthesis": [json.dumps({"answer": "APA"})]}


@pytest.mark.parametrize("given", [["American Psychological Association", "journal"], None])
def test_grasp_query_again_rewrites_the_keywords_too(ctx, given):
    """§3.3: QUERY_AGAIN restarts step ❶ with a new statement and new keywords."""
    llm, _ = scripted_llm(_grasp_script(given))
    run = make_method("grasp", dataclasses.replace(ctx, llm=llm)).run("Who published the journal?", k=5)
    assert run.status == "ok", run.error
    first, second = _stage(run, "sub1_search_1").payload, _stage(run, "sub1_search_2").payload
    assert first["keywords"] == ["Psychotherapy"]
    assert second["keywords"] != first["keywords"]
    assert second["keywords"] == (given or ["American", "Psychological", "Association", "publishes", "journal"])
    vote = _stage(run, "sub1_vote_1").payload["ranked_propositions"]
    assert [r["R"] for r in vote] == list(range(1, len(vote) + 1))
    assert all(r["w"] == pytest.approx(1 / (1 + r["R"]), abs=1e-4) for r in vote)


def test_gear_runs_griever_as_its_base_inside_its_trace(ctx):
    """GRIEVER Table 4: any registered method can be GEAR's base; its stages are in GEAR's trace."""
    run = make_method("naivege", ctx, base="griever").run(ctx.store.questions()[0].text, k=5)
    assert run.status == "ok", run.error
    names = [s.name for s in run.stages]
    assert "base.clause_split" in names and "base.shortlist_1" in names and "base.ranking" in names
    assert names.index("base.ranking") < names.index("base") < names.index("beam_search")
    base = _stage(run, "base").payload
    assert base["retriever"] == "griever" and base["inputs"]["method"] == "griever"
    griever = make_method("griever", ctx).run(ctx.store.questions()[0].text, k=5)
    assert [r["passage_id"] for r in base["ranked"]] == griever.ranked_ids()
    assert make_method("gear_griever", ctx).config.base == "griever"
    with pytest.raises(ConfigError, match="GEAR base"):
        make_method("naivege", ctx, base="gear").run("Who founded it?", k=5)


def test_beam_search_trace_shows_candidates_before_top_b(ctx):
    run = make_method("naivege", ctx).run(ctx.store.questions()[0].text, k=5)
    steps = _stage(run, "beam_search").payload["steps"]
    ext = steps[1]["extensions"]
    grown = [e for e in ext if e["candidates"]]
    assert grown and {"raw", "n", "weight", "weighted", "kept"} <= set(grown[0]["candidates"][0])
    assert [c["n"] for c in grown[0]["candidates"]] == list(range(len(grown[0]["candidates"])))
    kept = sum(c["kept"] for e in ext for c in e["candidates"])
    assert 0 < kept <= len(steps[1]["beams"])
    fused = _stage(run, "rrf").payload["fused"]
    assert all(set(r["ranks"]) == {"beam passages C̃_q", "base C'_q"} for r in fused)


def test_reproduce_prints_both_columns_and_a_verdict_per_claim(ctx):
    from retrieval.bench.paper_tables import GRIEVER_CLAIMS
    from retrieval.bench.reproduce import render, reproduce

    rep = reproduce(ctx, "small", ctx.store.questions(), "griever", progress=False, include_llm=False,
                    dataset="musique")
    text = render(rep)
    # the paper's measure, protocol and profile are said before any figure, and each column names how it was asked
    assert "recall@5 (asked at k=5) ours | paper" in text and "protocol per-k" in text
    assert "measure: recall@k = the share of a question's gold passages" in text and "profile: paper" in text
    assert rep.profile == "paper" and rep.protocol == "per-k"
    ours = next(r for r in rep.rows if r["hoptrace_choice"])
    assert ours["method"].startswith("griever[final_ranking=retrieval+paths") and " [ours]" in text
    assert ours["paper"] == {}   # ours has no paper figure to stand beside
    row = next(r for r in rep.rows if r["label"] == "GRIEVER")
    assert row["method"] == "griever" and not row["hoptrace_choice"]
    assert row["paper"]["recall@5"] == 0.456 and 0 <= row["ours"]["recall@5"] <= 1
    assert f"{row['ours']['recall@5']:.3f} | 0.456" in text
    assert len(rep.claims) == len(GRIEVER_CLAIMS)
    verdicts = [c.verdict for c in rep.claims]
    assert all(v in ("holds", "does not hold", "inconclusive", "not measured") for v in verdicts)
    # the GEAR rows need an LLM and were left out, so their claim is not measured
    assert verdicts[-1] == "not measured"
    assert sum(v != "not measured" for v in verdicts) == len(verdicts) - 1
