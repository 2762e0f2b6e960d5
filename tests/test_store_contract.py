"""The store contract: the same assertions against every SearchStore backend.

SQLite always runs (the small real KB). Elasticsearch runs when HOPTRACE_ES_URL points at a
cluster (`docker compose -f deploy/elasticsearch/compose.yaml up --exit-code-from contract`
starts one and runs this file); the small KB is pushed under a throwaway prefix first.
"""
import os
import uuid

import numpy as np
import pytest

from retrieval.store.base import Filter

ES_URL = os.environ.get("HOPTRACE_ES_URL")


@pytest.fixture(scope="module", params=["sqlite", "elasticsearch"])
def store(request, small_kb):
    if request.param == "sqlite":
        from retrieval.store.sqlite import SQLiteStore
        yield SQLiteStore(small_kb)
        return
    if not ES_URL:
        pytest.skip("Elasticsearch half: HOPTRACE_ES_URL is not set (no Elasticsearch server can run on the "
                    "development machines; deploy/elasticsearch/compose.yaml runs it)")
    from retrieval.store.elastic import ElasticStore, push_kb
    from retrieval.store.elastic.mappings import ALL, index_name

    prefix = f"hoptrace-contract-{uuid.uuid4().hex[:8]}"
    spec = f"es+{ES_URL.rstrip('/')}/{prefix}"
    push_kb(small_kb, spec, progress=False)
    st = ElasticStore(spec)
    yield st
    st.es.indices.delete(index=",".join(index_name(prefix, i) for i in ALL), ignore_unavailable=True)
    st.close()


Q = "Journal of Psychotherapy Integration published by"


def test_bm25_ranks_best_first_and_respects_k_and_filters(store):
    hits = store.bm25("passages", Q, 5)
    assert 1 <= len(hits) <= 5
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    top = hits[0].id
    assert "Psychotherapy" in store.passages([top])[0].title + store.passages([top])[0].text
    only = store.bm25("passages", Q, 5, Filter.make(ids_in=[hits[-1].id]))
    assert [h.id for h in only] == [hits[-1].id]
    without = store.bm25("passages", Q, 5, Filter.make(ids_not_in=[top]))
    assert top not in [h.id for h in without]
    assert store.bm25("passages", "", 5) == [] and store.bm25("passages", Q, 0) == []


def test_keyword_filter_on_triple_entities(store):
    t = store.triples_of_passages([store.bm25("passages", Q, 1)[0].id])[0]
    hits = store.bm25("passages", Q, 10, Filter.make(triple_entities=[t.subject]))
    assert hits and all(any(t.subject in (x.subject, x.object) for x in store.triples_of_passages([h.id]))
                        for h in hits)


def test_knn_finds_an_item_by_its_own_vector(store):
    pid = store.bm25("passages", Q, 1)[0].id
    vec = store.vectors("passages", [pid])[0]
    vec = vec / np.linalg.norm(vec)
    hits = store.knn("passages", vec, 3)
    assert hits[0].id == pid and hits[0].score == pytest.approx(1.0, abs=1e-2)
    other = store.knn("passages", vec, 3, Filter.make(ids_not_in=[pid]))
    assert pid not in [h.id for h in other] and len(other) == 3


def test_similarities_are_the_cosines_of_the_listed_items(store):
    ids = [h.id for h in store.bm25("passages", Q, 6)]
    q = store.vectors("passages", ids[:1])[0]
    q = q / np.linalg.norm(q)
    sims = store.similarities("passages", q, ids)
    mat = store.vectors("passages", ids)
    expect = (mat / np.linalg.norm(mat, axis=1, keepdims=True)) @ q
    assert sims.shape == (len(ids),) and np.allclose(sims, expect, atol=2e-2)


def test_passages_keep_the_order_asked_and_skip_unknown_ids(store):
    ids = [h.id for h in store.bm25("passages", Q, 3)]
    got = store.passages(list(reversed(ids)) + ["no-such-passage"])
    assert [p.id for p in got] == list(reversed(ids))


def test_triples_joins_agree(store):
    pid = store.bm25("passages", Q, 1)[0].id
    ts = store.triples_of_passages([pid])
    assert ts and all(t.passage_id == pid for t in ts)
    assert [t.id for t in store.triples([t.id for t in ts])] == [t.id for t in ts]
    name = ts[0].subject
    assert all(name in (t.subject, t.object) for t in store.triples_of_entities([name]))


def test_partial_triples_by_key_and_freqs(store):
    pt = store.partial_triples(list(range(1, 6)))
    assert pt
    keys = [(p.subject, p.predicate, p.is_inverse) for p in pt]
    again = store.partial_triples_by_key(keys)
    assert [p.id for p in again] == [p.id for p in pt]
    freqs = store.partial_triple_freqs(keys)
    assert set(freqs) == set(keys) and all(f >= 1 for f in freqs.values())
    assert all(p.objects and p.passage_ids for p in pt)


def test_entities_lookups_round_trip(store):
    ents = store.entities([1, 2, 3])
    assert [e[0] for e in ents] == [1, 2, 3]
    names = [e[1] for e in ents]
    assert store.entity_ids(names) == {n: i for i, n, _ in ents}
    from retrieval.kb.normalize import normalize_entity
    by_norm = store.entities_by_norm([normalize_entity(names[0])])
    assert 1 in by_norm[normalize_entity(names[0])]


def test_same_as_pairs_and_their_passage_filter(store):
    rows = []
    for name in [e[1] for e in store.entities(list(range(1, 200)))]:
        rows = store.same_as([name])
        if rows:
            break
    assert rows, "the small KB has alias pairs"
    r = rows[0]
    assert r.passage_ids
    assert store.same_as([r.entity], passage_ids=["no-such-passage"]) == []


def test_event_and_proposition_joins_are_inverse(store):
    for layer, items, of_entities, entities_of in (
            ("events", store.events, store.events_of_entities, store.entities_of_events),
            ("propositions", store.propositions, store.propositions_of_entities, store.entities_of_propositions)):
        item = items([1])[0]
        assert item.passage_id and item.entities
        ents = entities_of([1])[1]
        back = of_entities(ents)
        assert all(1 in back[e] for e in ents), layer
        assert {n for _, n, _ in store.entities(ents)} == {e.name for e in item.entities}, layer


def test_questions_info_and_recording(store):
    qs = store.questions()
    assert len(qs) == 4 and all(q.gold_passage_ids for q in qs)
    info = store.info()
    assert info.counts["passages"] == 80 and info.embed_dim == 384
    with store.recording() as log:
        store.bm25("events", "psychotherapy journal", 3)
    assert len(log) == 1 and log[0].rows <= 3
