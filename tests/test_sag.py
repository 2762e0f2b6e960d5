"""SAG: expansion on a hand-made event–entity table, the stages on the small real KB (with a
scripted test double of the LLM), SQL injection, and broken rerank output."""
import dataclasses
import hashlib
import json
import sqlite3

import pytest
from llm_double import scripted_llm

from retrieval.methods import make_method
from retrieval.methods.sag.expand import expand
from retrieval.methods.sag.prompts import parse_entities, rerank_parser

# Hand-made hyperedges: event → entities.
#   E1: A, B      E2: B, C      E3: C, D      E4: D, E      E5: F (isolated)
TABLE = {1: [10, 11], 2: [11, 12], 3: [12, 13], 4: [13, 14], 5: [15]}


def _joins():
    by_entity: dict[int, list[int]] = {}
    for ev, ents in TABLE.items():
        for e in ents:
            by_entity.setdefault(e, []).append(ev)
    return (lambda evs: {ev: TABLE[ev] for ev in evs if ev in TABLE},
            lambda ents: {e: by_entity[e] for e in ents if e in by_entity})


def test_expansion_reaches_the_stated_events_hop_by_hop():
    ents_of, evs_of = _joins()
    hops = expand([1], [10], ents_of, evs_of, hops=3, budget=50, rank_entities=lambda ids: ids)
    # hop 1: frontier {B} (A was a seed entity) → E2; hop 2: {C} → E3; hop 3: {D} → E4
    assert [(h.frontier, h.new_events) for h in hops] == [([11], [2]), ([12], [3]), ([13], [4])]
    assert hops[0].via == {2: [11]}
    # H = 1 stops after the first hop; E5 is never reached (no shared entity)
    one = expand([1], [10], ents_of, evs_of, hops=1, budget=50, rank_entities=lambda ids: ids)
    assert [h.new_events for h in one] == [[2]]


def test_expansion_budget_prunes_the_frontier_and_never_revisits():
    ents_of, evs_of = _joins()
    # seeds E2, E3 with no seed entities: frontier {B, C, D}; budget 1 keeps the best-ranked (D)
    hops = expand([2, 3], [], ents_of, evs_of, hops=2, budget=1, rank_entities=lambda ids: sorted(ids, reverse=True))
    assert hops[0].frontier == [13] and sorted(hops[0].pruned) == [11, 12]
    assert hops[0].new_events == [4]
    # hop 2 explores only E (D was used, B and C were pruned, not deferred): no events left
    assert hops[1].frontier == [14] and hops[1].new_events == []


def test_rerank_parser_on_broken_model_output():
    parse = rerank_parser(n_candidates=4, k_event=2)
    assert parse({"selected": [3, "1", 3, 9, "[2]"]}) == [3, 1]
    assert parse({"selected": []}) == []
    assert parse([2]) == [2]
    for bad in ({"selected": [0, 7, "x"]}, {"chosen": [1]}, "3, 1"):
        with pytest.raises(ValueError):
            parse(bad)
    assert parse_entities({"entities": [{"name": "Oslo", "type": "city"}, "Norway", {"name": " "}]}) == [
        ("Oslo", "label"), ("Norway", "label")]


Q = "Who was the first president of the association which published Journal of Psychotherapy Integration?"


def run_sag(ctx, script, **cfg):
    llm, backend = scripted_llm(script)
    return make_method("sag", dataclasses.replace(ctx, llm=llm), **cfg).run(Q, k=5), backend


def test_sag_stages_form_the_auditable_chain(ctx):
    ents = json.dumps({"entities": [{"name": "Journal of Psychotherapy Integration", "type": "work"}]})
    run, backend = run_sag(ctx, {"query entities": [ents], "rerank": [json.dumps({"selected": [2, 1]})]})
    assert run.status == "ok", run.error
    names = [s.name for s in run.stages]
    assert names == ["profile", "query_entities", "entity_expansion", "seed_events", "expansion", "coarse_rank",
                     "rerank",
                     "direct_chunks", "merge", "ranking"]
    st = {s.name: s for s in run.stages}
    match = st["entity_expansion"].payload["expanded"][0]["matches"]
    assert any(m["entity"] == "Journal of Psychotherapy Integration" and m["similarity"] == 1.0 for m in match)
    assert st["seed_events"].payload["path_a_entity_join"] >= 1
    # every SQL statement is listed with its row count and time; the question is never in the SQL text
    for name in ("entity_expansion", "seed_events", "expansion"):
        sql = st[name].payload["sql"]
        assert sql and all({"statement", "params", "rows", "ms"} <= set(s) for s in sql)
        assert all(Q not in s["statement"] for s in sql)
    hop = st["expansion"].payload["hops"][0]
    assert hop["frontier"] and hop["new_events"] > 0
    g = st["expansion"].subgraph
    assert {n.type for n in g.nodes} == {"event", "entity"} and any(n.attrs.get("frontier") for n in g.nodes)
    # the joint rerank saw every candidate at once, and its picks lead the output
    assert backend.purposes() == ["query entities", "rerank"]
    prompt = backend.requests[1][1][-1]["content"]
    assert f"[{st['coarse_rank'].payload['kept']}]" in prompt
    picked = st["rerank"].payload["selected"]
    assert len(picked) == 2
    assert run.ranked[0].passage_id == picked[0]["passage_id"]
    merge = st["merge"].payload
    # eq. 4: the 2 selected events' chunks ∪ exactly K_direct = 5 direct chunks, de-duplicated
    assert merge["from_events"] >= 1 and merge["c_direct"] == 5
    assert len(merge["chunks"]) == merge["from_events"] + merge["from_direct"] <= 2 + 5


def test_sag_h0_and_no_rerank_variants(ctx):
    run = make_method("sag_h0", ctx).run(Q, k=5)
    exp = next(s for s in run.stages if s.name == "expansion")
    assert exp.status == "skipped" and "H = 0" in exp.message
    run = make_method("sag_no_rerank", ctx).run(Q, k=5)
    assert next(s for s in run.stages if s.name == "rerank").payload["reranker"] == "none"


def test_without_an_llm_sag_skips_the_rerank_and_says_so(ctx):
    run = make_method("sag", ctx).run(Q, k=5)
    assert run.status == "ok", run.error
    assert run.stages[0].name == "fallback" and "rerank is skipped" in run.stages[0].message
    q_ents = next(s for s in run.stages if s.name == "query_entities").payload
    assert q_ents["how"].startswith("spaCy")
    gold = set(ctx.store.questions()[0].gold_passage_ids)
    assert gold & set(run.ranked_ids())


def test_empty_link_says_which_link_failed(ctx):
    llm, _ = scripted_llm({"query entities": [json.dumps({"entities": []})], "rerank": [json.dumps({"selected": []})]})
    run = make_method("sag", dataclasses.replace(ctx, llm=llm), event_threshold=0.99).run("zzqx vvprt", k=5)
    st = {s.name: s for s in run.stages}
    assert st["query_entities"].status == "empty" and "no entity" in st["query_entities"].message
    assert st["seed_events"].status == "empty" and "entity join returned no event" in st["seed_events"].message
    assert run.status == "ok"


@pytest.mark.parametrize("evil", [
    "x'); DROP TABLE events; --",
    "Robert'); DELETE FROM event_entities WHERE 1=1; --",
    '" OR 1=1 --',
])
def test_sql_injection_in_the_question_changes_nothing(small_kb, ctx, evil):
    before = hashlib.sha256(small_kb.read_bytes()).hexdigest()
    ents = json.dumps({"entities": [{"name": evil, "type": "label"}]})
    llm, _ = scripted_llm({"query entities": [ents], "rerank": [json.dumps({"selected": [1]})]})
    run = make_method("sag", dataclasses.replace(ctx, llm=llm)).run(evil + " Journal of Psychotherapy Integration", k=5)
    assert run.status == "ok", run.error
    assert hashlib.sha256(small_kb.read_bytes()).hexdigest() == before
    con = sqlite3.connect(small_kb)
    assert con.execute("SELECT count(*) FROM events").fetchone()[0] == 80
    assert con.execute("SELECT count(*) FROM event_entities").fetchone()[0] > 0
    con.close()
    # the text reached SQL only as a bound parameter
    sql = next(s for s in run.stages if s.name == "entity_expansion").payload["sql"]
    from retrieval.kb.normalize import normalize_entity
    assert any(normalize_entity(evil) in s["params"] for s in sql)
    assert all(evil not in s["statement"] for s in sql)
