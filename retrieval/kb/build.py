"""Building a KB: passages → extraction → derived layers → vectors, resumable and incremental.

Safety: a build never writes the KB file itself. It works on `KB.building` (a copy of
the existing KB when appending) and renames it over the KB only when every step is
done, so a failed or killed build loses nothing already stored. Re-running the same
build resumes the `.building` file: each step commits in chunks and records what it
finished, so nothing is extracted or embedded twice.
"""
from __future__ import annotations

import json
import os
import shutil
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from ..core.errors import KBError
from ..core.records import Extraction, Passage, Question
from ..encoders.embedder import Embedder
from . import db
from .embed import EmbedSettings, embed_layers, env_precision, same_kind
from .extract.base import Extractor, label
from .normalize import normalize_entity
from .progress import BuildProgress, BuildStatus
from .publish import PRIOR_EXTRACT_S_PER_PASSAGE, Costs, Publisher, Step, vector_groups
from .readiness import DERIVED_FROM_TRIPLES, is_vectors, layer_of, vectors, whole_units
from .schema import EMBEDDED_LAYERS
from .synonyms import DEFAULT_THRESHOLD, derive_same_as

CHUNK = 256


@dataclass
class BuildReport:
    path: Path
    passages_added: int = 0
    passages_total: int = 0
    questions: int = 0
    extracted: dict[str, int] = field(default_factory=dict)
    failed: dict[str, int] = field(default_factory=dict)         # this build
    failed_total: dict[str, int] = field(default_factory=dict)   # every failed passage the KB now records
    retried: dict[str, int] = field(default_factory=dict)        # failed passages forgotten by --retry-failed
    llm: list[dict] = field(default_factory=list)                # per LLM extractor: model, calls, tokens, time
    malformed_triples: int = 0
    embedded: dict[str, int] = field(default_factory=dict)    # vectors written, per layer
    encoded: dict[str, int] = field(default_factory=dict)     # texts the encoder ran, per layer (dedupe)
    embed_seconds: dict[str, float] = field(default_factory=dict)
    encoder: str = ""                                         # what encoded: onnxruntime int8 ×2, …
    steps: dict[str, float] = field(default_factory=dict)     # seconds per build step
    same_as_pairs: int = 0
    seconds: float = 0.0
    size_bytes: int = 0
    reused: bool = False
    precision: str = ""
    device: str = ""
    ready_at: list = field(default_factory=list)              # [(seconds, [methods])]: when each became ready
    snapshots: int = 0                                        # times the KB was published before its end

    def as_dict(self) -> dict:
        d = dict(self.__dict__)
        d["path"] = str(self.path)
        return d


def build_kb(path: str | Path, passages: list[Passage], extractors: list[Extractor], embedder: Embedder,
             questions: Optional[list[Question]] = None, name: Optional[str] = None,
             progress: bool = True, synonym_threshold: float = DEFAULT_THRESHOLD,
             retry_failed: bool = False, precision: Optional[str] = None,
             listener: Optional[Callable[[BuildStatus], None]] = None,
             targets: Optional[dict[str, tuple[str, ...]]] = None, device: Optional[str] = None) -> BuildReport:
    """Create or extend the KB at `path`; return what was done.

    `targets`: the methods to serve, each with the KB units it needs (methods/layers.py
    `targets`), the first listed first. With them the build makes only those units (and keeps
    whole every unit the KB already has), serves each method as soon as its units are whole
    (publish.py) and keeps a status file the app reads; without them it makes every layer its
    extractors fill and publishes once, at its end.
    `retry_failed` first forgets the failed passages of the extractors' layers, so only
    those are extracted again (every other passage keeps what it has). `precision` is the
    build encoder's (fp32 | bf16 | int8); by default an int8 KB stays int8 and any other takes
    this machine's default (bf16 where the CPU has it, else fp32). `device`: auto | cpu | cuda
    (auto: CUDA when torch sees a GPU). `listener` hears every progress update (the app's Index
    tab); `progress` draws terminal bars."""
    path = Path(path)
    t0 = time.time()
    report = BuildReport(path)
    layers = sorted({layer for ex in extractors for layer in ex.layers})
    asked = _asked_units(targets)
    if _nothing_new(path, embedder, passages, questions, layers if retry_failed else [], asked):
        report.passages_total = len(passages)
        report.reused = True
        report.size_bytes = path.stat().st_size
        return report
    settings = EmbedSettings.from_env(_precision_for(path, precision or env_precision()), device)
    work = _working_copy(path, embedder)
    con = db.connect(work)
    shown = BuildProgress(bars=progress, listener=listener, precision=settings.precision)
    pub = Publisher(path, targets, t0, announce=_to_terminal if progress else None)
    shown.on_update = lambda st: pub.tick()
    try:
        wanted = _wanted(con, extractors, asked)
        extractors = _restricted(extractors, wanted)
        costs = Costs(con, settings.precision, max((getattr(ex, "seconds_per_passage", 0.0) for ex in extractors),
                                                   default=0.0) or PRIOR_EXTRACT_S_PER_PASSAGE)
        if name:  # early: a refusal on a published snapshot names the KB, never its path
            with con:
                db.set_meta(con, "name", name)
        report.passages_added = _add_passages(con, passages)
        if questions:
            report.questions = _add_questions(con, questions)
        if retry_failed:
            _forget_failures(con, extractors, layers, report)
        pub.plan(_plan(con, wanted, targets, costs, extractors))
        pub.step_done(con)                                        # passages: bm25
        step = time.perf_counter()
        if vectors("passages") in wanted:
            shown.to_embed_passages = _passages_without_vectors(con)
            emb = embed_layers(con, embedder, settings, shown, only=["passages"])
            _add_embedding(report, emb)
            costs.measured("passages", emb.encoded.get("passages", 0), emb.seconds.get("passages", 0.0))
            pub.step_done(con)                                    # passages' vectors: dense
        report.steps["embed passages"] = round(time.perf_counter() - step, 1)
        step = time.perf_counter()
        for ex in extractors:
            _extract(con, ex, report, shown)
            summary = ex.summary() if hasattr(ex, "summary") else None
            if summary and summary["passages"]:  # a layer with nothing to do is no run
                _record_extractor_run(con, summary, report)
        report.steps["extract"] = round(time.perf_counter() - step, 1)
        step = time.perf_counter()
        _derive_entities(con)
        _derive_partial_triples(con)
        report.steps["derive"] = round(time.perf_counter() - step, 1)
        whole = whole_units(con)
        groups = vector_groups(targets, whole, wanted, lambda u: costs.unit(u, whole))
        pub.plan(groups, whole)
        step = time.perf_counter()
        synonyms_s = 0.0
        for group in groups:
            shown.to_embed_passages = _passages_without_vectors(con)
            emb = embed_layers(con, embedder, settings, shown,
                               only=[layer_of(u) for u in group.units if is_vectors(u)])
            _add_embedding(report, emb)
            if "same_as" in group.units:
                s0 = time.perf_counter()
                report.same_as_pairs += derive_same_as(con, threshold=synonym_threshold)
                synonyms_s += time.perf_counter() - s0
            pub.step_done(con)
        report.steps["embed"] = round(time.perf_counter() - step - synonyms_s, 1)
        report.steps["synonyms"] = round(synonyms_s, 1)
        with con:
            if report.embedded:
                db.set_meta(con, "embed_precision", report.precision)
                db.set_meta(con, "embed_device", report.device)
            if name:
                db.set_meta(con, "name", name)
            db.set_meta(con, "extractors", _extractor_labels(con))
            report.failed_total = _failure_counts(con)
            report.passages_total = con.execute("SELECT count(*) FROM passages").fetchone()[0]
            report.seconds = round(time.time() - t0, 1)
            report.ready_at = pub.order()
            report.snapshots = pub.snapshots
            db.set_meta(con, "last_build", {k: v for k, v in report.as_dict().items() if k != "path"})
            db.set_meta(con, "complete", True)
    except BaseException:
        pub.finish()
        raise
    finally:
        con.close()
    os.replace(work, path)
    pub.finish()
    report.size_bytes = path.stat().st_size
    return report


def _to_terminal(line: str) -> None:
    import sys

    print(line, file=sys.stderr, flush=True)


def _asked_units(targets: Optional[dict[str, tuple[str, ...]]]) -> Optional[frozenset[str]]:
    return None if targets is None else frozenset(u for units in targets.values() for u in units)


def _wanted(con: sqlite3.Connection, extractors: list[Extractor], asked: Optional[frozenset[str]]) -> frozenset[str]:
    """The units this build makes whole: those asked for (every unit its extractors lead to, when
    nothing is), and every unit the KB already has whole, so an append leaves no layer behind."""
    if asked is None:
        made = {layer for ex in extractors for layer in ex.layers}
        rows = {"passages"} | made | ({"entities"} if made else set()) | (
            set(DERIVED_FROM_TRIPLES) if "triples" in made else set())
        keep = rows | set(whole_units(con))
        return frozenset(keep | {vectors(x) for x in keep if x in EMBEDDED_LAYERS} | ({"same_as"} if made else set()))
    keep = set(asked) | set(whole_units(con))
    if "same_as" in keep:
        keep.add(vectors("entities"))
    return frozenset(keep | {"passages"})


def _restricted(extractors: list[Extractor], wanted: frozenset[str]) -> list[Extractor]:
    """Only the extractors (and, where one can, only the layers) the wanted units need. An LLM
    extractor's single read fills all its layers at once: it runs whole or not at all."""
    out = []
    for ex in extractors:
        mine = frozenset(ex.layers) & wanted
        if not mine:
            continue
        if mine != frozenset(ex.layers) and getattr(ex, "layers_separable", False):
            ex.layers = mine
        out.append(ex)
    return out


def _plan(con: sqlite3.Connection, wanted: frozenset[str], targets, costs: Costs,
          extractors: list[Extractor]) -> list[Step]:
    """The whole build's steps as first estimated (for the status file's 'ready in ~N s')."""
    whole = whole_units(con)
    steps = [Step("passages", ("passages",), 0.0)]
    if vectors("passages") in wanted and vectors("passages") not in whole:
        steps.append(Step("passages' vectors", (vectors("passages"),), costs.unit(vectors("passages"), whole)))
    made = tuple(sorted({layer for ex in extractors for layer in ex.layers}))
    if made:
        derived = (("entities",) + (DERIVED_FROM_TRIPLES if "triples" in made else ()))
        steps.append(Step("extract", made + derived, max(costs.unit(layer, whole) for layer in made)))
    assumed = whole | set(made) | {"entities"} | set(DERIVED_FROM_TRIPLES)
    return steps + vector_groups(targets, frozenset(assumed), wanted, lambda u: costs.unit(u, whole))


def _add_embedding(report: BuildReport, emb) -> None:
    for key, into in (("items", report.embedded), ("encoded", report.encoded), ("seconds", report.embed_seconds)):
        for layer, v in getattr(emb, key).items():
            into[layer] = round(into.get(layer, 0) + v, 1) if key == "seconds" else into.get(layer, 0) + v
    if emb.encoder:
        report.encoder, report.precision, report.device = emb.encoder, emb.precision, emb.device


def _nothing_new(path: Path, embedder: Embedder, passages: list[Passage], questions: Optional[list[Question]],
                 retry_layers: list[str], asked: Optional[frozenset[str]] = None) -> bool:
    """A finished KB that already holds every passage and question, every unit asked for (and,
    when retrying, has no failed passage in those layers): reuse it untouched."""
    if not path.exists() or db.building_path(path).exists():
        return False
    con = db.connect(path, readonly=True)
    try:
        db.check(con, path, embedder.name)
        if not db.get_meta(con, "complete", False):
            return False
        have = {r[0] for r in con.execute("SELECT id FROM passages")}
        have_q = {r[0] for r in con.execute("SELECT id FROM questions")}
        failed = sum(_failure_counts(con, retry_layers).values()) if retry_layers else 0
        lacking = bool(asked and not asked <= whole_units(con))
    finally:
        con.close()
    return (not failed and not lacking and all(p.id in have for p in passages)
            and all(q.id in have_q for q in questions or []))


def _precision_for(path: Path, asked: Optional[str]) -> Optional[str]:
    """The build encoder's precision: what was asked, else the KB's kind of vectors (a KB's
    vectors come from one encoder). fp32 and bf16 are one kind (their vectors at cosine ≥ 0.9999
    of each other; R@5 differed on at most one of 293 questions per method, docs/profiles.md), so either extends
    the other; int8 is another. Asking for another kind than the KB's is refused, naming both."""
    src = db.building_path(path) if db.building_path(path).exists() else path
    if not src.exists():
        return asked
    con = db.connect(src, readonly=True)
    try:
        has_vectors = con.execute("SELECT 1 FROM vectors LIMIT 1").fetchone() is not None
        made = db.get_meta(con, "embed_precision", "fp32" if has_vectors else None)
    finally:
        con.close()
    if asked and made and not same_kind(asked, made):
        raise KBError(f"{path}: its vectors were made by the {made} encoder, so it cannot take {asked} ones; "
                      f"build with --precision {made}, or into a new KB (--out)")
    # Not asked: an int8 KB keeps int8; a full-precision one takes this machine's default.
    return asked or (made if made == "int8" else None)


def _passages_without_vectors(con: sqlite3.Connection) -> int:
    return con.execute("SELECT count(*) FROM passages WHERE rowid NOT IN "
                       "(SELECT item_rowid FROM vectors WHERE layer='passages')").fetchone()[0]


def _working_copy(path: Path, embedder: Embedder) -> Path:
    work = db.building_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if work.exists():  # resume an unfinished build
        con = db.connect(work)
        try:
            db.check(con, work, embedder.name)
        except KBError:
            con.close()
            raise KBError(f"{work}: an unfinished build for another model or schema; delete it to start over") from None
        con.close()
        return work
    if path.exists():
        con = db.connect(path, readonly=True)
        try:
            db.check(con, path, embedder.name)
        finally:
            con.close()
        shutil.copyfile(path, work)
        con = db.connect(work)
        with con:
            if db.get_meta(con, "vectors_upto") is None and db.get_meta(con, "complete", False):
                # A KB finished before builds marked their vectors had every layer's: say so, since
                # the copy stops being 'complete' now.
                db.set_meta(con, "vectors_upto", {layer: con.execute(
                    f"SELECT coalesce(max(rowid), 0) FROM {layer}").fetchone()[0] for layer in EMBEDDED_LAYERS})
            db.set_meta(con, "complete", False)
        con.close()
        return work
    con = db.connect(work)
    db.create(con, embedder.name, embedder.dim)
    con.close()
    return work


def _add_passages(con: sqlite3.Connection, passages: list[Passage]) -> int:
    known = {r[0] for r in con.execute("SELECT id FROM passages")}
    new = [p for p in passages if p.id not in known]
    with con:
        for p in new:
            cur = con.execute("INSERT INTO passages(id, title, text) VALUES(?,?,?)", (p.id, p.title, p.text))
            con.execute("INSERT INTO passages_fts(rowid, title, text) VALUES(?,?,?)", (cur.lastrowid, p.title, p.text))
    return len(new)


GRADES_META = "graded_qrels"   # question → passage → grade, as the collection's qrels gave them


def _add_questions(con: sqlite3.Connection, questions: list[Question]) -> int:
    graded = {q.id: q.grades for q in questions if q.grades}
    if graded:   # kept beside the questions table (whose gold is the ids at --min-grade and above)
        row = con.execute("SELECT value FROM meta WHERE key = ?", (GRADES_META,)).fetchone()
        with con:
            db.set_meta(con, GRADES_META, {**(json.loads(row[0]) if row else {}), **graded})
    with con:
        for q in questions:
            con.execute(
                "INSERT OR REPLACE INTO questions(id, text, answers, gold, hops, type, decomposition) "
                "VALUES(?,?,?,?,?,?,?)",
                (q.id, q.text, json.dumps(q.answers), json.dumps(q.gold_passage_ids), q.hops, q.type,
                 json.dumps(q.decomposition) if q.decomposition is not None else None))
    return len(questions)


def _extract(con: sqlite3.Connection, ex: Extractor, report: BuildReport, shown: BuildProgress) -> None:
    """Run one extractor on every passage that has not had its layers extracted yet."""
    tag = label(ex)
    layers = sorted(ex.layers)
    todo_sql = ("SELECT rowid, id, title, text FROM passages p WHERE NOT EXISTS "
                "(SELECT 1 FROM extraction_state s WHERE s.passage_rowid=p.rowid AND s.layer=?) ORDER BY rowid")
    todo = con.execute(todo_sql, (layers[0],)).fetchall()
    if not todo:
        return
    shown.start(f"extract {'+'.join(layers)} ({ex.name})", len(todo), "passage")
    passages = [Passage(pid, title, text) for _, pid, title, text in todo]
    rowid_of = {pid: rowid for rowid, pid, _, _ in todo}
    every = getattr(ex, "commit_every", CHUNK)
    note = getattr(ex, "progress_note", None)
    # One stream over all passages (spaCy keeps its worker processes alive); commits every
    # `every` results, so a kill loses at most that many and a re-run resumes after them.
    buffer: list[Extraction] = []
    for n, res in enumerate(ex.extract(passages), 1):
        buffer.append(res)
        if len(buffer) >= every:
            _commit_extractions(con, buffer, rowid_of, ex, tag, report)
            buffer = []
        shown.advance(1, f"{len(todo) - n:,} passages left" + (f" · {note()}" if note else ""),
                      shown.extraction_eta(n, len(todo)), estimated=True)
    if buffer:
        _commit_extractions(con, buffer, rowid_of, ex, tag, report)
    shown.close()


def _forget_failures(con: sqlite3.Connection, extractors: list[Extractor], layers: list[str],
                     report: BuildReport) -> None:
    """--retry-failed: drop the failed-state rows of `layers` so those passages count as not extracted."""
    report.retried = _failure_counts(con, layers)
    retry_round = db.get_meta(con, "retry_round", 0) + 1
    with con:
        con.executemany("DELETE FROM extraction_state WHERE layer=? AND status='failed'", [(x,) for x in layers])
        db.set_meta(con, "retry_round", retry_round)
    for ex in extractors:
        if hasattr(ex, "retry_round"):
            ex.retry_round = retry_round


def _failure_counts(con: sqlite3.Connection, layers: Optional[list[str]] = None) -> dict[str, int]:
    rows = con.execute("SELECT layer, count(*) FROM extraction_state WHERE status='failed' GROUP BY layer")
    return {layer: n for layer, n in rows if layers is None or layer in layers}


def _record_extractor_run(con: sqlite3.Connection, summary: dict, report: BuildReport) -> None:
    """Keep every LLM extraction run (model, calls, tokens, time, failures) in the KB metadata."""
    summary = {"finished": time.strftime("%Y-%m-%d %H:%M:%S"), **summary}
    report.llm.append(summary)
    with con:
        db.set_meta(con, "llm_extraction", db.get_meta(con, "llm_extraction", []) + [summary])


def _commit_extractions(con: sqlite3.Connection, results: list[Extraction], rowid_of: dict[str, int],
                        ex: Extractor, tag: str, report: BuildReport) -> None:
    with con:
        for res in results:
            _store_extraction(con, rowid_of[res.passage_id], res, ex, tag, report)


def _store_extraction(con: sqlite3.Connection, prow: int, res: Extraction, ex: Extractor, tag: str,
                      report: BuildReport) -> None:
    if res.failed is not None:
        for layer in ex.layers:
            con.execute("INSERT OR REPLACE INTO extraction_state VALUES(?,?,?,?,?)",
                        (prow, layer, tag, "failed", res.failed))
            report.failed[layer] = report.failed.get(layer, 0) + 1
        return
    report.malformed_triples += res.malformed
    for link in res.entities:
        _link_entity(con, link.name, link.type, prow)
    if "triples" in ex.layers:
        for t in res.triples:
            cur = con.execute("INSERT INTO triples(passage_rowid, subject, predicate, object) VALUES(?,?,?,?)",
                              (prow, t.subject, t.predicate, t.object))
            con.execute("INSERT INTO triples_fts(rowid, subject, predicate, object) VALUES(?,?,?,?)",
                        (cur.lastrowid, t.subject, t.predicate, t.object))
    if "events" in ex.layers:
        for ev in res.events:
            cur = con.execute("INSERT INTO events(passage_rowid, summary) VALUES(?,?)", (prow, ev.summary))
            con.execute("INSERT INTO events_fts(rowid, summary) VALUES(?,?)", (cur.lastrowid, ev.summary))
            for link in ev.entities:
                erow = _link_entity(con, link.name, link.type, prow)
                con.execute("INSERT OR IGNORE INTO event_entities VALUES(?,?,?)", (cur.lastrowid, erow, link.type))
    if "propositions" in ex.layers:
        for pr in res.propositions:
            cur = con.execute("INSERT INTO propositions(passage_rowid, text) VALUES(?,?)", (prow, pr.text))
            con.execute("INSERT INTO propositions_fts(rowid, text) VALUES(?,?)", (cur.lastrowid, pr.text))
            for link in pr.entities:
                erow = _link_entity(con, link.name, link.type, prow)
                con.execute("INSERT OR IGNORE INTO proposition_entities VALUES(?,?)", (cur.lastrowid, erow))
    for layer in ex.layers:
        con.execute("INSERT OR REPLACE INTO extraction_state VALUES(?,?,?,?,?)", (prow, layer, tag, "done", None))
        report.extracted[layer] = report.extracted.get(layer, 0) + 1


def _link_entity(con: sqlite3.Connection, name: str, etype: Optional[str], prow: int) -> int:
    row = con.execute("SELECT rowid, type FROM entities WHERE name=?", (name,)).fetchone()
    if row is None:
        erow = con.execute("INSERT INTO entities(name, norm, type) VALUES(?,?,?)",
                           (name, normalize_entity(name), etype)).lastrowid
        con.execute("INSERT INTO entities_fts(rowid, name) VALUES(?,?)", (erow, name))
    else:
        erow = row[0]
        if etype and not row[1]:
            con.execute("UPDATE entities SET type=? WHERE rowid=?", (etype, erow))
    con.execute("INSERT OR IGNORE INTO entity_passages VALUES(?,?)", (erow, prow))
    return erow


def _derive_entities(con: sqlite3.Connection) -> None:
    """Triple subjects and objects are entities too (GRIEVER joins on them)."""
    upto = db.get_meta(con, "derived_entities_upto", 0)
    rows = con.execute("SELECT rowid, passage_rowid, subject, object FROM triples WHERE rowid>? ORDER BY rowid",
                       (upto,)).fetchall()
    if not rows:
        return
    with con:
        for _, prow, s, o in rows:
            _link_entity(con, s, None, prow)
            _link_entity(con, o, None, prow)
        db.set_meta(con, "derived_entities_upto", rows[-1][0])


def _derive_partial_triples(con: sqlite3.Connection) -> None:
    """GRIEVER App. A.1: each new triple adds to its (s, p) pair and its inverse (p, o) pair."""
    upto = db.get_meta(con, "derived_partials_upto", 0)
    rows = con.execute("SELECT rowid, passage_rowid, subject, predicate, object FROM triples "
                       "WHERE rowid>? ORDER BY rowid", (upto,)).fetchall()
    if not rows:
        return
    with con:
        for _, prow, s, p, o in rows:
            for entity, complement, inverse in ((s, o, 0), (o, s, 1)):
                content = f"{p} {entity}" if inverse else f"{entity} {p}"
                row = con.execute("SELECT rowid FROM partial_triples WHERE subject=? AND predicate=? AND is_inverse=?",
                                  (entity, p, inverse)).fetchone()
                if row is None:
                    pt = con.execute("INSERT INTO partial_triples(subject, predicate, is_inverse, content) "
                                     "VALUES(?,?,?,?)", (entity, p, inverse, content)).lastrowid
                    con.execute("INSERT INTO partial_triples_fts(rowid, content) VALUES(?,?)", (pt, content))
                else:
                    pt = row[0]
                con.execute("INSERT OR IGNORE INTO partial_triple_links VALUES(?,?,?)", (pt, complement, prow))
            con.execute("INSERT OR IGNORE INTO predicates(name) VALUES(?)", (p,))
        db.set_meta(con, "derived_partials_upto", rows[-1][0])


def _extractor_labels(con: sqlite3.Connection) -> dict[str, list[str]]:
    rows = con.execute("SELECT layer, extractor, count(*) FROM extraction_state GROUP BY layer, extractor")
    out: dict[str, list[str]] = {}
    for layer, tag, n in rows:
        out.setdefault(layer, []).append(f"{tag} ({n} passages)")
    return out


def extracted_passage_ids(path: Path, layers, include_failed: bool = True) -> dict[str, set[str]]:
    """Per layer, the passages a KB (or its unfinished `.building` copy, which is further
    along) already has an extraction for — what a build of `path` would skip."""
    work = db.building_path(path)
    src = work if work.exists() else path
    if not src.exists():
        return {layer: set() for layer in layers}
    con = db.connect(src, readonly=True)
    try:
        status = "" if include_failed else " AND s.status='done'"
        return {layer: {r[0] for r in con.execute(
            "SELECT p.id FROM extraction_state s JOIN passages p ON p.rowid=s.passage_rowid "
            f"WHERE s.layer=?{status}", (layer,))} for layer in layers}
    finally:
        con.close()
