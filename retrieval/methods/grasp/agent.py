"""GRASP's stages: the planner (§3.2), one sub-agent per sub-question (§3.3, steps ❶–❹),
and synthesis. Each LLM step and each retrieval step is its own stage."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from ...store.base import Filter
from ...trace.model import Tracer
from ..context import Context
from .config import GraspConfig
from .plan import parse_plan, placeholders, resolve
from .prompts import (
    ANSWER_SCHEMA,
    PLAN_SCHEMA,
    REWRITE_SCHEMA,
    SELECT_SCHEMA,
    evaluate_max_tokens,
    evaluate_messages,
    evaluate_schema,
    parse_answer,
    parse_evaluation,
    parse_rewrite,
    parse_selection,
    plan_messages,
    rewrite_messages,
    select_messages,
    synthesis_messages,
)
from .scoring import entity_scores, rank_vote, sigma


@dataclass
class SubAgentState:
    """The compact observation state O_i and the nodes already visited (§3.3)."""
    observations: list[str] = field(default_factory=list)
    visited_entities: set[int] = field(default_factory=set)
    visited_propositions: set[int] = field(default_factory=set)
    evidence: list[str] = field(default_factory=list)          # passage ids returned, in order
    votes: dict[str, float] = field(default_factory=dict)      # every passage RankVote scored


def stage_plan(ctx: Context, tracer: Tracer, question: str, cfg: GraspConfig, propositions: str = "") -> dict:
    """Planner (§3.2): one call → a short plan and ordered sub-questions with #N placeholders."""
    with tracer.stage("plan", "Plan: sub-questions with #N dependencies") as st:
        plan = ctx.llm.json(st, "plan", plan_messages(question), PLAN_SCHEMA, parse_plan(cfg.max_sub_questions),
                            max_tokens=300)
        st.payload = {"plan": plan["plan"], "sub_questions": plan["sub_questions"],
                      "depends_on": {i + 1: placeholders(q) for i, q in enumerate(plan["sub_questions"])}}
        if plan["warnings"]:
            st.payload["warnings"] = plan["warnings"]
        if propositions:
            st.payload["propositions_in_this_kb"] = propositions
        g = st.graph()
        root = g.node("q", "question", question)
        for i, sq in enumerate(plan["sub_questions"], start=1):
            node = g.node(f"sq{i}", "subquestion", f"{i}. {sq}")
            deps = placeholders(sq)
            for n in deps:
                g.edge(f"sq{n}", node, "depends_on", f"#{n}")
            if not deps:
                g.edge(root, node, "decomposes")
    return plan


def stage_rewrite(ctx: Context, tracer: Tracer, question: str, sub_q: str, history: list[tuple[str, str]],
                  i: int) -> dict:
    """Resolve #N from the history, then rewrite into a declarative statement + keywords (§3.3)."""
    with tracer.stage(f"sub{i}_rewrite", f"Sub-agent {i}: resolve #N, rewrite to a search statement") as st:
        resolved = resolve(sub_q, [a for _, a in history])
        out = ctx.llm.json(st, "rewrite", rewrite_messages(question, resolved, history), REWRITE_SCHEMA,
                           parse_rewrite, max_tokens=120)
        st.payload = {"sub_question": sub_q, "resolved": resolved, **out}
    return {"resolved": resolved, **out}


def stage_search(ctx: Context, tracer: Tracer, statement: str, keywords: list[str], state: SubAgentState,
                 cfg: GraspConfig, i: int, it: int) -> tuple[np.ndarray, list[tuple[int, float]], dict[int, list[int]]]:
    """Step ❶: hybrid search over propositions (eq. 1), top m, aggregated to entities (eq. 2), top k.
    Also returns each candidate's propositions (read for its degree), which steps ❷ and ❸ use."""
    with tracer.stage(f"sub{i}_search_{it}", f"Sub-agent {i}, round {it}: propositions → candidate entities") as st:
        vec = ctx.embedder.encode_query(statement).vector
        flt = Filter.make(ids_not_in=state.visited_propositions) if state.visited_propositions else None
        bm = {int(h.id): h.score for h in ctx.store.bm25("propositions", " ".join(keywords) or statement,
                                                          cfg.search_depth, flt)}
        kn = [int(h.id) for h in ctx.store.knn("propositions", vec, cfg.search_depth, flt)]
        pool = list(dict.fromkeys(kn + list(bm)))
        cos = dict(zip(pool, ctx.store.similarities("propositions", vec, pool))) if pool else {}
        scored = sorted(((p, sigma(float(cos[p]), bm.get(p, 0.0), cfg.lam)) for p in pool), key=lambda x: -x[1])
        top = dict(scored[: cfg.m])
        links = ctx.store.entities_of_propositions(list(top))
        linked = {e for es in links.values() for e in es}
        ents = linked - state.visited_entities
        revisits = linked & state.visited_entities
        props_of = ctx.store.propositions_of_entities(ents)
        degree = {e: len(ps) for e, ps in props_of.items()}
        links = {p: [e for e in es if e in ents] for p, es in links.items()}
        scores = entity_scores(top, links, degree)
        cands = sorted(scores.items(), key=lambda kv: -kv[1])[: cfg.k_entities]
        names = {e: n for e, n, _ in ctx.store.entities([e for e, _ in cands] + sorted(revisits))}
        texts = {p.id: p.text for p in ctx.store.propositions(list(top)[:15])}
        st.payload = {"statement": statement, "keywords": keywords, "bm25_query": " ".join(keywords) or statement,
                      "lambda": cfg.lam, "m": cfg.m,
                      "visited_filter": {"propositions_excluded": len(state.visited_propositions),
                                         "entities_removed": [names.get(e, str(e)) for e in sorted(revisits)]},
                      "propositions": [{"proposition": texts.get(p, str(p)), "sigma": round(s, 4),
                                        "cos": round(float(cos[p]), 4), "bm25": round(bm.get(p, 0.0), 3)}
                                       for p, s in list(top.items())[:15]],
                      "candidates": [{"entity": names.get(e, str(e)), "score": round(s, 4), "degree": degree.get(e, 0)}
                                     for e, s in cands]}
        g = st.graph()
        for e, s in cands:
            en = g.node(f"e:{e}", "entity", names.get(e, str(e)), round(s, 4))
            for p, es in links.items():
                if e in es and p in texts:
                    g.edge(g.node(f"p:{p}", "proposition", texts[p][:80], round(top[p], 4)), en, "mentions")
        if not cands:
            st.empty("no unvisited entity is linked to the top propositions")
    return vec, cands, {e: props_of.get(e, []) for e, _ in cands}


def stage_select(ctx: Context, tracer: Tracer, sub_q: str, cands: list[tuple[int, float]],
                 props_of: dict[int, list[int]], state: SubAgentState, cfg: GraspConfig, i: int, it: int) -> list[int]:
    """Step ❷: the sub-agent chooses which candidate entities to traverse (§3.3)."""
    with tracer.stage(f"sub{i}_select_{it}", f"Sub-agent {i}, round {it}: select entities") as st:
        names = {e: n for e, n, _ in ctx.store.entities([e for e, _ in cands])}
        if not cfg.entity_selection:
            chosen = [e for e, _ in cands]
            st.payload = {"how": "all candidates (A.1.7 ablation: no entity selection)"}
        elif not cands:
            chosen = []
        else:
            samples = {p.id: p.text for p in ctx.store.propositions([ps[0] for ps in props_of.values() if ps])}
            shown = [(names.get(e, str(e)), [samples[props_of[e][0]]] if props_of.get(e) and props_of[e][0] in samples
                      else []) for e, _ in cands]
            picked = ctx.llm.json(st, "select entities", select_messages(sub_q, shown, state.observations),
                                  SELECT_SCHEMA, parse_selection(len(cands)), max_tokens=40)
            chosen = [cands[j - 1][0] for j in picked]
            st.payload = {"how": "LLM selection"}
        st.payload["selected"] = [names.get(e, str(e)) for e in chosen]
        state.visited_entities.update(chosen)
        if not chosen:
            st.empty("no entity was selected")
    return chosen


def stage_vote(ctx: Context, tracer: Tracer, vec: np.ndarray, chosen: list[int], props_of: dict[int, list[int]],
               state: SubAgentState, cfg: GraspConfig, i: int, it: int) -> list[str]:
    """Step ❸: RankVote over the selected entities' propositions → top d passages (§3.3)."""
    with tracer.stage(f"sub{i}_vote_{it}", f"Sub-agent {i}, round {it}: RankVote → top {cfg.d} passages") as st:
        reachable = {p for e in chosen for p in props_of.get(e, [])}
        props = reachable - state.visited_propositions
        seen_before = sorted(reachable & state.visited_propositions)
        props_l = sorted(props)
        sims = ctx.store.similarities("propositions", vec, props_l) if props_l else []
        ranked = [props_l[j] for j in np.argsort(-np.asarray(sims), kind="stable")] if props_l else []
        records = {p.id: p for p in ctx.store.propositions(ranked)}
        votes = rank_vote(ranked, {p: records[p].passage_id for p in ranked}, uniform=cfg.vote == "uniform")
        sim_of = dict(zip(props_l, sims))
        state.visited_propositions.update(ranked)
        for pid, s in votes:
            state.votes[pid] = state.votes.get(pid, 0.0) + s
        new = [pid for pid, _ in votes if pid not in state.evidence][: cfg.d]
        state.evidence.extend(new)
        titles = {p.id: p.title for p in ctx.store.passages([pid for pid, _ in votes[:10]])}
        st.payload = {"vote": cfg.vote, "propositions": len(ranked),
                      "passages": [{"passage_id": pid, "title": titles.get(pid, ""), "votes": round(s, 4),
                                    "returned": pid in new} for pid, s in votes[:10]],
                      # R(p) and w_j = 1/(1 + R(p)) of §3.3 (w_j = 1 under the uniform ablation)
                      "ranked_propositions": [
                          {"R": r, "w": 1.0 if cfg.vote == "uniform" else round(1.0 / (1 + r), 4),
                           "cos": round(float(sim_of[p]), 4), "proposition": records[p].text,
                           "passage_id": records[p].passage_id} for r, p in enumerate(ranked[:30], start=1)],
                      "visited_filter": {"propositions_removed": len(seen_before),
                                         "examples": [x.text for x in ctx.store.propositions(seen_before[:5])]}}
        g = st.graph()
        for p in ranked[:20]:
            pn = g.node(f"p:{p}", "proposition", records[p].text[:80])
            g.edge(pn, g.node(records[p].passage_id, "passage", titles.get(records[p].passage_id, "")), "from_passage")
        if not new:
            st.empty("the selected entities lead to no new passage")
    return new


def stage_evaluate(ctx: Context, tracer: Tracer, question: str, sub_q: str, history: list[tuple[str, str]],
                   state: SubAgentState, new: list[str], cfg: GraspConfig, i: int, it: int) -> dict:
    """Step ❹: observe the new passages, then DONE (answer) or QUERY_AGAIN (new statement) (§3.3)."""
    with tracer.stage(f"sub{i}_evaluate_{it}", f"Sub-agent {i}, round {it}: DONE or QUERY_AGAIN?") as st:
        passages = ctx.store.passages(new)
        cut = [(p.title, " ".join(p.text.split()[: cfg.evidence_max_words])) for p in passages]
        out = ctx.llm.json(st, "evaluate", evaluate_messages(question, sub_q, history, state.observations, cut,
                                                             it < cfg.max_iterations),
                           evaluate_schema(cfg.max_observations), parse_evaluation,
                           max_tokens=evaluate_max_tokens(cfg.max_observations))
        state.observations.extend(out["observations"])
        st.payload = {**out, "observation_state": list(state.observations)}
    return out


def stage_synthesis(ctx: Context, tracer: Tracer, question: str, history: list[tuple[str, str]]) -> str:
    """Synthesis (§3.3): the final answer from the chain of (sub-question, answer) pairs."""
    with tracer.stage("synthesis", "Synthesis: final answer from the chain") as st:
        ans = ctx.llm.json(st, "synthesis", synthesis_messages(question, history), ANSWER_SCHEMA, parse_answer,
                           max_tokens=40)
        st.payload = {"chain": [{"sub_question": q, "answer": a} for q, a in history], "answer": ans}
        g = st.graph()
        prev: Optional[str] = None
        for n, (q, a) in enumerate(history, start=1):
            node = g.node(f"sq{n}", "subquestion", f"{q} → {a}")
            if prev:
                g.edge(prev, node, "then")
            prev = node
        if prev:
            g.edge(prev, g.node("answer", "query", ans), "answers")
    return ans
