"""The KB's SQLite schema: one file per corpus holding every layer the four methods read.

Bump SCHEMA_VERSION on any change; `open_kb` refuses files of another version rather
than mis-reading them. docs/kb-schema.md explains each table.
"""

SCHEMA_VERSION = 1

# FTS5 with Porter stemming approximates Elasticsearch's English BM25 closely enough for
# the papers' BM25 stages; bm25() gives the scores.
_FTS = "tokenize='porter unicode61 remove_diacritics 2'"

DDL = f"""
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);

CREATE TABLE IF NOT EXISTS passages(
  rowid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, title TEXT NOT NULL, text TEXT NOT NULL);
CREATE VIRTUAL TABLE IF NOT EXISTS passages_fts USING fts5(
  title, text, content='passages', content_rowid='rowid', {_FTS});

CREATE TABLE IF NOT EXISTS questions(
  rowid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, text TEXT NOT NULL, answers TEXT NOT NULL,
  gold TEXT NOT NULL, hops INTEGER, type TEXT, decomposition TEXT);

-- which extractor made which layer of which passage; `failed` rows carry the reason
CREATE TABLE IF NOT EXISTS extraction_state(
  passage_rowid INTEGER NOT NULL, layer TEXT NOT NULL, extractor TEXT NOT NULL,
  status TEXT NOT NULL, reason TEXT, PRIMARY KEY(passage_rowid, layer)) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS entities(
  rowid INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, norm TEXT NOT NULL, type TEXT);
CREATE INDEX IF NOT EXISTS entities_norm ON entities(norm);
CREATE TABLE IF NOT EXISTS entity_passages(
  entity_rowid INTEGER NOT NULL, passage_rowid INTEGER NOT NULL,
  PRIMARY KEY(entity_rowid, passage_rowid)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS entity_passages_p ON entity_passages(passage_rowid);
CREATE VIRTUAL TABLE IF NOT EXISTS entities_fts USING fts5(
  name, content='entities', content_rowid='rowid', {_FTS});

CREATE TABLE IF NOT EXISTS triples(
  rowid INTEGER PRIMARY KEY, passage_rowid INTEGER NOT NULL,
  subject TEXT NOT NULL, predicate TEXT NOT NULL, object TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS triples_passage ON triples(passage_rowid);
CREATE INDEX IF NOT EXISTS triples_subject ON triples(subject);
CREATE INDEX IF NOT EXISTS triples_object ON triples(object);
CREATE VIRTUAL TABLE IF NOT EXISTS triples_fts USING fts5(
  subject, predicate, object, content='triples', content_rowid='rowid', {_FTS});

-- distinct predicate strings, embedded once so GRIEVER's predicate score (eq. 1) needs no
-- encoder call at query time
CREATE TABLE IF NOT EXISTS predicates(rowid INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);

-- GRIEVER App. A.1: (subject, predicate) pairs and inverse (predicate, object) pairs;
-- complements and source passages live in partial_triple_links so appends only insert.
CREATE TABLE IF NOT EXISTS partial_triples(
  rowid INTEGER PRIMARY KEY, subject TEXT NOT NULL, predicate TEXT NOT NULL,
  is_inverse INTEGER NOT NULL, content TEXT NOT NULL, UNIQUE(subject, predicate, is_inverse));
CREATE TABLE IF NOT EXISTS partial_triple_links(
  pt_rowid INTEGER NOT NULL, complement TEXT NOT NULL, passage_rowid INTEGER NOT NULL,
  PRIMARY KEY(pt_rowid, complement, passage_rowid)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS partial_triple_links_p ON partial_triple_links(passage_rowid);
CREATE VIRTUAL TABLE IF NOT EXISTS partial_triples_fts USING fts5(
  content, content='partial_triples', content_rowid='rowid', {_FTS});

-- GRIEVER §4.2.3: alias pairs (both directions); the passages an alias came from are
-- entity_passages of the alias, so they stay right when passages are appended.
CREATE TABLE IF NOT EXISTS same_as(
  rowid INTEGER PRIMARY KEY, entity TEXT NOT NULL, alias TEXT NOT NULL,
  similarity REAL NOT NULL, method TEXT NOT NULL, UNIQUE(entity, alias));
CREATE INDEX IF NOT EXISTS same_as_alias ON same_as(alias);

-- SAG §3.2: one event per chunk, linked many-to-many to typed entities
CREATE TABLE IF NOT EXISTS events(
  rowid INTEGER PRIMARY KEY, passage_rowid INTEGER NOT NULL, summary TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS events_passage ON events(passage_rowid);
CREATE TABLE IF NOT EXISTS event_entities(
  event_rowid INTEGER NOT NULL, entity_rowid INTEGER NOT NULL, type TEXT,
  PRIMARY KEY(event_rowid, entity_rowid)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS event_entities_e ON event_entities(entity_rowid);
CREATE VIRTUAL TABLE IF NOT EXISTS events_fts USING fts5(
  summary, content='events', content_rowid='rowid', {_FTS});

-- GRASP §3.1: propositions linked to entities and to their passage
CREATE TABLE IF NOT EXISTS propositions(
  rowid INTEGER PRIMARY KEY, passage_rowid INTEGER NOT NULL, text TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS propositions_passage ON propositions(passage_rowid);
CREATE TABLE IF NOT EXISTS proposition_entities(
  proposition_rowid INTEGER NOT NULL, entity_rowid INTEGER NOT NULL,
  PRIMARY KEY(proposition_rowid, entity_rowid)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS proposition_entities_e ON proposition_entities(entity_rowid);
CREATE VIRTUAL TABLE IF NOT EXISTS propositions_fts USING fts5(
  text, content='propositions', content_rowid='rowid', {_FTS});

-- unit vectors as float16 (half the disk; widened to float32 in memory)
CREATE TABLE IF NOT EXISTS vectors(
  layer TEXT NOT NULL, item_rowid INTEGER NOT NULL, vec BLOB NOT NULL,
  PRIMARY KEY(layer, item_rowid)) WITHOUT ROWID;
"""

# text that is embedded for each layer, as SQL over that layer's table
# (propositions before events: an event is often its passage's first proposition, and the
# build embeds each distinct text once)
EMBEDDED_LAYERS = {
    "passages": "SELECT rowid, title || char(10) || text FROM passages",
    "triples": "SELECT rowid, subject || ' ' || predicate || ' ' || object FROM triples",
    "partial_triples": "SELECT rowid, content FROM partial_triples",
    "predicates": "SELECT rowid, name FROM predicates",
    "entities": "SELECT rowid, name FROM entities",
    "propositions": "SELECT rowid, text FROM propositions",
    "events": "SELECT rowid, summary FROM events",
}
