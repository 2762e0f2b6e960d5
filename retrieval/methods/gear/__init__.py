"""GEAR (Graph-enhanced Agent for Retrieval), as three methods:

  naivege  base retrieval → all triples of C'_q as seeds → beam search → RRF     (§6.2, no LLM)
  syncge   base retrieval → read → tripleLink → beam search → RRF (eq. 1–3)       (§4)
  gear     rounds of [base(q^(n)) → read with gist memory → tripleLink → beam
           search → RRF] → reason → rewrite, then passageLink + RRF (eq. 4–9)       (§5)

With no LLM configured, syncge and gear say so in a `fallback` stage and run NaiveGE.
"""
from __future__ import annotations

from abc import abstractmethod
from typing import Optional

from ...store.base import Hit
from ...trace.model import RankedPassage, Tracer
from ..base import Method, final_stage, ranked_from_hits
from ..context import Context
from .agent import stage_reason, stage_rewrite
from .config import GearConfig
from .expand import stage_beam_search, stage_beams_to_passages, stage_rrf
from .prompts import TRIPLE
from .retrieve import stage_base, stage_passage_link
from .sync import stage_gist_memory, stage_read, stage_triple_link


def expansion(ctx: Context, tracer: Tracer, query: str, query_vec, base: list[Hit], seeds, cfg: GearConfig, k: int,
              suffix: str = "") -> list[Hit]:
    """Graph expansion from seed triples, then C_q = RRF(C̃_q, C'_q) (§4.2, eq. 3)."""
    graph, beams = stage_beam_search(ctx, tracer, query, query_vec, seeds, cfg, name=f"beam_search{suffix}")
    expanded = stage_beams_to_passages(ctx, tracer, graph, beams, name=f"passage_map{suffix}")
    return stage_rrf(ctx, tracer, [expanded, base], ["beam passages C̃_q", "base C'_q"], k, cfg.k_rrf,
                     f"rrf{suffix}", "RRF(beam passages, base passages)", "3")


def max_rounds(ctx: Context, cfg: GearConfig) -> int:
    """C.1: 4 rounds for MuSiQue (2–4 hops), 2 for HotpotQA and 2Wiki (2 hops)."""
    if cfg.max_iterations:
        return cfg.max_iterations
    meta = ctx.store.info().meta
    name = str(meta.get("dataset") or meta.get("name") or "").lower()
    return 4 if ("musique" in name or name == "demo") else 2


def stage_fallback(tracer: Tracer, method: str) -> None:
    """§6.2: without an LLM, graph expansion seeds from all triples of C'_q (NaiveGE)."""
    with tracer.stage("fallback", "No LLM: NaiveGE instead") as st:
        st.status = "skipped"
        st.message = (f"{method} needs an LLM to read passages; none is configured (--llm none), so this run "
                      f"is NaiveGE: all triples of the base passages seed the beam search (GEAR §6.2)")


def stage_stop(tracer: Tracer, n: int, why: str) -> None:
    """Termination (§5.2) when the agent makes no progress: say why the loop ended early."""
    with tracer.stage(f"stop_{n}", f"Stop after round {n}") as st:
        st.status, st.message = "skipped", why


class NaiveGE(Method):
    name, title, Config = "naivege", "NaiveGE (GEAR, no LLM)", GearConfig
    layers = ("passages", "triples")
    vectors = ("passages", "triples")   # the base's hybrid over passages, and over triples (eq. 10/11)

    @classmethod
    def units_for(cls, config) -> tuple[str, ...]:
        """Its own units and, where its base is another method (GRIEVER Table 4), that method's."""
        from ..registry import METHODS, root_method

        base = METHODS.get(root_method(config.base))   # None for bm25 / sbert / hybrid
        own = super().units_for(config)
        return tuple(dict.fromkeys(own + (base.units_for(base.Config()) if base else ())))

    def retrieve(self, question: str, k: int, tracer: Tracer) -> list[RankedPassage]:
        return final_stage(tracer, ranked_from_hits(self.ctx, self.naive(question, k, tracer)), question,
                           "RRF(beam passages, base passages)")

    def naive(self, question: str, k: int, tracer: Tracer) -> list[Hit]:
        cfg = self.config
        base, qvec = stage_base(self.ctx, tracer, question, k, cfg.base, cfg.base_over_triples, base_k=cfg.base_k)
        with tracer.stage("seeds", "Seeds: all triples of the base passages (NaiveGE)") as st:
            seeds = self.ctx.store.triples_of_passages([h.id for h in base])
            st.payload = {"seeds": [t.text for t in seeds[:100]], "n": len(seeds)}
            if not seeds:
                st.empty("the base passages have no extracted triple")
        return expansion(self.ctx, tracer, question, qvec, base, seeds, cfg, k)


class _ReadingGE(NaiveGE):
    """GEAR's LLM-reading methods: without an LLM they say so and run NaiveGE (§6.2)."""
    uses_llm = True

    def retrieve(self, question: str, k: int, tracer: Tracer) -> list[RankedPassage]:
        if self.ctx.llm is None:
            stage_fallback(tracer, self.name)
            return super().retrieve(question, k, tracer)
        return self.read_and_expand(question, k, tracer)

    @abstractmethod
    def read_and_expand(self, question: str, k: int, tracer: Tracer) -> list[RankedPassage]:
        """The method proper, with an LLM to read passages."""


class SyncGE(_ReadingGE):
    name, title = "syncge", "SyncGE (GEAR single-step)"

    def read_and_expand(self, question: str, k: int, tracer: Tracer) -> list[RankedPassage]:
        cfg = self.config
        base, qvec = stage_base(self.ctx, tracer, question, k, cfg.base, cfg.base_over_triples, base_k=cfg.base_k)
        proximal = stage_read(self.ctx, tracer, question, base, [], cfg)
        seeds = stage_triple_link(self.ctx, tracer, proximal)
        fused = expansion(self.ctx, tracer, question, qvec, base, seeds, cfg, k)
        return final_stage(tracer, ranked_from_hits(self.ctx, fused), question, "RRF(beam passages, base passages)")


class Gear(_ReadingGE):
    name, title = "gear", "GEAR (multi-step agent)"
    # Every round retrieves a fixed 10 passages (C.2) whatever k is; k only cuts the final RRF.
    k_dependent = False

    def read_and_expand(self, question: str, k: int, tracer: Tracer) -> list[RankedPassage]:
        cfg = self.config
        rounds = max_rounds(self.ctx, cfg)
        memory: list[TRIPLE] = []
        per_round: list[list[Hit]] = []
        query = question
        asked = {question.strip().lower()}
        read: Optional[set] = None if cfg.reread else set()  # passage ids read so far (reread = False)
        for n in range(1, rounds + 1):
            base, qvec = stage_base(self.ctx, tracer, query, cfg.agent_base_k, cfg.base,
                                    cfg.base_over_triples, name=f"base_{n}", title=f"Round {n} base retrieval",
                                    base_k=cfg.base_k)
            proximal = stage_read(self.ctx, tracer, question, base, memory, cfg, name=f"read_{n}", already_read=read)
            seeds = stage_triple_link(self.ctx, tracer, proximal, name=f"triple_link_{n}")
            expanded = expansion(self.ctx, tracer, query, qvec, base, seeds, cfg, cfg.agent_base_k, f"_{n}")
            per_round.append(expanded)
            # Eq. 4 reads the graph-expanded list C_q(n). Its base part was just read (eq. 1 and
            # eq. 4 coincide there, §5.1), so only the passages the expansion added are read again,
            # with what is already known passed in as facts.
            seen = {h.id for h in base}
            added = [h for h in expanded if h.id not in seen]
            extra = stage_read(self.ctx, tracer, question, added, memory + proximal, cfg, name=f"read_expanded_{n}",
                               what="passages graph expansion added", already_read=read,
                               limit=cfg.read_expanded_max) if added else []
            memory = stage_gist_memory(tracer, memory, proximal + extra, n)
            joint = cfg.reason_rewrite_joint
            verdict = stage_reason(self.ctx, tracer, question, memory, n, joint=joint)
            if verdict["answerable"] or n == rounds:
                break
            nxt = stage_rewrite(self.ctx, tracer, question, memory, verdict["reason"], n,
                                written=verdict.get("next_question", "") if joint else "")
            if nxt.strip().lower() in asked:
                stage_stop(tracer, n, f"the rewritten query repeats an earlier one ({nxt!r}); another round "
                                      f"would retrieve the same passages")
                break
            asked.add(nxt.strip().lower())
            query = nxt
        linked = stage_passage_link(self.ctx, tracer, memory, cfg.passage_link_k, cfg.base, cfg.k_rrf)
        labels = [f"passageLink({' '.join(t)})" for t in memory] + [f"C_q({i + 1})" for i in range(len(per_round))]
        fused = stage_rrf(self.ctx, tracer, linked + per_round, labels, k, cfg.k_rrf, "final_rrf",
                          "RRF(linked passages, every round's passages)", "9")
        return final_stage(tracer, ranked_from_hits(self.ctx, fused), question,
                           "RRF of passageLink lists and per-round lists (eq. 9)")


__all__ = ["Gear", "GearConfig", "NaiveGE", "SyncGE"]
