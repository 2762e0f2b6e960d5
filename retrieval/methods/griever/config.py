"""GRIEVER's settings. Values the paper states carry their source; the rest are ours, marked."""
from __future__ import annotations

from dataclasses import dataclass

from ...core.errors import ConfigError

CHOICES = {"same_as_scope": ("retrieved", "all"), "same_as_match": ("record", "alias"),
           "join_entities": ("scored", "every"), "shortlist_index": ("partial_triples", "triples"),
           "first_retriever": ("composed", "rrf_hybrid"), "final_ranking": ("retrieval+paths", "paths")}


@dataclass
class GrieverConfig:
    n_iterations: int = 2         # n_i, Algorithm 1; §5.2 "two iterations (a single query re-writing step)"
    c: int = 10                   # Composed: dense over the top k·c BM25 hits (§4.2.2); c unstated, ours
    t_max: int = 20               # partial triples shortlisted, Algorithm 2; unstated, ours
    max_ngram: int = 12           # longest query n-gram for the entity matcher (§4.3); unstated, ours:
    #                               titles run long ("Alexander and the Terrible, Horrible, No Good, Very Bad Day")
    k_rrf: int = 60               # RRF constant (Cormack et al., 2009), as in the RRFHybrid baseline
    rrf_depth_factor: int = 2     # each ranking in an RRF contributes depth_factor·k hits; ours
    split_clauses: bool = True    # §4.2.1
    # §4.2.3: same_as records filtered by already-retrieved passages ("all" = no filter)
    same_as_scope: str = "retrieved"
    same_as_match: str = "record"     # §4.2.3 / App. A.1: a record passes if its passages meet R, then all its
    #                                   aliases count ("alias" = ours, earlier: only aliases that occur in R)
    join_entities: str = "scored"     # Algorithm 1: E_i from score_triples — the join side of each scored triple,
    #                                   within Algorithm 2's E_j ("every" = ours, earlier: every scored triple's
    #                                   other entity, whether in E_j or not)
    join_min_score: float = 0.0       # E_i only from triples scoring at least this (eq. 2); the paper gives none
    rewrite_min_score: float = 0.5    # §4.5: rewrite only if the entity match is at least this; ours
    predicate_min_score: float = 0.3  # §4.5: relation words are removed only if matched at least this well; ours
    final_ranking: str = "paths"      # §4.4: the passage score alone. "retrieval+paths" = ours (§4.2.2 allows
    #                                   it): cosine + path_weight × passage score, the `local` profile's
    #                                   choice, since §4.4 alone loses to Composed with LLM-free triples
    #                                   (docs/griever.md)
    path_weight: float = 0.25         # with "retrieval+paths": the §4.4 score's weight beside the cosine; ours,
    #                                   chosen on the bundled HotpotQA and 2Wiki questions (docs/griever.md)
    # Ablations of Table 3
    shortlist_index: str = "partial_triples"  # "triples" = w/ full_triples
    shortlist: bool = True                    # False = w/o shortlisting (every triple of R_i is scored)
    first_retriever: str = "composed"         # "rrf_hybrid" = w/o composed_retriever

    def check(self) -> None:
        for name, allowed in CHOICES.items():
            if getattr(self, name) not in allowed:
                raise ConfigError(f"griever {name} must be one of {allowed}, got {getattr(self, name)!r}")
        if not self.path_weight >= 0:
            raise ConfigError(f"griever path_weight must be a number ≥ 0, got {self.path_weight!r}")
