"""GRASP's standard single-pass retrieval (§5, Table 2): no planner, no sub-agents, no LLM.

  search (eq. 1–2, the original question Q as statement) → every candidate entity → RankVote → top k

Table 2 uses this setting to compare GRASP's graph with HippoRAG2's at a strict k = 5. With no
agent there is nobody to select entities (step ❷), so every candidate is traversed. It is also
the cheap way to compare retrieval units (Table 2's propositions vs sentences rows) on every
question of a KB.
"""
from __future__ import annotations

from dataclasses import replace

from ...store.base import Hit
from ...trace.model import RankedPassage, Tracer
from ..base import Method, final_stage, ranked_from_hits
from .agent import SubAgentState, stage_search, stage_select, stage_vote
from .checks import check_vote, proposition_source
from .config import GraspConfig
from .prompts import statement_keywords


class GraspSinglePass(Method):
    name, title, Config = "grasp_single_pass", "GRASP single pass (Table 2, no LLM)", GraspConfig
    layers = ("passages", "propositions", "entities")
    vectors = ("propositions",)
    uses_llm = False

    def retrieve(self, question: str, k: int, tracer: Tracer) -> list[RankedPassage]:
        check_vote(self.config)
        # No agent: no selection (step ❷), and one traversal returns all k passages.
        cfg = replace(self.config, entity_selection=False, d=k)
        with tracer.stage("single_pass", "Single pass: the question itself is the search statement") as st:
            keywords = statement_keywords(question)
            st.payload = {"statement": question, "keywords": keywords, "k": k, "vote": cfg.vote,
                          "propositions_in_this_kb": proposition_source(self.ctx),
                          "why": "GRASP Table 2's standard single-pass setting: no decomposition, "
                                 "no entity selection, RankVote over the candidates' propositions"}
        state = SubAgentState()
        vec, cands, props_of = stage_search(self.ctx, tracer, question, keywords, state, cfg, 1, 1)
        chosen = stage_select(self.ctx, tracer, question, cands, props_of, state, cfg, 1, 1)
        stage_vote(self.ctx, tracer, vec, chosen, props_of, state, cfg, 1, 1)
        order = [p for p, _ in sorted(state.votes.items(), key=lambda kv: -kv[1])][:k]
        hits = [Hit(p, round(state.votes[p], 4)) for p in order]
        return final_stage(tracer, ranked_from_hits(self.ctx, hits), question, "passages by RankVote votes")
