"""The multi-step agent's LLM steps (§5.2 reason, §5.3 rewrite)."""
from __future__ import annotations

from ...trace.model import Tracer
from ..context import Context
from .prompts import (
    REASON_REWRITE_SCHEMA,
    REASON_SCHEMA,
    REWRITE_SCHEMA,
    TRIPLE,
    parse_reason,
    parse_reason_rewrite,
    parse_rewrite,
    reason_messages,
    reason_rewrite_messages,
    rewrite_messages,
)


def stage_reason(ctx: Context, tracer: Tracer, question: str, memory: list[TRIPLE], n: int,
                 joint: bool = False) -> dict:
    """reason(G^(n), q) → answerability a^(n) and reasoning r^(n) (eq. 6); with `joint`, the
    same request also writes eq. 7's next query, which stage_rewrite then takes."""
    with tracer.stage(f"reason_{n}", f"Reason: answerable after round {n}?") as st:
        if joint:
            verdict = ctx.llm.json(st, "reason + rewrite", reason_rewrite_messages(question, memory),
                                   REASON_REWRITE_SCHEMA, parse_reason_rewrite, max_tokens=200)
        else:
            verdict = ctx.llm.json(st, "reason", reason_messages(question, memory), REASON_SCHEMA, parse_reason,
                                   max_tokens=200)
        st.payload = {"round": n, **verdict}
    return verdict


def stage_rewrite(ctx: Context, tracer: Tracer, question: str, memory: list[TRIPLE], reason: str, n: int,
                  written: str = "") -> str:
    """rewrite(G^(n), q, r^(n)) → the next query q^(n+1) (eq. 7)."""
    with tracer.stage(f"rewrite_{n}", f"Rewrite: query for round {n + 1}") as st:
        if written:  # profile `local`: the reason request already wrote it (config reason_rewrite_joint)
            nxt = written
            st.payload = {"round": n, "reason": reason, "next_query": nxt,
                          "how": "written by the reason request (one call for eq. 6 and eq. 7)"}
        else:
            nxt = ctx.llm.json(st, "rewrite", rewrite_messages(question, memory, reason), REWRITE_SCHEMA,
                               parse_rewrite, max_tokens=100)
            st.payload = {"round": n, "reason": reason, "next_query": nxt}
        g = st.graph()
        g.edge(g.node("q", "question", question), g.node(f"q{n + 1}", "query", nxt), "rewritten", f"q({n + 1})")
    return nxt
