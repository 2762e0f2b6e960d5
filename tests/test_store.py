import sqlite3

import numpy as np
import pytest

from retrieval.core.errors import ConfigError
from retrieval.store.base import Filter, Hit, rrf
from retrieval.store.sqlite import fts_query


def test_bm25_finds_the_title_passage(small_store):
    hits = small_store.bm25("passages", "Journal of Mathematical Physics editor", 3)
    assert small_store.passages([hits[0].id])[0].title == "Journal of Mathematical Physics"
    assert hits[0].score >= hits[1].score


def test_knn_ranks_by_cosine(small_store, embedder):
    v = embedder.encode(["Journal of Mathematical Physics"])[0]
    hits = small_store.knn("passages", v, 5)
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)
    assert small_store.passages([hits[0].id])[0].title == "Journal of Mathematical Physics"
    sims = small_store.similarities("passages", v, [h.id for h in hits])
    assert np.allclose(sims, scores, atol=1e-5)


def test_filters_ids_in_not_in_and_any_of(small_store, embedder):
    top = small_store.bm25("passages", "journal physics", 5)
    first = top[0].id
    assert first not in [h.id for h in small_store.bm25("passages", "journal physics", 5,
                                                        Filter.make(ids_not_in=[first]))]
    only = Filter.make(ids_in=[top[2].id])
    assert [h.id for h in small_store.bm25("passages", "journal physics", 5, only)] == [top[2].id]
    v = embedder.encode(["journal physics"])[0]
    assert [h.id for h in small_store.knn("passages", v, 5, only)] == [top[2].id]
    # any_of on the subjects of a passage's triples (GRIEVER's join filter)
    by_subject = Filter.make(subjects=["Journal of Mathematical Physics"])
    hits = small_store.knn("passages", v, 10, by_subject)
    assert hits and all("Journal of Mathematical Physics" in
                        {t.subject for t in small_store.triples_of_passages([h.id])} for h in hits)
    assert small_store.bm25("passages", "journal", 5, Filter.make(subjects=["no such entity"])) == []
    with pytest.raises(ConfigError, match="no keyword field 'colour'"):
        small_store.bm25("passages", "journal", 5, Filter.make(colour=["red"]))


def test_hybrid_is_rrf_of_both(small_store, embedder):
    v = embedder.encode(["journal physics"])[0]
    fused = small_store.hybrid("passages", "journal physics", v, 5)
    expected = rrf([small_store.bm25("passages", "journal physics", 10), small_store.knn("passages", v, 10)], 5)
    assert [h.id for h in fused] == [h.id for h in expected]


def test_rrf_scores():
    fused = rrf([[Hit("a", 9), Hit("b", 8)], [Hit("b", 1), Hit("c", 0.5)]], 3, k_rrf=60)
    assert [h.id for h in fused] == ["b", "a", "c"]
    assert fused[0].score == pytest.approx(1 / 62 + 1 / 61)


@pytest.mark.parametrize("evil", [
    "'; DROP TABLE passages; --", 'journal" OR 1=1 --', "NEAR(journal physics)", "title:journal*", "\"\"\"",
    "AND OR NOT",
])
def test_query_text_never_becomes_sql_or_fts_syntax(small_store, small_kb, evil):
    before = sqlite3.connect(small_kb).execute("SELECT count(*) FROM passages").fetchone()[0]
    small_store.bm25("passages", evil, 5)  # must not raise
    assert sqlite3.connect(small_kb).execute("SELECT count(*) FROM passages").fetchone()[0] == before


def test_fts_query_quotes_every_word_and_drops_stopwords():
    assert fts_query('Who is "the" editor?') == '"editor"'
    assert fts_query("the of") is None


def test_lookups_between_layers(small_store):
    pid = small_store.bm25("passages", "Journal of Mathematical Physics", 1)[0].id
    triples = small_store.triples_of_passages([pid])
    assert any(t.predicate == "published by" for t in triples)
    by_entity = small_store.triples_of_entities(["Journal of Mathematical Physics"])
    assert {t.id for t in triples} & {t.id for t in by_entity}
    ent = small_store.entity_ids(["Journal of Mathematical Physics"])["Journal of Mathematical Physics"]
    events = small_store.events_of_entities([ent])[ent]
    assert small_store.events(events)[0].passage_id == pid
    assert ent in small_store.entities_of_events(events)[events[0]]
    props = small_store.propositions_of_entities([ent])[ent]
    assert all(p.passage_id for p in small_store.propositions(props))
    assert ent in small_store.entities_of_propositions(props)[props[0]]


def test_unknown_index(small_store):
    with pytest.raises(ConfigError, match="unknown index"):
        small_store.bm25("nope", "x", 1)
