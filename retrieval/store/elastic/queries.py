"""Request bodies the Elasticsearch store sends: pure functions, unit-tested without a server.

- A `Filter` becomes `bool` filter / must_not clauses: ids → `terms` on the id field,
  keyword fields → `terms` (any of the values).
- BM25 is a `multi_match` over the index's text fields (`most_fields`: the fields' scores
  add up, as FTS5's bm25 does over columns).
- kNN is the top-level `knn` section with the filter inside it (ES filtered kNN: the
  filter applies during the HNSW search, so k results come back when k exist).
- The Composed retriever's dense step (GRIEVER §4.2.2) is kNN restricted to the BM25
  candidates' ids, k = their number, so every candidate gets its cosine.
ES reports cosine as (1 + cos) / 2; `cosine_from_score` converts back so scores match
the SQLite store's.
"""
from __future__ import annotations

from typing import Hashable, Iterable, Optional, Sequence

import numpy as np

from ..base import FIELDS, Filter
from .mappings import TEXT_FIELDS

# HNSW candidates per shard: ES's guidance is a multiple of k; 10x, at least 100.
NUM_CANDIDATES_FACTOR = 10
MIN_NUM_CANDIDATES = 100
MAX_NUM_CANDIDATES = 10_000  # ES's limit


def doc_id(index: str, item_id: Hashable) -> str:
    """Documents are keyed by the KB's ids: passage id for passages, rowid elsewhere."""
    return str(item_id)


def id_field(index: str) -> str:
    return "id" if index == "passages" else "rowid"


def filter_bool(index: str, flt: Optional[Filter]) -> dict:
    """The `bool` body (filter + must_not) a Filter stands for; {} for no filter."""
    if flt is None:
        return {}
    must: list[dict] = []
    if flt.ids_in is not None:
        must.append({"terms": {id_field(index): _sorted(flt.ids_in)}})
    for name, values in flt.any_of:
        if name not in FIELDS[index]:
            raise ValueError(f"index {index!r} has no keyword field {name!r}; it has {FIELDS[index]}")
        must.append({"terms": {name: _sorted(values)}})
    out: dict = {}
    if must:
        out["filter"] = must
    if flt.ids_not_in:
        out["must_not"] = [{"terms": {id_field(index): _sorted(flt.ids_not_in)}}]
    return out


def bm25_body(index: str, query: str, k: int, flt: Optional[Filter] = None) -> dict:
    fields = list(TEXT_FIELDS[index])
    if not fields:
        raise ValueError(f"index {index!r} has no full-text field")
    body_bool = {"must": [{"multi_match": {"query": query, "fields": fields, "type": "most_fields",
                                           "operator": "or"}}], **filter_bool(index, flt)}
    return {"size": k, "_source": False, "track_total_hits": False, "query": {"bool": body_bool}}


def knn_section(index: str, vector: np.ndarray, k: int, flt: Optional[Filter] = None) -> dict:
    knn = {"field": "vector", "query_vector": [round(float(x), 6) for x in vector], "k": k,
           "num_candidates": min(MAX_NUM_CANDIDATES, max(MIN_NUM_CANDIDATES, NUM_CANDIDATES_FACTOR * k))}
    fb = filter_bool(index, flt)
    if fb:
        knn["filter"] = {"bool": fb}
    return knn


def knn_body(index: str, vector: np.ndarray, k: int, flt: Optional[Filter] = None) -> dict:
    return {"size": k, "_source": False, "knn": knn_section(index, vector, k, flt)}


def restricted_knn_body(index: str, vector: np.ndarray, ids: Sequence[Hashable]) -> dict:
    """Cosine of every listed item: kNN filtered to exactly those ids (GRIEVER §4.2.2)."""
    k = len(set(ids))
    body = knn_body(index, vector, k, Filter.make(ids_in=ids))
    body["knn"]["num_candidates"] = min(MAX_NUM_CANDIDATES, max(k, MIN_NUM_CANDIDATES))
    return body


def cosine_from_score(score: float) -> float:
    return 2.0 * score - 1.0


def terms_body(field: str, values: Iterable, size: int, source: Optional[list[str]] = None,
               sort: str = "rowid") -> dict:
    """An exact join: every document whose `field` holds one of `values` (SAG's SQL joins)."""
    return {"size": size, "_source": source if source is not None else {"excludes": ["vector"]},
            "sort": [{sort: "asc"}],
            "query": {"bool": {"filter": [{"terms": {field: _sorted(values)}}]}}}


def either_terms_body(fields: Sequence[str], values: Iterable, size: int) -> dict:
    """Documents where any of `fields` holds one of `values` (a triple's subject OR object)."""
    vals = _sorted(values)
    return {"size": size, "sort": [{"rowid": "asc"}], "_source": {"excludes": ["vector"]},
            "query": {"bool": {"should": [{"terms": {f: vals}} for f in fields], "minimum_should_match": 1}}}


def partial_key_body(keys: Sequence[tuple[str, str, bool]]) -> dict:
    """Partial triples by (entity, predicate, is_inverse): one `bool` filter per key."""
    return {"size": len(keys), "query": {"bool": {"minimum_should_match": 1, "should": [
        {"bool": {"filter": [{"term": {"subject": s}}, {"term": {"predicate": p}}, {"term": {"is_inverse": inv}}]}}
        for s, p, inv in keys]}}}


def _sorted(values: Iterable) -> list:
    vals = list(dict.fromkeys(values))
    try:
        return sorted(vals)
    except TypeError:
        return sorted(vals, key=str)
