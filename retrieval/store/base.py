"""The search store interface every backend implements (SQLite now, Elasticsearch later).

Methods talk only to this: BM25, dense kNN and hybrid search over named indices with
filters, plus lookups and exact joins between layers. It is shaped after what
Elasticsearch does natively (GRIEVER App. A.1): an index has text fields for BM25, one
`dense_vector`, and keyword fields that filters test, so an ES backend maps each call
to one request with no change to method code.

Indices and their keyword fields (what `Filter.any_of` may name):
  passages         ids: passage id (str)   fields: subjects, objects, triple_entities (either), entities
  partial_triples  ids: rowid (int)         fields: subject, objects, passage_ids
  triples          ids: rowid (int)         fields: subject, object, passage_ids
  entities         ids: rowid (int)         fields: name
  predicates       ids: rowid (int)         fields: name
  events           ids: rowid (int)         fields: entities, passage_ids
  propositions     ids: rowid (int)         fields: entities, passage_ids
"""
from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Hashable, Iterable, Iterator, Optional, Sequence

import numpy as np

from ..core.errors import ConfigError
from ..core.records import Event, PartialTriple, Passage, Proposition, Question, SameAs, Triple

INDICES = ("passages", "partial_triples", "triples", "entities", "predicates", "events", "propositions")
FIELDS = {
    "passages": ("subjects", "objects", "triple_entities", "entities"),
    "partial_triples": ("subject", "objects", "passage_ids"),
    "triples": ("subject", "object", "passage_ids"),
    "entities": ("name",),
    "predicates": ("name",),
    "events": ("entities", "passage_ids"),
    "propositions": ("entities", "passage_ids"),
}


@dataclass(frozen=True)
class Filter:
    """A conjunction: id in `ids_in` (if given), id not in `ids_not_in`, and for each
    (field, values) in `any_of`, the item's field holds at least one of the values."""
    ids_in: Optional[frozenset] = None
    ids_not_in: frozenset = frozenset()
    any_of: tuple[tuple[str, frozenset], ...] = ()

    @classmethod
    def make(cls, ids_in: Optional[Iterable] = None, ids_not_in: Iterable = (),
             **any_of: Iterable[str]) -> "Filter":
        return cls(frozenset(ids_in) if ids_in is not None else None, frozenset(ids_not_in),
                   tuple((k, frozenset(v)) for k, v in any_of.items()))

    def describe(self) -> dict:
        """JSON-able summary for traces (sizes and a few examples, not whole id lists)."""
        def few(values: frozenset) -> dict:
            return {"n": len(values), "examples": sorted(map(str, values))[:5]}
        out: dict = {}
        if self.ids_in is not None:
            out["ids_in"] = few(self.ids_in)
        if self.ids_not_in:
            out["ids_not_in"] = few(self.ids_not_in)
        for name, values in self.any_of:
            out[f"{name}_any_of"] = few(values)
        return out


@dataclass(frozen=True)
class Hit:
    id: Hashable
    score: float


@dataclass(frozen=True)
class GraphRows:
    """What a whole-KB graph is built from (HippoRAG 2's phrase/passage graph): every passage, every
    triple as (subject, object, passage id), every same_as pair as (entity, alias, similarity)."""
    passage_ids: list[str]
    triples: list[tuple[str, str, str]]
    same_as: list[tuple[str, str, float]]


@dataclass
class StoreInfo:
    backend: str
    location: str
    embed_model: str
    embed_dim: int
    counts: dict[str, int] = field(default_factory=dict)
    meta: dict = field(default_factory=dict)
    # per layer × extractor × status: {"layer", "extractor", "status", "passages", "reasons": [a few]}
    extraction: list[dict] = field(default_factory=list)


def rrf(rankings: Sequence[Sequence[Hit]], k: int, k_rrf: int = 60) -> list[Hit]:
    """Reciprocal Rank Fusion (Cormack et al., 2009): score = Σ 1/(k_rrf + rank)."""
    scores: dict[Hashable, float] = {}
    for ranking in rankings:
        for rank, hit in enumerate(ranking, start=1):
            scores[hit.id] = scores.get(hit.id, 0.0) + 1.0 / (k_rrf + rank)
    best = sorted(scores.items(), key=lambda kv: -kv[1])[:k]
    return [Hit(i, s) for i, s in best]


@dataclass
class Statement:
    """One statement or request a store sent to its backend (SQL for SQLite, a query body for ES)."""
    statement: str
    params: str
    rows: int
    ms: float


_recording = threading.local()


class SearchStore(ABC):
    # --- audit --------------------------------------------------------------------------
    @contextmanager
    def recording(self) -> Iterator[list[Statement]]:
        """Collect every statement this thread sends to the backend inside the block (SAG §3.5's
        auditable chain shows them in the trace)."""
        log: list[Statement] = []
        outer = getattr(_recording, "log", None)
        _recording.log = log
        try:
            yield log
        finally:
            _recording.log = outer
            if outer is not None:
                outer.extend(log)

    @staticmethod
    def _record(statement: str, params: Callable[[], str], rows: int, t0: float) -> None:
        """`params` is rendered only while a recording is open: queries outside one pay nothing."""
        log = getattr(_recording, "log", None)
        if log is not None:
            log.append(Statement(" ".join(statement.split()), params()[:300], rows,
                                 round((time.perf_counter() - t0) * 1000, 3)))

    # --- search ---------------------------------------------------------------------
    @abstractmethod
    def bm25(self, index: str, query: str, k: int, filter: Optional[Filter] = None) -> list[Hit]: ...

    @abstractmethod
    def knn(self, index: str, vector: np.ndarray, k: int, filter: Optional[Filter] = None) -> list[Hit]: ...

    def hybrid(self, index: str, query: str, vector: np.ndarray, k: int, filter: Optional[Filter] = None,
               depth: Optional[int] = None, k_rrf: int = 60) -> list[Hit]:
        """RRF of BM25 and kNN, each taken `depth` deep (default 2k)."""
        depth = depth or 2 * k
        return rrf([self.bm25(index, query, depth, filter), self.knn(index, vector, depth, filter)], k, k_rrf)

    @abstractmethod
    def similarities(self, index: str, vector: np.ndarray, ids: Sequence[Hashable]) -> np.ndarray:
        """Cosine similarity of `vector` to each listed item (the Composed retriever's dense step)."""

    @abstractmethod
    def vectors(self, index: str, ids: Sequence[Hashable]) -> np.ndarray: ...

    # --- lookups and joins -------------------------------------------------------------
    @abstractmethod
    def passages(self, ids: Sequence[str]) -> list[Passage]: ...

    @abstractmethod
    def triples(self, ids: Sequence[int]) -> list[Triple]:
        """Triples by id, in the order asked (unknown ids are left out)."""

    @abstractmethod
    def triples_of_passages(self, passage_ids: Iterable[str]) -> list[Triple]: ...

    @abstractmethod
    def triples_of_entities(self, names: Iterable[str]) -> list[Triple]: ...

    @abstractmethod
    def partial_triples(self, ids: Sequence[int]) -> list[PartialTriple]: ...

    @abstractmethod
    def partial_triples_by_key(self, keys: Iterable[tuple[str, str, bool]]) -> list[PartialTriple]:
        """Partial triples by (entity, predicate, is_inverse)."""

    @abstractmethod
    def partial_triple_freqs(self, keys: Iterable[tuple[str, str, bool]]) -> dict[tuple[str, str, bool], int]:
        """freq(e, p) of GRIEVER eq. (1): how many triples share each (entity, predicate, is_inverse) pair."""

    @abstractmethod
    def same_as(self, names: Iterable[str], passage_ids: Optional[Iterable[str]] = None,
                match: str = "record") -> list[SameAs]:
        """Aliases of `names`. With `passage_ids`, GRIEVER §4.2.3's filter: `match="record"` keeps
        a same_as record (entity, alias) whose passages — where either name was extracted — meet
        `passage_ids`, and then gives its alias whatever passage it occurs in; `match="alias"`
        (ours, the earlier behaviour) keeps only aliases that themselves occur in `passage_ids`."""

    @abstractmethod
    def entities(self, ids: Sequence[int]) -> list[tuple[int, str, Optional[str]]]: ...

    @abstractmethod
    def entity_ids(self, names: Iterable[str]) -> dict[str, int]: ...

    @abstractmethod
    def entities_by_norm(self, norms: Iterable[str]) -> dict[str, list[int]]:
        """Entity ids per normalised name (SAG §3.2: string normalisation instead of merging)."""

    @abstractmethod
    def predicate_ids(self, names: Iterable[str]) -> dict[str, int]: ...

    @abstractmethod
    def events(self, ids: Sequence[int]) -> list[Event]: ...

    @abstractmethod
    def events_of_entities(self, entity_ids: Iterable[int]) -> dict[int, list[int]]:
        """entity id → ids of the events linked to it (SAG's entity→event join)."""

    @abstractmethod
    def entities_of_events(self, event_ids: Iterable[int]) -> dict[int, list[int]]:
        """event id → ids of its entities (SAG's reverse join)."""

    @abstractmethod
    def propositions(self, ids: Sequence[int]) -> list[Proposition]: ...

    @abstractmethod
    def propositions_of_entities(self, entity_ids: Iterable[int]) -> dict[int, list[int]]: ...

    @abstractmethod
    def entities_of_propositions(self, proposition_ids: Iterable[int]) -> dict[int, list[int]]: ...

    @abstractmethod
    def questions(self) -> list[Question]: ...

    def graph_rows(self) -> GraphRows:
        """The rows of the whole KB a graph method builds its graph from, read once per KB."""
        raise ConfigError(f"the {type(self).__name__} backend cannot list the whole KB's triples for a graph")

    def graph_version(self) -> tuple:
        """Changes whenever graph_rows() would: a graph built from an older version is rebuilt."""
        counts = self.info().counts
        return tuple(counts.get(k, 0) for k in ("passages", "triples", "same_as"))

    @abstractmethod
    def info(self) -> StoreInfo: ...

    def close(self) -> None:  # noqa: B027  (optional: a store that holds nothing open has nothing to close)
        pass


SAME_AS_MATCH = ("record", "alias")


def same_as_records(rows: Iterable[tuple[str, str, float]], seen_in: dict[str, list[str]],
                    passage_ids: Optional[Iterable[str]], match: str) -> list[SameAs]:
    """Apply the same_as passage filter to (entity, alias, similarity) rows, given the passages
    each name was extracted from. A record's passages are its two names' passages (App. A.1:
    "passage ids from which these synonyms are extracted"); SameAs.passage_ids lists where the
    alias itself occurs, so a trace can show an alias found only outside the retrieved set."""
    if match not in SAME_AS_MATCH:
        raise ConfigError(f"same_as match must be one of {SAME_AS_MATCH}, got {match!r}")
    allowed = set(passage_ids) if passage_ids is not None else None
    out = []
    for e, a, sim in rows:
        alias_pids = seen_in.get(a, [])
        record = list(dict.fromkeys(seen_in.get(e, []) + alias_pids))
        if allowed is not None:
            evidence = alias_pids if match == "alias" else record
            if not any(p in allowed for p in evidence):
                continue
        out.append(SameAs(e, a, float(sim), alias_pids))
    return out
