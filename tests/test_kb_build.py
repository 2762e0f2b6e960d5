import sqlite3

import pytest

from retrieval.core.errors import KBError
from retrieval.core.records import Passage
from retrieval.kb import db
from retrieval.kb.build import build_kb
from retrieval.kb.extract.rules import RulesExtractor
from retrieval.store.sqlite import SQLiteStore


def count(path, table):
    con = sqlite3.connect(path)
    try:
        return con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    finally:
        con.close()


def test_small_kb_has_every_layer(small_kb, small_corpus):
    passages, questions = small_corpus
    assert count(small_kb, "passages") == len(passages) == 80
    assert count(small_kb, "questions") == len(questions)
    for table in ("triples", "entities", "partial_triples", "same_as", "events", "propositions",
                  "event_entities", "proposition_entities"):
        assert count(small_kb, table) > 0, table
    # one event per chunk (SAG §3.2)
    assert count(small_kb, "events") == 80
    # every partial triple and entity has a vector
    for layer in ("passages", "partial_triples", "entities", "events", "propositions"):
        con = sqlite3.connect(small_kb)
        n_vec = con.execute("SELECT count(*) FROM vectors WHERE layer=?", (layer,)).fetchone()[0]
        con.close()
        assert n_vec == count(small_kb, layer), layer


def test_partial_triples_aggregate_complements_and_passages(small_store):
    # the OpenIE file has ("Journal of Mathematical Physics", "published by", "American Institute of Physics")
    hits = small_store.bm25("partial_triples", "Journal of Mathematical Physics published by", 5)
    pts = small_store.partial_triples([h.id for h in hits])
    fwd = [p for p in pts if p.subject == "Journal of Mathematical Physics" and p.predicate == "published by"]
    assert fwd and "American Institute of Physics" in fwd[0].objects and not fwd[0].is_inverse
    assert fwd[0].content == "Journal of Mathematical Physics published by"
    inv = small_store.bm25("partial_triples", "published by American Institute of Physics", 10)
    inv_pts = [p for p in small_store.partial_triples([h.id for h in inv]) if p.is_inverse]
    assert any(p.subject == "American Institute of Physics" and "Journal of Mathematical Physics" in p.objects
               for p in inv_pts)


def test_extractor_labels_are_recorded(small_kb):
    con = db.connect(small_kb, readonly=True)
    labels = db.get_meta(con, "extractors")
    con.close()
    assert labels["triples"][0].startswith("openie-import@1:openie_musique")
    assert labels["events"][0].startswith(f"rules@{RulesExtractor.version}")


def test_kb_of_another_schema_version_or_model_is_refused(small_kb, tmp_path):
    copy = tmp_path / "old.sqlite"
    copy.write_bytes(small_kb.read_bytes())
    with pytest.raises(KBError, match="vectors were made with 'all-MiniLM-L6-v2', not 'all-mpnet-base-v2'"):
        SQLiteStore(copy, embed_model="all-mpnet-base-v2")
    con = sqlite3.connect(copy)
    with con:
        db.set_meta(con, "schema_version", 0)
    con.close()
    with pytest.raises(KBError, match="schema version 0; this HopTrace reads version 1"):
        SQLiteStore(copy)


def test_missing_and_not_a_kb(tmp_path):
    with pytest.raises(KBError, match="no such KB"):
        SQLiteStore(tmp_path / "nope.sqlite")
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"not a database at all" * 100)
    with pytest.raises(KBError, match="not a HopTrace KB"):
        SQLiteStore(junk)


class Boom(Exception):
    pass


class DiesAfter(RulesExtractor):
    """The rules extractor, killed part-way (stands in for a Ctrl-C or an OOM kill)."""

    def __init__(self, n):
        super().__init__(n_process=1)
        self.n = n
        self.seen: list[str] = []

    def extract(self, passages):
        for i, res in enumerate(super().extract(passages)):
            if i == self.n:
                raise Boom()
            self.seen.append(res.passage_id)
            yield res


def test_killed_build_loses_nothing_and_resumes_without_repeating(small_corpus, embedder, tmp_path, monkeypatch):
    import retrieval.kb.build as build

    monkeypatch.setattr(build, "CHUNK", 10)
    passages, _ = small_corpus
    path = tmp_path / "kb.sqlite"
    build_kb(path, passages[:20], [RulesExtractor(n_process=1)], embedder, progress=False)
    before = path.read_bytes()

    dying = DiesAfter(25)
    with pytest.raises(Boom):
        build_kb(path, passages[:60], [dying], embedder, progress=False)
    assert path.read_bytes() == before, "the finished KB must be untouched by a failed append"
    assert (tmp_path / "kb.sqlite.building").exists()
    SQLiteStore(path)  # still opens, 20 passages
    assert count(path, "passages") == 20

    again = DiesAfter(10_000)
    report = build_kb(path, passages[:60], [again], embedder, progress=False)
    # 40 new passages; the first 20 of them were committed before the kill, so only 20 remain
    assert len(again.seen) == 20
    assert set(again.seen).isdisjoint(dying.seen[:20])
    assert report.passages_total == 60
    assert not (tmp_path / "kb.sqlite.building").exists()
    con = sqlite3.connect(path)
    assert con.execute("SELECT count(*) FROM extraction_state WHERE layer='triples'").fetchone()[0] == 60
    assert con.execute("SELECT count(*) FROM events").fetchone()[0] == 60  # none twice
    con.close()


def test_append_indexes_only_new_passages(small_corpus, embedder, tmp_path):
    passages, _ = small_corpus
    path = tmp_path / "kb.sqlite"
    first = build_kb(path, passages[:30], [RulesExtractor(n_process=1)], embedder, progress=False)
    second = build_kb(path, passages[:40], [RulesExtractor(n_process=1)], embedder, progress=False)
    assert first.extracted["triples"] == 30
    assert second.passages_added == 10 and second.extracted["triples"] == 10
    assert second.embedded["passages"] == 10
    before = path.stat().st_mtime_ns
    third = build_kb(path, passages[:40], [RulesExtractor(n_process=1)], embedder, progress=False)
    assert third.reused and third.passages_added == 0 and path.stat().st_mtime_ns == before
    store = SQLiteStore(path)
    new = passages[35]
    assert store.bm25("passages", new.title + " " + new.text[:80], 3)[0].id == new.id


def test_same_as_keeps_alias_passages_and_filters_by_them(small_store):
    pairs = [s for s in small_store.same_as(["United States"]) if s.alias == "the United States"]
    if not pairs:
        pytest.skip("no such alias in this slice")
    alias = pairs[0]
    assert alias.passage_ids
    assert small_store.same_as(["United States"], passage_ids=["chunk-none"]) == []


def test_rules_extractor_handles_a_passage(embedder):
    p = Passage.make("Lothair II", "Lothair II was the king of Lotharingia. He married Queen Teutberga in 855.")
    ex = next(iter(RulesExtractor(n_process=1).extract([p])))
    triples = {(t.subject, t.predicate, t.object) for t in ex.triples}
    assert ("Lothair II", "was king of", "Lotharingia") in triples
    assert ("Lothair II", "married", "Queen Teutberga") in triples  # "He" resolved to the title
    assert ex.events[0].summary == "Lothair II was the king of Lotharingia."
    assert [pr.text for pr in ex.propositions][1] == "Lothair II married Queen Teutberga in 855."
