"""The Elasticsearch backend's request bodies, mappings and spec parsing (no server needed)."""
import numpy as np
import pytest

from retrieval.core.errors import ConfigError
from retrieval.store.base import FIELDS, INDICES, Filter
from retrieval.store.elastic import parse_spec
from retrieval.store.elastic import queries as Q
from retrieval.store.elastic.mappings import ALL, index_mapping, index_name, mapping_of
from retrieval.store.elastic.sync import KBDocuments


def test_spec_parsing_names_the_problem():
    assert parse_spec("es+http://localhost:9200/demo") == ("http://localhost:9200", "demo")
    assert parse_spec("es+https://es.example:443") == ("https://es.example:443", "hoptrace")
    for bad, msg in (("es+ftp://x/demo", "bad Elasticsearch URL"), ("es+http://x:9200/Demo", "lower-case"),
                     ("http://x:9200/demo", "not an Elasticsearch store spec")):
        with pytest.raises(ConfigError, match=msg):
            parse_spec(bad)


def test_mappings_follow_griever_a1():
    m = index_mapping("passages", 384)["properties"]
    assert m["vector"] == {"type": "dense_vector", "dims": 384, "index": True, "similarity": "cosine",
                           "index_options": {"type": "hnsw", "m": 16, "ef_construction": 100}}
    assert m["title"]["type"] == m["text"]["type"] == "text"
    for index in INDICES:  # every field a Filter may name is a keyword field
        props = index_mapping(index, 8)["properties"]
        assert all(props[f]["type"] == "keyword" for f in FIELDS[index]), index
    pt = index_mapping("partial_triples", 8)["properties"]
    assert pt["subject"]["type"] == pt["objects"]["type"] == "keyword" and pt["content"]["type"] == "text"
    assert mapping_of("same_as", 8)["properties"]["alias"]["type"] == "keyword"
    assert index_name("Demo", "passages") == "demo-passages" and "meta" in ALL


def test_filter_becomes_bool_filter_clauses():
    flt = Filter.make(ids_in=["b", "a"], ids_not_in=["c"], triple_entities=["X", "Y"])
    assert Q.filter_bool("passages", flt) == {
        "filter": [{"terms": {"id": ["a", "b"]}}, {"terms": {"triple_entities": ["X", "Y"]}}],
        "must_not": [{"terms": {"id": ["c"]}}]}
    assert Q.filter_bool("events", Filter.make(ids_in=[3, 1])) == {"filter": [{"terms": {"rowid": [1, 3]}}]}
    with pytest.raises(ValueError, match="no keyword field"):
        Q.filter_bool("events", Filter.make(subjects=["x"]))


def test_bm25_body_searches_the_text_fields_with_filters():
    body = Q.bm25_body("passages", "who wrote it", 7, Filter.make(entities=["E"]))
    assert body["size"] == 7 and body["_source"] is False
    mm = body["query"]["bool"]["must"][0]["multi_match"]
    assert mm == {"query": "who wrote it", "fields": ["title", "text"], "type": "most_fields", "operator": "or"}
    assert body["query"]["bool"]["filter"] == [{"terms": {"entities": ["E"]}}]
    with pytest.raises(ValueError, match="no full-text field"):
        Q.bm25_body("predicates", "x", 3)


def test_knn_puts_the_filter_inside_knn():
    v = np.array([0.6, 0.8], dtype=np.float32)
    body = Q.knn_body("propositions", v, 5, Filter.make(entities=["Paris"], ids_not_in=[9]))
    knn = body["knn"]
    assert knn["field"] == "vector" and knn["k"] == 5 and knn["num_candidates"] == 100
    assert knn["query_vector"] == pytest.approx([0.6, 0.8])
    assert knn["filter"] == {"bool": {"filter": [{"terms": {"entities": ["Paris"]}}],
                                      "must_not": [{"terms": {"rowid": [9]}}]}}
    assert "query" not in body
    assert Q.knn_body("passages", v, 2000)["knn"]["num_candidates"] == 10_000


def test_composed_dense_step_is_knn_restricted_to_the_bm25_candidates():
    body = Q.restricted_knn_body("passages", np.ones(2, dtype=np.float32), ["p2", "p1", "p2"])
    assert body["knn"]["k"] == 2 and body["size"] == 2
    assert body["knn"]["filter"] == {"bool": {"filter": [{"terms": {"id": ["p1", "p2"]}}]}}
    assert Q.cosine_from_score(1.0) == 1.0 and Q.cosine_from_score(0.5) == 0.0


def test_joins_are_terms_queries():
    body = Q.terms_body("entity_ids", [5, 2], 100, source=["entity_ids"])
    assert body["query"] == {"bool": {"filter": [{"terms": {"entity_ids": [2, 5]}}]}}
    assert body["sort"] == [{"rowid": "asc"}] and body["_source"] == ["entity_ids"]
    either = Q.either_terms_body(("subject", "object"), ["A"], 10)["query"]["bool"]
    assert either["should"] == [{"terms": {"subject": ["A"]}}, {"terms": {"object": ["A"]}}]
    keyed = Q.partial_key_body([("A", "born in", False)])["query"]["bool"]["should"][0]["bool"]["filter"]
    assert keyed == [{"term": {"subject": "A"}}, {"term": {"predicate": "born in"}}, {"term": {"is_inverse": False}}]


def test_documents_from_a_real_kb_fit_the_mappings(small_kb):
    """Every document the push would send uses only mapped fields (the mappings are strict)."""
    from retrieval.kb import db

    con = db.connect(small_kb, readonly=True)
    try:
        docs = KBDocuments(con, 384, {})
        seen = {}
        for index, stream in docs.streams():
            items = list(stream)
            seen[index] = len(items)
            props = set(mapping_of(index, 384)["properties"])
            for _id, src in items[:50]:
                assert set(src) <= props, (index, set(src) - props)
            if index not in ("meta",):
                assert all(len(src["vector"]) == 384 for _, src in items[:5] if "vector" in props)
        assert seen["passages"] == 80 and seen["events"] == 80
        assert docs.upto["passages"] == 80
        # a second push with nothing new sends nothing but the metadata
        again = KBDocuments(con, 384, docs.upto)
        assert {i: len(list(s)) for i, s in again.streams() if i != "meta"} == {
            i: 0 for i in ("passages", "triples", "partial_triples", "entities", "predicates", "events",
                           "propositions", "same_as")}
    finally:
        con.close()


def test_an_unreachable_cluster_is_a_clear_error(capsys):
    from retrieval.cli import main

    # port 9 (discard) has no listener here: a real connection refusal, not a stand-in
    assert main(["ask", "--kb", "es+http://127.0.0.1:9/demo", "--method", "bm25", "Who founded it?"]) == 2
    assert "cannot reach Elasticsearch at http://127.0.0.1:9" in capsys.readouterr().err


class _PagedES:
    """A scripted double of an Elasticsearch client: each index's documents in one page, and
    every request body it was sent."""

    def __init__(self, docs: dict[str, list[dict]]):
        from retrieval.kb.schema import SCHEMA_VERSION

        self.meta = {"schema_version": SCHEMA_VERSION, "embed_model": "m", "embed_dim": 4}
        self.docs, self.bodies = docs, []

    def search(self, index: str, **body):
        name = index.split("-", 2)[-1]
        if name == "meta":
            return {"hits": {"hits": [{"_source": {"key": k, "value": {"v": v}}} for k, v in self.meta.items()]}}
        self.bodies.append((name, body))
        return {"hits": {"hits": self.docs.get(name, [])}}


def test_graph_rows_page_through_every_triple_and_same_as_pair():
    from retrieval.store.elastic.store import PAGE, ElasticStore

    es = _PagedES({"passages": [{"_id": "p1", "sort": [1]}, {"_id": "p2", "sort": [2]}],
                   "triples": [{"_source": {"subject": "A", "predicate": "r", "object": "B", "passage_ids": ["p1"],
                                            "rowid": 1}, "sort": [1]}],
                   "same_as": [{"_source": {"entity": "B", "alias": "Bee", "similarity": 0.9}, "sort": ["B", "Bee"]}]})
    rows = ElasticStore("es+http://localhost:9200/demo", client=es).graph_rows()
    assert rows.passage_ids == ["p1", "p2"] and rows.triples == [("A", "B", "p1")]
    assert rows.same_as == [("B", "Bee", 0.9)]
    # Whole indices, paged by search_after on a sort: no terms list over the KB's names.
    for name, body in es.bodies:
        assert body["query"] == {"match_all": {}} and body["sort"] and body["size"] == PAGE, (name, body)
