"""Scoring an extractor against a silver reference: the demo's GPT-3.5 OpenIE triples.

Matching, per passage (docs/llm-indexing.md, "Silver reference"):
- an entity matches when the normalised names (normalize_entity: case, accents, punctuation,
  leading article) are equal, or one's words are all within the other's (a reference "Carl
  Rogers" is found by "psychologist Carl Rogers");
- a triple matches a reference triple when its subject and object match as entities (in
  either order, since "A was founded by B" and "B founded A" state one fact) and the cosine
  of the two predicates' embeddings is at least `predicate_threshold` (0.5 with MiniLM);
- each reference triple is matched at most once, greedily by predicate similarity.

entity recall = reference entities matched / reference entities; triple recall = reference
triples matched / reference triples; precision = extracted triples that matched / extracted.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Callable, Iterable, Optional, Sequence

import numpy as np

from ...core.records import Extraction, Triple
from ..normalize import normalize_entity

PREDICATE_THRESHOLD = 0.5


def same_entity(a: str, b: str) -> bool:
    na, nb = normalize_entity(a), normalize_entity(b)
    if not na or not nb:
        return False
    if na == nb:
        return True
    wa, wb = set(na.split()), set(nb.split())
    return wa <= wb or wb <= wa


@dataclass
class SilverScore:
    passages: int
    reference_entities: int
    entities_found: int
    reference_triples: int
    extracted_triples: int
    reference_matched: int
    extracted_matched: int

    @property
    def entity_recall(self) -> float:
        return self.entities_found / self.reference_entities if self.reference_entities else 0.0

    @property
    def triple_recall(self) -> float:
        return self.reference_matched / self.reference_triples if self.reference_triples else 0.0

    @property
    def precision(self) -> float:
        return self.extracted_matched / self.extracted_triples if self.extracted_triples else 0.0

    def as_dict(self) -> dict:
        return {**asdict(self), "entity_recall": round(self.entity_recall, 4),
                "triple_recall": round(self.triple_recall, 4), "precision": round(self.precision, 4)}


def match_triples(extracted: Sequence[Triple], reference: Sequence[Triple],
                  predicate_similarity: Callable[[list[str], list[str]], np.ndarray],
                  threshold: float = PREDICATE_THRESHOLD) -> list[tuple[int, int, float]]:
    """(extracted index, reference index, predicate cosine) for each one-to-one match."""
    candidates = []
    pairs = [(i, j) for i, t in enumerate(extracted) for j, r in enumerate(reference)
             if (same_entity(t.subject, r.subject) and same_entity(t.object, r.object))
             or (same_entity(t.subject, r.object) and same_entity(t.object, r.subject))]
    if not pairs:
        return []
    sims = predicate_similarity([extracted[i].predicate for i, _ in pairs], [reference[j].predicate for _, j in pairs])
    for (i, j), s in zip(pairs, sims):
        if s >= threshold:
            candidates.append((float(s), i, j))
    used_e, used_r, out = set(), set(), []
    for s, i, j in sorted(candidates, reverse=True):
        if i not in used_e and j not in used_r:
            used_e.add(i)
            used_r.add(j)
            out.append((i, j, round(s, 4)))
    return out


def score(extracted: Iterable[Extraction], reference: dict[str, Extraction],
          predicate_similarity: Callable[[list[str], list[str]], np.ndarray],
          threshold: float = PREDICATE_THRESHOLD) -> SilverScore:
    """Score extractions against the reference extractions of the same passages."""
    sc = SilverScore(0, 0, 0, 0, 0, 0, 0)
    for ex in extracted:
        ref = reference.get(ex.passage_id)
        if ref is None or ex.failed:
            continue
        sc.passages += 1
        names = [e.name for e in ex.entities] + [x for t in ex.triples for x in (t.subject, t.object)]
        ref_entities = list(dict.fromkeys(e.name for e in ref.entities))
        sc.reference_entities += len(ref_entities)
        sc.entities_found += sum(1 for r in ref_entities if any(same_entity(r, n) for n in names))
        matches = match_triples(ex.triples, ref.triples, predicate_similarity, threshold)
        sc.reference_triples += len(ref.triples)
        sc.extracted_triples += len(ex.triples)
        sc.reference_matched += len({j for _, j, _ in matches})
        sc.extracted_matched += len({i for i, _, _ in matches})
    return sc


def embedding_similarity(embedder) -> Callable[[list[str], list[str]], np.ndarray]:
    """Row-wise cosine of two equally long lists of phrases, with a cache (predicates repeat)."""
    cache: dict[str, np.ndarray] = {}

    def vecs(texts: list[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in cache]
        if missing:
            for t, v in zip(missing, embedder.encode(missing)):
                cache[t] = np.asarray(v, dtype=np.float32)
        return np.stack([cache[t] for t in texts])

    def sim(a: list[str], b: list[str]) -> np.ndarray:
        va, vb = vecs(a), vecs(b)
        return (va * vb).sum(1) / (np.linalg.norm(va, axis=1) * np.linalg.norm(vb, axis=1) + 1e-9)

    return sim


def kb_extractions(path) -> list[Extraction]:
    """A built KB's triples and entities per passage, as the extractions that made them: so an
    index already built (by any extractor, on any sample) is scored without extracting again.
    Passages whose triples layer failed are marked failed (the scorer skips them)."""
    from ...core.records import EntityLink
    from ..db import connect

    con = connect(path, readonly=True)
    try:
        out = {pid: Extraction(pid) for (pid,) in con.execute("SELECT id FROM passages ORDER BY rowid")}
        for pid, s, p, o in con.execute("SELECT p.id, t.subject, t.predicate, t.object FROM triples t "
                                        "JOIN passages p ON p.rowid = t.passage_rowid ORDER BY t.rowid"):
            out[pid].triples.append(Triple(s, p, o, pid))
        for pid, name, etype in con.execute("SELECT p.id, e.name, e.type FROM entity_passages ep "
                                            "JOIN entities e ON e.rowid = ep.entity_rowid "
                                            "JOIN passages p ON p.rowid = ep.passage_rowid"):
            out[pid].entities.append(EntityLink(name, etype))
        for pid, reason in con.execute("SELECT p.id, s.reason FROM extraction_state s JOIN passages p "
                                       "ON p.rowid = s.passage_rowid WHERE s.layer = 'triples' "
                                       "AND s.status = 'failed'"):
            out[pid].failed = reason or "failed"
    finally:
        con.close()
    return list(out.values())


def _covered(dataset: str):
    """The dataset's passages that its OpenIE file covers, in corpus order, and that file as an
    extractor (the silver reference)."""
    from ...core.errors import ConfigError
    from ...corpus import load_corpus
    from ...corpus.datasets import get_dataset
    from .openie_import import OpenIEImport

    ds = get_dataset(dataset)
    if ds.openie is None:
        raise ConfigError(f"dataset {dataset} ships no OpenIE file to use as the silver reference")
    reference_extractor = OpenIEImport(ds.openie)
    return [p for p in load_corpus(ds.corpus) if p.id in reference_extractor.by_id], reference_extractor


def reference_for(passage_ids: Iterable[str], dataset: str = "musique",
                  first: Optional[int] = None) -> dict[str, Extraction]:
    """The silver reference extractions of those passages that the dataset's OpenIE file covers;
    with `first`, only among the first that many it covers (the passages `evaluate` would take)."""
    covered, reference_extractor = _covered(dataset)
    wanted = set(passage_ids)
    passages = [p for p in covered[:first] if p.id in wanted]
    return {ex.passage_id: ex for ex in reference_extractor.extract(passages)}


def evaluate(extractor, n_passages: int, embedder, dataset: str = "musique") -> tuple[SilverScore, float]:
    """Run `extractor` on the first n passages of a bundled dataset that ships an OpenIE file
    and score it against that file. Returns the score and the seconds extraction took."""
    import time

    covered, reference_extractor = _covered(dataset)
    passages = covered[:n_passages]
    reference = {ex.passage_id: ex for ex in reference_extractor.extract(passages)}
    t0 = time.perf_counter()
    extracted = list(extractor.extract(passages))
    seconds = time.perf_counter() - t0
    return score(extracted, reference, embedding_similarity(embedder)), seconds
