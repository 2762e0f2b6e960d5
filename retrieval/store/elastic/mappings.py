"""Elasticsearch index mappings, one index per store index (GRIEVER App. A.1 layout).

Text fields use the `english` analyzer for BM25 (as the papers' ES setups do); every
field a `Filter` may name is a `keyword`; the embedding is a `dense_vector` with cosine
similarity indexed as HNSW. Link fields (entity ids, passage ids, complements) make the
joins of SAG and GRASP `terms` queries. A `meta` index holds the KB's metadata and
questions, so a cluster alone can serve a KB.
"""
from __future__ import annotations

from ..base import FIELDS, INDICES

KW = {"type": "keyword"}
TEXT = {"type": "text", "analyzer": "english"}
INT = {"type": "integer"}
LONG = {"type": "long"}
# GRIEVER App. A.1 indexes with HNSW; m / ef_construction are ES's defaults written out.
HNSW = {"type": "hnsw", "m": 16, "ef_construction": 100}


def vector_field(dim: int) -> dict:
    return {"type": "dense_vector", "dims": dim, "index": True, "similarity": "cosine", "index_options": HNSW}


# Per index: the text fields BM25 searches, and every other field of its documents.
TEXT_FIELDS = {
    "passages": ("title", "text"),
    "partial_triples": ("content",),
    "triples": ("subject_text", "predicate_text", "object_text"),
    "entities": ("name_text",),
    "predicates": (),
    "events": ("summary",),
    "propositions": ("text",),
}

_EXTRA = {
    "passages": {"id": KW, "rowid": LONG},
    "partial_triples": {"rowid": LONG, "predicate": KW, "is_inverse": {"type": "boolean"}, "freq": INT,
                        "links": {"type": "object", "enabled": False}},  # [[complement, passage_id], ...]
    "triples": {"rowid": LONG, "predicate": KW},
    "entities": {"rowid": LONG, "norm": KW, "type": KW, "passage_ids": KW},
    "predicates": {"rowid": LONG},
    "events": {"rowid": LONG, "entity_ids": LONG, "entity_types": {"type": "object", "enabled": False}},
    "propositions": {"rowid": LONG, "entity_ids": LONG, "entity_types": {"type": "object", "enabled": False}},
}


def index_mapping(index: str, dim: int) -> dict:
    """The `mappings` body for one store index (keyword filter fields from base.FIELDS)."""
    props: dict = {name: TEXT for name in TEXT_FIELDS[index]}
    props.update({name: KW for name in FIELDS[index]})
    props.update(_EXTRA[index])
    props["vector"] = vector_field(dim)
    return {"dynamic": "strict", "properties": props}


# GRIEVER App. A.1's third index: alias pairs, looked up by entity.
SAME_AS_MAPPING = {"dynamic": "strict", "properties": {
    "entity": KW, "alias": KW, "similarity": {"type": "float"}, "method": KW}}

META_MAPPING = {"dynamic": "strict", "properties": {
    "kind": KW, "key": KW, "value": {"type": "object", "enabled": False}}}

SETTINGS = {"number_of_shards": 1, "number_of_replicas": 0, "refresh_interval": "1s"}


def index_name(prefix: str, index: str) -> str:
    """ES index names are lower case; the prefix names the KB (`hoptrace-demo-passages`)."""
    return f"{prefix}-{index}".lower()


ALL = (*INDICES, "same_as", "meta")


def mapping_of(index: str, dim: int) -> dict:
    if index == "same_as":
        return SAME_AS_MAPPING
    if index == "meta":
        return META_MAPPING
    return index_mapping(index, dim)
