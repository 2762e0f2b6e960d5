"""GEAR's settings with the paper's defaults (App. C.2 unless stated)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass
class GearConfig:
    # Base retriever h_base (§3): bm25 | sbert | hybrid (BM25+SBERT by RRF, §6.1), or any other
    # registered method by name (GRIEVER Table 4: `base=griever`), whose stages then appear
    # inside GEAR's trace. The paper's best single-step setup is Hybrid; C.2: the initial
    # retrieval reads passages only.
    base: str = "hybrid"
    # k a method base is called with; None = GEAR's own k. GRIEVER Table 4's footnote: k = 5.
    base_k: Optional[int] = None
    # Eq. 10: also rank the triple index and fuse (passages ∪ triples). C.2 leaves T unused for
    # the initial retrieval, so off by default; passageLink (eq. 11) always uses it.
    base_over_triples: bool = False
    # Single-step (NaiveGE/SyncGE): base returns k passages (C.2, "match the recall threshold");
    # multi-step GEAR: 10 per round (C.2, IRCoT's setting).
    agent_base_k: int = 10
    # Diverse Triple Beam Search, Algorithm 1 / C.2.
    beam_length: int = 2
    beam_width: int = 10
    neighbours_per_beam: int = 100
    gamma: Optional[float] = None          # None → 2 × beam_width (C.2)
    diversity: bool = True                 # False = plain beam search (Table 4 "w/o diversity")
    # Score of a triple sequence = cos(q, sequence) (Algorithm 1). "encode" embeds the sequence
    # text, as the paper does (~1,000 encoder passes a question at width 10 × 100 neighbours,
    # seconds on 2 cores); "vector_mean", ours and the `local` profile's, uses the normalised sum
    # of the stored triple vectors (milliseconds).
    sequence_scoring: str = "encode"
    # Multi-step agent (§5): 4 rounds for MuSiQue, 2 otherwise (C.1); None picks by the KB's dataset.
    max_iterations: Optional[int] = None
    passage_link_k: int = 5                # h_base^k for passageLink (eq. 11); the paper gives no k
    # Ours (App. C.2 is silent on length): the read prompt (eq. 1/4) gets each passage cut to this
    # many words, so 10 passages fit a small model's context and time budget (~2k prompt tokens).
    # 0 = whole passages.
    read_max_words: int = 150
    # How much the read step (eq. 1/4) reads and writes; the paper reads every passage of
    # C'_q / C_q(n) and caps nothing. The `local` profile lowers these (methods/profiles.py).
    read_passages: Optional[int] = None    # read only the first n passages of each list; None = all
    max_triples: int = 8                   # triples a read may return (the grammar enforces it)
    reread: bool = True                    # False: a later round skips passages an earlier round read
    #                                        (their facts are in the gist memory already)
    read_expanded_max: Optional[int] = None  # passages graph expansion added that are read; None = all
    reason_rewrite_joint: bool = False     # True: one request for reason (eq. 6) and rewrite (eq. 7); if it
    #                                        writes no next query, a separate rewrite request follows
    k_rrf: int = 60
