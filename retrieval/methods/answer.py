"""The shared answer step: top-5 passages → a short answer (GEAR App. I.3 structure).

Any method's run can end with it (`Method.run(answer=True)`, `hoptrace ask --answer`,
`hoptrace bench --answer`), so answers — and EM/F1 — compare across methods on equal terms.
"""
from __future__ import annotations

from typing import Any, Optional

from ..trace.model import RankedPassage, Tracer
from .context import Context

ANSWER_SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
TOP_PASSAGES = 5   # GEAR Table 3: QA with the top-5 retrieved passages


# Fixed part first, so every answer request shares it as a cached token prefix.
ANSWER_INSTRUCTIONS = (
    "Read the passages and answer the question. Give a short, definite answer of at most 6 words, with no "
    'explanation. Answer as {"answer": "..."}.\n\n'
    "Example\nTitle: Harbour Lights (film)\nHarbour Lights is a 1931 drama directed by Mara Ellison.\n\n"
    "Title: Mara Ellison\nMara Ellison (1890 – 1958) was a Scottish film director.\n\n"
    'Question: When did the director of Harbour Lights die?\nAnswer: {"answer": "1958"}\n\n')


def answer_messages(question: str, passages: list[tuple[str, str]]) -> list[dict]:
    docs = "\n\n".join(f"Title: {t}\n{x}" for t, x in passages)
    return [{"role": "system", "content": "You answer questions from passages. You answer only with JSON."},
            {"role": "user", "content": f"{ANSWER_INSTRUCTIONS}Passages:\n{docs}\n\nQuestion: {question}"}]


def parse_answer(value: Any) -> str:
    a = value.get("answer") if isinstance(value, dict) else value
    if not isinstance(a, (str, int, float)) or not str(a).strip():
        raise ValueError('expected {"answer": "<a short answer>"}')
    return str(a).strip()


def stage_answer(ctx: Context, tracer: Tracer, question: str, ranked: list[RankedPassage]) -> Optional[str]:
    """Answer from the top-5 passages (GEAR §6.2 / App. I.3)."""
    with tracer.stage("answer", "Answer from the top 5 passages") as st:
        if ctx.llm is None:
            st.status, st.message = "skipped", "no LLM is configured (--llm none), so no answer is generated"
            return None
        top = ctx.store.passages([r.passage_id for r in ranked[:TOP_PASSAGES]])
        ans = ctx.llm.json(st, "answer", answer_messages(question, [(p.title, p.text) for p in top]),
                           ANSWER_SCHEMA, parse_answer, max_tokens=40)
        st.payload = {"answer": ans, "passages": [p.title for p in top]}
        g = st.graph()
        a = g.node("answer", "query", ans)
        for p in top:
            g.edge(g.node(p.id, "passage", p.title), a, "supports")
        return ans
