"""HippoRAG 2's graph over a whole KB: phrase nodes and passage nodes, built once per KB.

Offline indexing (the paper's §3, "Offline Indexing" and "Dense-Sparse Integration"): every
triple's subject and object is a phrase node; every passage a passage node. Edges are undirected:
  relation  subject — object of a triple, weighted by how many triples join them;
  context   passage — each phrase its triples name (weight 1);
  synonym   phrase — phrase for each KB same_as pair (weight: the pair's similarity).
The reference code (OSU-NLP-Group/HippoRAG, `add_fact_edges`, `add_passage_edges`,
`add_synonymy_edges`) stores a relation or synonym pair in both directions into an undirected
igraph, so each counts twice against a context edge's once; summing our symmetric rows does the same.

Phrases are keyed case-folded, as the reference lower-cases its OpenIE phrases; a node shows the
first spelling the KB has. The graph is cached per open store and rebuilt when the store's
`graph_version()` moves (passages, triples or same_as appended).
"""
from __future__ import annotations

import threading
import time
import weakref
from dataclasses import dataclass, field

import numpy as np
from scipy import sparse

EDGE_KINDS = ("relation", "context", "synonym")


@dataclass
class PhraseGraph:
    phrases: list[str]                 # phrase node i: its name as first seen
    phrase_index: dict[str, int]       # case-folded phrase → node i
    passages: list[str]                # passage node len(phrases) + j: passage id
    passage_index: dict[str, int]      # passage id → node index
    phrase_passages: np.ndarray        # per phrase: how many passages it occurs in (its triples)
    adjacency: sparse.csr_matrix       # symmetric edge weights, all kinds summed
    kinds: dict[tuple[int, int], str]  # (i, j), i < j → the strongest edge kind between them
    edge_counts: dict[str, int] = field(default_factory=dict)
    version: tuple = ()
    build_ms: float = 0.0

    @property
    def n_nodes(self) -> int:
        return len(self.phrases) + len(self.passages)

    def node_of_phrase(self, name: str):
        return self.phrase_index.get(key(name))

    def is_passage(self, node: int) -> bool:
        return node >= len(self.phrases)

    def label(self, node: int) -> str:
        return self.passages[node - len(self.phrases)] if self.is_passage(node) else self.phrases[node]

    def kind(self, i: int, j: int) -> str:
        return self.kinds.get((min(i, j), max(i, j)), "relation")


def key(name: str) -> str:
    return " ".join(name.split()).casefold()


def build(rows, version: tuple = ()) -> PhraseGraph:
    """The graph from a store's GraphRows (retrieval/store/base.py)."""
    t0 = time.perf_counter()
    phrases: list[str] = []
    phrase_index: dict[str, int] = {}

    def phrase(name: str) -> int:
        k = key(name)
        if k not in phrase_index:
            phrase_index[k] = len(phrases)
            phrases.append(name)
        return phrase_index[k]

    relation: dict[tuple[int, int], float] = {}
    context: set[tuple[int, str]] = set()
    for s, o, pid in rows.triples:
        a, b = phrase(s), phrase(o)
        context.add((a, pid))
        context.add((b, pid))
        if a != b:
            pair = (min(a, b), max(a, b))
            relation[pair] = relation.get(pair, 0.0) + 2.0  # both directions, as the reference stores them
    synonym: dict[tuple[int, int], float] = {}
    for e, a, sim in rows.same_as:
        i, j = phrase_index.get(key(e)), phrase_index.get(key(a))
        if i is None or j is None or i == j:
            continue  # an alias outside the triples' phrases, or two spellings of one node
        pair = (min(i, j), max(i, j))
        synonym[pair] = synonym.get(pair, 0.0) + float(sim)  # the KB lists each pair both ways
    n_ph = len(phrases)
    passages = list(dict.fromkeys(rows.passage_ids))
    passage_index = {p: n_ph + j for j, p in enumerate(passages)}
    counts = np.zeros(n_ph, dtype=np.float64)
    rows_i, cols_j, weights = [], [], []
    kinds: dict[tuple[int, int], str] = {}
    for (a, b), w in relation.items():
        rows_i.append(a), cols_j.append(b), weights.append(w)
        kinds[(a, b)] = "relation"
    n_context = 0
    for a, pid in context:
        node = passage_index.get(pid)
        if node is None:
            continue
        counts[a] += 1
        n_context += 1
        rows_i.append(a), cols_j.append(node), weights.append(1.0)
        kinds[(a, node)] = "context"
    for pair, w in synonym.items():
        rows_i.append(pair[0]), cols_j.append(pair[1]), weights.append(w)
        if relation.get(pair, 0.0) < w:
            kinds[pair] = "synonym"
    n = n_ph + len(passages)
    upper = sparse.coo_matrix((weights, (rows_i, cols_j)), shape=(n, n))
    adjacency = (upper + upper.T).tocsr()
    adjacency.sum_duplicates()
    return PhraseGraph(phrases, phrase_index, passages, passage_index, counts, adjacency, kinds,
                       {"relation": len(relation), "context": n_context, "synonym": len(synonym)}, version,
                       round((time.perf_counter() - t0) * 1000, 1))


_CACHE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def graph_for(store) -> tuple[PhraseGraph, bool]:
    """The store's graph and whether this call built it. One build per KB version: methods asked
    together share it, and a question asked while it builds waits for it instead of building again."""
    version = store.graph_version()
    with _LOCK:
        cached = _CACHE.get(store)
        if cached is not None and cached.version == version:
            return cached, False
        t0 = time.perf_counter()
        graph = build(store.graph_rows(), version)
        graph.build_ms = round((time.perf_counter() - t0) * 1000, 1)  # reading the rows included
        _CACHE[store] = graph
        return graph, True
