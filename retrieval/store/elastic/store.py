"""The Elasticsearch store: the SearchStore interface over one index per layer.

Each call is one request (or a paged series for large joins) built by queries.py; each is
recorded for traces as `POST /index/_search` with its body, so SAG's auditable chain shows
the query sent to the cluster exactly as the SQLite store shows its SQL.
"""
from __future__ import annotations

import json
import os
import time
from collections import defaultdict
from typing import Any, Hashable, Iterable, Optional, Sequence
from urllib.parse import urlsplit

import numpy as np

from ...core.errors import ConfigError, KBError
from ...core.records import EntityLink, Event, PartialTriple, Passage, Proposition, Question, SameAs, Triple
from ...kb.schema import SCHEMA_VERSION
from ..base import INDICES, Filter, GraphRows, Hit, SearchStore, StoreInfo, same_as_records
from . import queries as Q
from .mappings import index_name

PAGE = 5_000       # documents per page of a join (search_after over rowid)
MGET_CHUNK = 2_000


def parse_spec(spec: str) -> tuple[str, str]:
    """`es+http://host:9200/prefix` → (http://host:9200, prefix); the prefix names the KB."""
    if not spec.startswith("es+"):
        raise ConfigError(f"not an Elasticsearch store spec: {spec!r} (expected es+http://host:9200/prefix)")
    url = urlsplit(spec[3:])
    if url.scheme not in ("http", "https") or not url.netloc:
        raise ConfigError(f"bad Elasticsearch URL in {spec!r}: expected es+http(s)://host:port/prefix")
    prefix = url.path.strip("/") or "hoptrace"
    if not prefix.replace("-", "").replace("_", "").isalnum() or prefix != prefix.lower():
        raise ConfigError(f"Elasticsearch index prefix {prefix!r}: lower-case letters, digits, - and _ only")
    return f"{url.scheme}://{url.netloc}", prefix


def connect(url: str):
    try:
        from elasticsearch import Elasticsearch
    except ImportError as e:  # pragma: no cover - a dependency of the package
        raise ConfigError("the Elasticsearch store needs the `elasticsearch` package") from e
    key = os.environ.get("HOPTRACE_ES_API_KEY")
    return Elasticsearch(url, api_key=key, request_timeout=60, retry_on_timeout=True, max_retries=3)


class ElasticStore(SearchStore):
    def __init__(self, spec: str, embed_model: Optional[str] = None, client: Any = None):
        self.url, self.prefix = parse_spec(spec)
        self.es = client or connect(self.url)
        meta = self._meta()
        if not meta:
            raise KBError(f"{spec}: no HopTrace KB under prefix {self.prefix!r} "
                          f"(index {index_name(self.prefix, 'meta')} is missing or empty); "
                          f"push one with `hoptrace build … --store {spec}`")
        if meta.get("schema_version") != SCHEMA_VERSION:
            raise KBError(f"{spec}: KB schema {meta.get('schema_version')}, this HopTrace reads {SCHEMA_VERSION}")
        self.embed_model = meta["embed_model"]
        self.dim = int(meta["embed_dim"])
        if embed_model and embed_model != self.embed_model:
            raise KBError(f"{spec}: built with {self.embed_model}, not {embed_model}")
        self.meta = meta

    # --- plumbing --------------------------------------------------------------------------
    def _ix(self, index: str) -> str:
        if index not in INDICES and index not in ("same_as", "meta"):
            raise ConfigError(f"unknown index {index!r}; indices are {INDICES}")
        return index_name(self.prefix, index)

    def _search(self, index: str, body: dict) -> list[dict]:
        t0 = time.perf_counter()
        resp = self.es.search(index=self._ix(index), **body)
        hits = resp["hits"]["hits"]
        self._record(f"POST /{self._ix(index)}/_search", lambda: json.dumps(body, default=str), len(hits), t0)
        return hits

    def _search_all(self, index: str, body: dict) -> list[dict]:
        """Every matching document, paged with search_after on the rowid sort."""
        out: list[dict] = []
        body = {**body, "size": PAGE}
        while True:
            hits = self._search(index, body)
            out.extend(hits)
            if len(hits) < PAGE:
                return out
            body = {**body, "search_after": hits[-1]["sort"]}

    def _mget(self, index: str, ids: Sequence[Hashable], includes: Optional[list[str]] = None) -> dict[str, dict]:
        """Documents by id; the vector is left out unless asked for (it is most of a document)."""
        out: dict[str, dict] = {}
        keys = list(dict.fromkeys(Q.doc_id(index, i) for i in ids))
        kwargs = {"source_includes": includes} if includes else {"source_excludes": ["vector"]}
        for i in range(0, len(keys), MGET_CHUNK):
            chunk = keys[i:i + MGET_CHUNK]
            t0 = time.perf_counter()
            resp = self.es.mget(index=self._ix(index), ids=chunk, **kwargs)
            docs = [d for d in resp["docs"] if d.get("found")]
            self._record(f"GET /{self._ix(index)}/_mget", lambda chunk=chunk: json.dumps({"ids": chunk}), len(docs), t0)
            out.update({d["_id"]: d.get("_source", {}) for d in docs})
        return out

    def _meta(self) -> dict:
        try:
            hits = self.es.search(index=index_name(self.prefix, "meta"), size=1000,
                                  query={"term": {"kind": "meta"}})["hits"]["hits"]
        except Exception as e:  # an absent index, or no cluster at that URL
            if type(e).__name__ == "NotFoundError":
                return {}
            if type(e).__name__ in ("ConnectionError", "ConnectionTimeout", "TransportError"):
                raise ConfigError(f"cannot reach Elasticsearch at {self.url}: {e}") from e
            raise
        return {h["_source"]["key"]: h["_source"]["value"]["v"] for h in hits}

    @staticmethod
    def _item_id(index: str, hit: dict) -> Hashable:
        return hit["_id"] if index == "passages" else int(hit["_id"])

    # --- search ------------------------------------------------------------------------------
    def bm25(self, index: str, query: str, k: int, filter: Optional[Filter] = None) -> list[Hit]:
        if k <= 0 or not query.strip():
            return []
        try:
            body = Q.bm25_body(index, query, k, filter)
        except ValueError as e:
            raise ConfigError(str(e)) from None
        return [Hit(self._item_id(index, h), float(h["_score"])) for h in self._search(index, body)]

    def knn(self, index: str, vector: np.ndarray, k: int, filter: Optional[Filter] = None) -> list[Hit]:
        if k <= 0:
            return []
        body = Q.knn_body(index, vector, k, filter)
        return [Hit(self._item_id(index, h), Q.cosine_from_score(h["_score"])) for h in self._search(index, body)]

    def similarities(self, index: str, vector: np.ndarray, ids: Sequence[Hashable]) -> np.ndarray:
        if not len(ids):
            return np.zeros(0, dtype=np.float32)
        hits = self._search(index, Q.restricted_knn_body(index, vector, ids))
        score = {str(h["_id"]): Q.cosine_from_score(h["_score"]) for h in hits}
        return np.array([score.get(Q.doc_id(index, i), 0.0) for i in ids], dtype=np.float32)

    def vectors(self, index: str, ids: Sequence[Hashable]) -> np.ndarray:
        if not len(ids):
            return np.zeros((0, self.dim), dtype=np.float32)
        keys = list(dict.fromkeys(Q.doc_id(index, i) for i in ids))
        body = {"size": len(keys), "_source": ["vector"], "query": {"ids": {"values": keys}}}
        # ES 9.1+ leaves dense vectors out of _source unless asked; older servers reject the flag.
        extra = {"_source_exclude_vectors": False} if self._server_version() >= (9, 1) else {}
        t0 = time.perf_counter()
        hits = self.es.search(index=self._ix(index), **body, **extra)["hits"]["hits"]
        self._record(f"POST /{self._ix(index)}/_search", lambda: json.dumps({"ids": keys[:20]}), len(hits), t0)
        docs = {h["_id"]: h["_source"]["vector"] for h in hits}
        return np.array([docs[Q.doc_id(index, i)] for i in ids], dtype=np.float32)

    def _server_version(self) -> tuple[int, int]:
        if not hasattr(self, "_version"):
            number = self.es.info()["version"]["number"]
            self._version = tuple(int(x) for x in number.split(".")[:2])
        return self._version

    # --- lookups and joins -------------------------------------------------------------------
    def passages(self, ids: Sequence[str]) -> list[Passage]:
        docs = self._mget("passages", ids, ["title", "text"])
        return [Passage(i, docs[i]["title"], docs[i]["text"]) for i in ids if i in docs]

    def all_passage_ids(self) -> list[str]:
        hits = self._search_all("passages", {"_source": False, "sort": [{"rowid": "asc"}],
                                             "query": {"match_all": {}}})
        return [h["_id"] for h in hits]

    @staticmethod
    def _triple(src: dict) -> Triple:
        return Triple(src["subject"], src["predicate"], src["object"], src["passage_ids"][0], int(src["rowid"]))

    def triples(self, ids: Sequence[int]) -> list[Triple]:
        docs = self._mget("triples", ids)
        return [self._triple(docs[str(i)]) for i in ids if str(i) in docs]

    def triples_of_passages(self, passage_ids: Iterable[str]) -> list[Triple]:
        pids = list(passage_ids)
        if not pids:
            return []
        return [self._triple(h["_source"]) for h in self._search_all("triples", Q.terms_body("passage_ids", pids,
                                                                                             PAGE))]

    def triples_of_entities(self, names: Iterable[str]) -> list[Triple]:
        names = list(names)
        if not names:
            return []
        body = Q.either_terms_body(("subject", "object"), names, PAGE)
        return [self._triple(h["_source"]) for h in self._search_all("triples", body)]

    @staticmethod
    def _partial(src: dict) -> PartialTriple:
        links = src.get("links") or []
        return PartialTriple(int(src["rowid"]), src["subject"], src["predicate"], bool(src["is_inverse"]),
                             list(dict.fromkeys(c for c, _ in links)), list(dict.fromkeys(p for _, p in links)))

    def partial_triples(self, ids: Sequence[int]) -> list[PartialTriple]:
        docs = self._mget("partial_triples", ids)
        return [self._partial(docs[str(i)]) for i in ids if str(i) in docs]

    def _partials_by_key(self, keys: list[tuple[str, str, bool]]) -> dict[tuple[str, str, bool], dict]:
        out: dict[tuple[str, str, bool], dict] = {}
        for i in range(0, len(keys), 500):
            body = Q.partial_key_body(keys[i:i + 500])
            body["_source"] = {"excludes": ["vector"]}
            for h in self._search("partial_triples", body):
                s = h["_source"]
                out[(s["subject"], s["predicate"], bool(s["is_inverse"]))] = s
        return out

    def partial_triples_by_key(self, keys: Iterable[tuple[str, str, bool]]) -> list[PartialTriple]:
        keys = list(dict.fromkeys(keys))
        found = self._partials_by_key(keys) if keys else {}
        return [self._partial(found[k]) for k in keys if k in found]

    def partial_triple_freqs(self, keys: Iterable[tuple[str, str, bool]]) -> dict[tuple[str, str, bool], int]:
        keys = list(dict.fromkeys(keys))
        found = self._partials_by_key(keys) if keys else {}
        return {k: int(found[k].get("freq", 1)) for k in keys if k in found}

    def same_as(self, names: Iterable[str], passage_ids: Optional[Iterable[str]] = None,
                match: str = "record") -> list[SameAs]:
        names = list(names)
        if not names:
            return []
        body = Q.terms_body("entity", names, PAGE, sort="similarity")
        body["sort"] = [{"similarity": "desc"}, {"alias": "asc"}]
        rows = [h["_source"] for h in self._search("same_as", body)]
        if not rows:
            return []
        named = {r["alias"] for r in rows} | {r["entity"] for r in rows}
        seen_in = {h["_source"]["name"]: h["_source"].get("passage_ids", []) for h in self._search_all(
            "entities", Q.terms_body("name", named, PAGE, source=["name", "passage_ids"]))}
        return same_as_records([(r["entity"], r["alias"], r["similarity"]) for r in rows], seen_in, passage_ids,
                               match)

    def entities(self, ids: Sequence[int]) -> list[tuple[int, str, Optional[str]]]:
        docs = self._mget("entities", ids, ["name", "type"])
        return [(int(i), docs[str(i)]["name"], docs[str(i)].get("type")) for i in ids if str(i) in docs]

    def _ids_by(self, index: str, field: str, values: list) -> dict[Any, list[int]]:
        out: dict[Any, list[int]] = defaultdict(list)
        if values:
            for h in self._search_all(index, Q.terms_body(field, values, PAGE, source=[field])):
                out[h["_source"][field]].append(int(h["_id"]))
        return dict(out)

    def entity_ids(self, names: Iterable[str]) -> dict[str, int]:
        return {n: ids[0] for n, ids in self._ids_by("entities", "name", list(names)).items()}

    def entities_by_norm(self, norms: Iterable[str]) -> dict[str, list[int]]:
        return self._ids_by("entities", "norm", list(norms))

    def predicate_ids(self, names: Iterable[str]) -> dict[str, int]:
        return {n: ids[0] for n, ids in self._ids_by("predicates", "name", list(names)).items()}

    def _linked(self, index: str, ids: Iterable[int]) -> dict[int, list[int]]:
        """item id → its entity ids, read from the item documents."""
        ids = list(ids)
        docs = self._mget(index, ids, ["entity_ids"]) if ids else {}
        return {int(i): list(docs[str(i)].get("entity_ids", [])) for i in ids
                if str(i) in docs and docs[str(i)].get("entity_ids")}

    def _linking(self, index: str, entity_ids: Iterable[int]) -> dict[int, list[int]]:
        """entity id → ids of the items linked to it: a terms query on entity_ids."""
        wanted = set(int(e) for e in entity_ids)
        out: dict[int, list[int]] = defaultdict(list)
        if wanted:
            for h in self._search_all(index, Q.terms_body("entity_ids", wanted, PAGE, source=["entity_ids"])):
                for e in h["_source"]["entity_ids"]:
                    if e in wanted:
                        out[e].append(int(h["_id"]))
        return dict(out)

    def events(self, ids: Sequence[int]) -> list[Event]:
        docs = self._mget("events", ids)
        return [Event(d["passage_ids"][0], d["summary"],
                      [EntityLink(n, t) for n, t in zip(d.get("entities", []), d.get("entity_types", []))], int(i))
                for i in ids if (d := docs.get(str(i)))]

    def events_of_entities(self, entity_ids: Iterable[int]) -> dict[int, list[int]]:
        return self._linking("events", entity_ids)

    def entities_of_events(self, event_ids: Iterable[int]) -> dict[int, list[int]]:
        return self._linked("events", event_ids)

    def propositions(self, ids: Sequence[int]) -> list[Proposition]:
        docs = self._mget("propositions", ids)
        return [Proposition(d["passage_ids"][0], d["text"],
                            [EntityLink(n, t) for n, t in zip(d.get("entities", []), d.get("entity_types", []))],
                            int(i))
                for i in ids if (d := docs.get(str(i)))]

    def propositions_of_entities(self, entity_ids: Iterable[int]) -> dict[int, list[int]]:
        return self._linking("propositions", entity_ids)

    def entities_of_propositions(self, proposition_ids: Iterable[int]) -> dict[int, list[int]]:
        return self._linked("propositions", proposition_ids)

    def questions(self) -> list[Question]:
        hits = self.es.search(index=self._ix("meta"), size=10_000, query={"term": {"kind": "question"}},
                              sort=[{"key": "asc"}])["hits"]["hits"]
        out = []
        for h in hits:
            v = h["_source"]["value"]
            out.append(Question(v["id"], v["text"], v["answers"], v["gold"], v.get("hops"), v.get("type"),
                                v.get("decomposition")))
        return out

    def info(self) -> StoreInfo:
        counts = {}
        for index in ("passages", "triples", "entities", "predicates", "partial_triples", "same_as", "events",
                      "propositions"):
            counts[index] = int(self.es.count(index=self._ix(index))["count"])
        counts["questions"] = int(self.es.count(index=self._ix("meta"), query={"term": {"kind": "question"}})["count"])
        meta = self._meta()
        return StoreInfo("elasticsearch", f"{self.url} (prefix {self.prefix})", self.embed_model, self.dim, counts,
                         meta, meta.get("extraction_state", []))

    def graph_rows(self) -> GraphRows:
        """Every triple and every same_as pair, paged (a terms join over the whole KB would hit
        the cluster's terms limit, and same_as() reads one page)."""
        every = {"query": {"match_all": {}}}
        triples = [(t.subject, t.object, t.passage_id) for t in (self._triple(h["_source"]) for h in self._search_all(
            "triples", {**every, "_source": {"excludes": ["vector"]}, "sort": [{"rowid": "asc"}]}))]
        pairs = self._search_all("same_as", {**every, "_source": ["entity", "alias", "similarity"],
                                             "sort": [{"entity": "asc"}, {"alias": "asc"}]})
        same_as = [(h["_source"]["entity"], h["_source"]["alias"], float(h["_source"]["similarity"])) for h in pairs]
        return GraphRows(self.all_passage_ids(), triples, same_as)

    def warm(self, indices: Iterable[str] = ("passages",)) -> None:
        """Nothing to load: the cluster holds the vectors."""

    def close(self) -> None:
        self.es.close()
