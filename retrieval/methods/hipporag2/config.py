"""HippoRAG 2's settings. Values the paper or its reference code states carry their source
(the code: OSU-NLP-Group/HippoRAG, src/hipporag/utils/config_utils.py `BaseConfig`); the rest are
ours, marked."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class HippoRAG2Config:
    linking_top_k: int = 5               # facts linked to the query, and phrase seeds kept (`linking_top_k`)
    passage_node_weight: float = 0.05    # passage seeds: min-max dense score × this (`passage_node_weight`)
    damping: float = 0.5                 # PPR damping (`damping`; the paper's §3 "Online Retrieval")
    # Recognition memory: the LLM keeps the linked facts that bear on the question (the paper's
    # "Recognition Memory"); off, every linked fact seeds the graph (variant `hipporag2_nofilter`).
    recognition_memory: bool = True
    # Ours: facts asked of the triple index before duplicates are merged. The reference's fact
    # store holds each (s, p, o) once; a KB stores a triple once per passage that states it.
    fact_candidates: int = 25
    # Ours: how much of the run the trace draws (the ranking is never cut by these).
    trace_phrases: int = 12              # phrase nodes listed by PPR mass
    trace_paths: int = 5                 # ranked passages whose strongest path from a seed is drawn


@dataclass
class HippoRAG2NoFilterConfig(HippoRAG2Config):
    recognition_memory: bool = False
