"""SAG's settings with the paper's defaults (§4.4 unless stated)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class SagConfig:
    entity_threshold: float = 0.9   # §3.3 Path A: entity vector similarity for alias expansion
    event_threshold: float = 0.4    # §3.3 Path B: τ for direct event recall
    k_seed: int = 50                # initial seed recall budget (per path)
    hops: int = 1                   # H, query-time expansion hops (Table 4: 0 disables expansion)
    frontier_budget: int = 50       # entity frontier pruning budget per hop
    k_cand: int = 100               # candidate events passed to the reranker (Table 5)
    k_event: int = 5                # events kept by the rerank (Table 7)
    k_direct: int = 5               # chunks from direct query-vector retrieval (Table 7)
    k_out: int = 10                 # chunks returned
    # "llm": one joint selection over the candidate set (§3.4); "none": no rerank, Ê's coarse
    # cosine order is kept (variant `sag_no_rerank`; Table 6's Qwen3-Reranker has no offline
    # package, so this is a lower bound for it, not a reproduction).
    reranker: str = "llm"
    near_miss_margin: float = 0.1   # ours: the trace lists entities/events this far below a threshold
    # Ours (§3.4 is silent on length): the rerank prompt lists each candidate with its entities;
    # long events are cut to this many words so 100 candidates fit a small model's context (~4k tokens).
    event_max_words: int = 30
    rerank_entities: int = 8        # ours: entity names listed with each event in the rerank prompt
