"""Push a built KB into Elasticsearch: `hoptrace build … --store es+http://host:9200/prefix`.

The SQLite KB stays the build's journal (resumable, incremental, per-passage extraction
state); the cluster is the serving copy. Pushing is idempotent (documents keyed by the
KB's ids, `index` operations) and incremental: a push after an append sends the new rows
plus the entities and partial triples the new passages touched (their link lists grew).
Index creation is idempotent; refresh is switched off during the bulk load and one
refresh at the end makes everything searchable.
"""
from __future__ import annotations

import json
import sqlite3
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from ...core.progress_bar import bar as progress_bar
from ...kb import db
from .mappings import ALL, SETTINGS, index_name, mapping_of
from .store import connect, parse_spec

CHUNK = 500          # documents per bulk request
MAX_RETRIES = 5      # per document on 429 (ES rejects when its queues are full), with backoff
INITIAL_BACKOFF_S = 2


@dataclass
class PushReport:
    spec: str
    sent: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0


def ensure_indices(es, prefix: str, dim: int) -> list[str]:
    """Create the missing indices (mappings.py); existing ones are left as they are."""
    created = []
    for index in ALL:
        name = index_name(prefix, index)
        if not es.indices.exists(index=name):
            es.indices.create(index=name, mappings=mapping_of(index, dim), settings=SETTINGS)
            created.append(name)
    return created


def push_kb(kb_path: Path, spec: str, progress: bool = True, client: Any = None) -> PushReport:
    url, prefix = parse_spec(spec)
    es = client or connect(url)
    con = db.connect(kb_path, readonly=True)
    report = PushReport(spec)
    t0 = time.time()
    try:
        dim = int(db.get_meta(con, "embed_dim"))
        ensure_indices(es, prefix, dim)
        pushed = _pushed_upto(es, prefix)
        docs = KBDocuments(con, dim, pushed)
        names = [index_name(prefix, i) for i in ALL]
        es.indices.put_settings(index=",".join(names), settings={"refresh_interval": "-1"})
        try:
            for index, gen in docs.streams():
                report.sent[index] = _bulk(es, index_name(prefix, index), gen, index, progress)
        finally:
            es.indices.put_settings(index=",".join(names), settings={"refresh_interval": SETTINGS["refresh_interval"]})
            es.indices.refresh(index=",".join(names))
    finally:
        con.close()
    report.seconds = round(time.time() - t0, 1)
    return report


def _bulk(es, name: str, docs: Iterator[tuple[str, dict]], label: str, progress: bool) -> int:
    from elasticsearch.helpers import streaming_bulk

    actions = ({"_op_type": "index", "_index": name, "_id": _id, "_source": src} for _id, src in docs)
    n = 0
    bar = progress_bar(desc=f"push {label}", unit="doc", disable=not progress)
    for ok, _item in streaming_bulk(es, actions, chunk_size=CHUNK, max_retries=MAX_RETRIES,
                                   initial_backoff=INITIAL_BACKOFF_S, raise_on_error=True):
        n += ok
        bar.update(1)
    bar.close()
    return n


def _pushed_upto(es, prefix: str) -> dict[str, int]:
    try:
        doc = es.get(index=index_name(prefix, "meta"), id="meta:pushed_upto")
        return doc["_source"]["value"]
    except Exception as e:
        if type(e).__name__ == "NotFoundError":
            return {}
        raise


class KBDocuments:
    """The ES documents of a KB, per index, only rows newer than `pushed` (plus touched ones)."""

    def __init__(self, con: sqlite3.Connection, dim: int, pushed: dict[str, int]):
        self.con = con
        self.dim = dim
        self.pushed = pushed
        self.passage_id = dict(con.execute("SELECT rowid, id FROM passages"))
        self.passages_upto = int(pushed.get("passages", 0))  # passages after this one are new since the last push
        self.upto: dict[str, int] = {}

    def streams(self) -> Iterator[tuple[str, Iterator[tuple[str, dict]]]]:
        for index in ("passages", "triples", "partial_triples", "entities", "predicates", "events", "propositions",
                      "same_as"):
            yield index, getattr(self, f"_{index}")()
        yield "meta", self._meta()

    def _rows_after(self, table: str, cols: str) -> list[tuple]:
        upto = int(self.pushed.get(table, 0))
        rows = self.con.execute(f"SELECT rowid, {cols} FROM {table} WHERE rowid>? ORDER BY rowid", (upto,)).fetchall()
        self.upto[table] = max([upto] + [r[0] for r in rows])
        return rows

    def _vectors(self, layer: str, rowids: list[int]) -> dict[int, list[float]]:
        out = {}
        for i in range(0, len(rowids), 10_000):
            chunk = rowids[i:i + 10_000]
            for rid, blob in self.con.execute("SELECT item_rowid, vec FROM vectors WHERE layer=? AND item_rowid IN "
                                              "(SELECT value FROM json_each(?))", (layer, json.dumps(chunk))):
                out[rid] = np.frombuffer(blob, dtype=np.float16).astype(np.float32).round(6).tolist()
        return out

    def _multi(self, sql: str, rowids: list[int]) -> dict[int, list]:
        out: dict[int, list] = defaultdict(list)
        for i in range(0, len(rowids), 10_000):
            for key, *vals in self.con.execute(sql, (json.dumps(rowids[i:i + 10_000]),)):
                out[key].append(vals[0] if len(vals) == 1 else tuple(vals))
        return out

    def _passages(self):
        rows = self._rows_after("passages", "id, title, text")
        ids = [r[0] for r in rows]
        subj = self._multi("SELECT passage_rowid, subject FROM triples WHERE passage_rowid IN (SELECT value FROM "
                           "json_each(?))", ids)
        obj = self._multi("SELECT passage_rowid, object FROM triples WHERE passage_rowid IN (SELECT value FROM "
                          "json_each(?))", ids)
        ents = self._multi("SELECT ep.passage_rowid, e.name FROM entity_passages ep JOIN entities e ON "
                           "e.rowid=ep.entity_rowid "
                           "WHERE ep.passage_rowid IN (SELECT value FROM json_each(?))", ids)
        vec = self._vectors("passages", ids)
        for rowid, pid, title, text in rows:
            s, o = sorted(set(subj[rowid])), sorted(set(obj[rowid]))
            yield pid, {"id": pid, "rowid": rowid, "title": title, "text": text, "subjects": s, "objects": o,
                        "triple_entities": sorted(set(s) | set(o)), "entities": sorted(set(ents[rowid])),
                        "vector": vec[rowid]}

    def _triples(self):
        rows = self._rows_after("triples", "passage_rowid, subject, predicate, object")
        vec = self._vectors("triples", [r[0] for r in rows])
        for rowid, prow, s, p, o in rows:
            yield str(rowid), {"rowid": rowid, "subject": s, "predicate": p, "object": o, "subject_text": s,
                               "predicate_text": p, "object_text": o, "passage_ids": [self.passage_id[prow]],
                               "vector": vec[rowid]}

    def _touched(self, table: str, link_sql: str) -> list[int]:
        """Rows newer than the last push, plus older rows linked to passages added since."""
        new = [r[0] for r in self._rows_after(table, "1")]
        old = [r[0] for r in self.con.execute(link_sql, (self.passages_upto,))] if self.passages_upto else []
        return sorted(set(new) | {r for r in old if r <= int(self.pushed.get(table, 0))})

    def _partial_triples(self):
        ids = self._touched("partial_triples", "SELECT DISTINCT pt_rowid FROM partial_triple_links WHERE "
                                               "passage_rowid>?")
        heads = {r[0]: r for r in self.con.execute(
            "SELECT rowid, subject, predicate, is_inverse, content FROM partial_triples WHERE rowid IN "
            "(SELECT value FROM json_each(?))", (json.dumps(ids),))}
        links = self._multi("SELECT pt_rowid, complement, passage_rowid FROM partial_triple_links WHERE pt_rowid IN "
                            "(SELECT value FROM json_each(?))", ids)
        vec = self._vectors("partial_triples", ids)
        for rowid in ids:
            _, s, p, inv, content = heads[rowid]
            pairs = [[c, self.passage_id[pr]] for c, pr in links[rowid]]
            yield str(rowid), {"rowid": rowid, "subject": s, "predicate": p, "is_inverse": bool(inv),
                               "content": content, "objects": sorted({c for c, _ in pairs}),
                               "passage_ids": sorted({p_ for _, p_ in pairs}), "links": pairs,
                               "freq": len({c for c, _ in pairs}) or 1, "vector": vec[rowid]}

    def _entities(self):
        ids = self._touched("entities", "SELECT DISTINCT entity_rowid FROM entity_passages WHERE passage_rowid>?")
        heads = {r[0]: r for r in self.con.execute(
            "SELECT rowid, name, norm, type FROM entities WHERE rowid IN (SELECT value FROM json_each(?))",
            (json.dumps(ids),))}
        pids = self._multi("SELECT entity_rowid, passage_rowid FROM entity_passages WHERE entity_rowid IN "
                           "(SELECT value FROM json_each(?))", ids)
        vec = self._vectors("entities", ids)
        for rowid in ids:
            _, name, norm, etype = heads[rowid]
            doc = {"rowid": rowid, "name": name, "name_text": name, "norm": norm,
                   "passage_ids": sorted({self.passage_id[p] for p in pids[rowid]}), "vector": vec[rowid]}
            if etype:
                doc["type"] = etype
            yield str(rowid), doc

    def _predicates(self):
        rows = self._rows_after("predicates", "name")
        vec = self._vectors("predicates", [r[0] for r in rows])
        for rowid, name in rows:
            yield str(rowid), {"rowid": rowid, "name": name, "vector": vec[rowid]}

    def _linked_items(self, table: str, text_col: str, link_sql: str, layer: str):
        rows = self._rows_after(table, f"passage_rowid, {text_col}")
        ids = [r[0] for r in rows]
        links = self._multi(link_sql, ids)
        vec = self._vectors(layer, ids)
        for rowid, prow, text in rows:
            ents = links[rowid]
            yield str(rowid), {"rowid": rowid, text_col: text, "passage_ids": [self.passage_id[prow]],
                               "entities": [n for _, n, _ in ents], "entity_ids": [e for e, _, _ in ents],
                               "entity_types": [t for _, _, t in ents], "vector": vec[rowid]}

    def _events(self):
        return self._linked_items("events", "summary",
                                  "SELECT ee.event_rowid, ee.entity_rowid, e.name, ee.type FROM event_entities ee "
                                  "JOIN entities e ON e.rowid=ee.entity_rowid "
                                  "WHERE ee.event_rowid IN (SELECT value FROM json_each(?))", "events")

    def _propositions(self):
        return self._linked_items("propositions", "text",
                                  "SELECT pe.proposition_rowid, pe.entity_rowid, e.name, e.type FROM "
                                  "proposition_entities pe JOIN entities e ON e.rowid=pe.entity_rowid "
                                  "WHERE pe.proposition_rowid IN (SELECT value FROM json_each(?))", "propositions")

    def _same_as(self):
        for rowid, e, a, sim, method in self._rows_after("same_as", "entity, alias, similarity, method"):
            yield str(rowid), {"entity": e, "alias": a, "similarity": sim, "method": method}

    def _meta(self):
        meta = {k: json.loads(v) for k, v in self.con.execute("SELECT key, value FROM meta")}
        meta["extraction_state"] = [
            {"layer": layer, "extractor": ex, "status": st, "passages": n, "reasons": []}
            for layer, ex, st, n in self.con.execute(
                "SELECT layer, extractor, status, count(*) FROM extraction_state GROUP BY 1, 2, 3 ORDER BY 1, 2, 3")]
        for key, value in meta.items():
            # wrapped: an unparsed object field takes objects only, and meta values may be scalars
            yield f"meta:{key}", {"kind": "meta", "key": key, "value": {"v": value}}
        for rowid, qid, text, answers, gold, hops, qtype, dec in self.con.execute(
                "SELECT rowid, id, text, answers, gold, hops, type, decomposition FROM questions ORDER BY rowid"):
            yield f"question:{qid}", {"kind": "question", "key": f"{rowid:09d}", "value": {
                "id": qid, "text": text, "answers": json.loads(answers), "gold": json.loads(gold), "hops": hops,
                "type": qtype, "decomposition": json.loads(dec) if dec else None}}
        self.upto["passages"] = max(self.upto.get("passages", 0), self.passages_upto)
        yield "meta:pushed_upto", {"kind": "state", "key": "pushed_upto", "value": self.upto}
