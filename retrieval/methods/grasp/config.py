"""GRASP's settings with the paper's defaults (A.1.5 unless stated)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class GraspConfig:
    lam: float = 0.2                 # λ in eq. 1: σ = cos + λ·log(1 + BM25)
    m: int = 50                      # top propositions scored by eq. 1
    k_entities: int = 5              # candidate entities from eq. 2 shown to the sub-agent
    d: int = 2                       # passages returned per traversal by RankVote
    max_iterations: int = 2          # DONE / QUERY_AGAIN rounds per sub-agent
    entity_selection: bool = True    # A.1.7 ablation: False traverses every candidate entity
    vote: str = "rankvote"           # A.1.7 ablation: "uniform" gives every proposition weight 1
    max_sub_questions: int = 5       # guard on the planner's output
    # Candidate pool for eq. 1: BM25 and kNN each read this many propositions deep, then σ ranks
    # their union (a proposition outside BM25's top list counts BM25 = 0).
    search_depth: int = 100
    # Ours (the paper is silent on length): passages shown to the sub-agent are cut to this many words.
    evidence_max_words: int = 180
    max_observations: int = 4        # ours: observations the evaluate step may write (the grammar caps it)
