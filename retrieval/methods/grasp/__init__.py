"""GRASP: a planner and sub-agents over the entity / proposition / passage graph (`grasp`).

  plan → for each sub-question i: rewrite (resolve #N, statement + keywords) → up to 2 rounds of
  [search (eq. 1–2) → select entities → RankVote → evaluate: DONE | QUERY_AGAIN] → synthesis

The ranking is the evidence passages in the order the sub-agents returned them, then every
other passage RankVote scored, by accumulated votes. GRASP needs an LLM: without one it says
so in its first stage and returns nothing.
"""
from __future__ import annotations

from ...store.base import Hit
from ...trace.model import RankedPassage, Tracer
from ..base import Method, final_stage, ranked_from_hits
from .agent import (
    SubAgentState,
    stage_evaluate,
    stage_plan,
    stage_rewrite,
    stage_search,
    stage_select,
    stage_synthesis,
    stage_vote,
)
from .checks import check_vote, proposition_source
from .config import GraspConfig
from .prompts import statement_keywords
from .single_pass import GraspSinglePass


class Grasp(Method):
    name, title, Config = "grasp", "GRASP (planner + sub-agents)", GraspConfig
    layers = ("passages", "propositions", "entities")
    vectors = ("propositions",)
    uses_llm = True
    k_dependent = False  # the agents fetch d passages a round whatever k is

    def retrieve(self, question: str, k: int, tracer: Tracer) -> list[RankedPassage]:
        cfg, ctx = self.config, self.ctx
        check_vote(cfg)
        if ctx.llm is None:
            with tracer.stage("needs_llm", "GRASP needs an LLM") as st:
                st.status = "skipped"
                st.message = ("GRASP plans, selects entities and judges evidence with an LLM, and none is "
                              "configured (--llm none). Choose --llm local (the embedded model) or an endpoint.")
            return final_stage(tracer, [], question, "no LLM: nothing retrieved")
        plan = stage_plan(ctx, tracer, question, cfg, proposition_source(ctx))
        history: list[tuple[str, str]] = []
        states: list[SubAgentState] = []
        for i, sub_q in enumerate(plan["sub_questions"], start=1):
            state = SubAgentState()
            states.append(state)
            rw = stage_rewrite(ctx, tracer, question, sub_q, history, i)
            statement, keywords, answer = rw["statement"], rw["keywords"], ""
            for it in range(1, cfg.max_iterations + 1):
                vec, cands, props_of = stage_search(ctx, tracer, statement, keywords, state, cfg, i, it)
                chosen = stage_select(ctx, tracer, rw["resolved"], cands, props_of, state, cfg, i, it)
                new = stage_vote(ctx, tracer, vec, chosen, props_of, state, cfg, i, it)
                verdict = stage_evaluate(ctx, tracer, question, rw["resolved"], history, state, new, cfg, i, it)
                answer = verdict["answer"] or answer
                if verdict["action"] == "DONE" or not verdict["next_statement"]:
                    break
                # §3.3 QUERY_AGAIN restarts step ❶, whose hybrid search takes both s_i and K: both
                # are rewritten. Keywords the model left out come from the new statement itself.
                statement = verdict["next_statement"]
                keywords = verdict["next_keywords"] or statement_keywords(statement)
            history.append((rw["resolved"], answer or "unknown"))
        tracer.answer = stage_synthesis(ctx, tracer, question, history)
        evidence = list(dict.fromkeys(p for s in states for p in s.evidence))
        votes: dict[str, float] = {}
        for s in states:
            for pid, v in s.votes.items():
                votes[pid] = votes.get(pid, 0.0) + v
        rest = [p for p, _ in sorted(votes.items(), key=lambda kv: -kv[1]) if p not in set(evidence)]
        order = (evidence + rest)[:k]
        hits = [Hit(p, round(1.0 - n / max(1, len(order)), 4)) for n, p in enumerate(order)]
        return final_stage(tracer, ranked_from_hits(ctx, hits), question,
                           "evidence passages in the order returned, then the other RankVote passages")



__all__ = ["Grasp", "GraspConfig", "GraspSinglePass"]
