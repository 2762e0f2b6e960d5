"""HippoRAG 2's one online LLM call, recognition memory (our wording, following the paper's
"Recognition Memory"): keep the linked facts that bear on the question."""
from __future__ import annotations

from typing import Any, Sequence

_SYSTEM = "You are a precise retrieval assistant. You answer only with JSON."

# Fixed instructions first, the question and facts last: requests share the fixed part as a
# token prefix, which the local model keeps computed.
FILTER_INSTRUCTIONS = (
    "Below are a question and numbered facts that a search found for it, each as subject | relation | object. "
    "Keep the facts that help answer the question: facts about something the question names, and facts that "
    "lead from it to the thing the answer depends on. Leave out facts about other things, even if they share "
    "a word with the question. Order the kept facts from most to least useful. "
    'Answer as {"kept": [fact numbers]}; answer {"kept": []} if none helps.\n\n')


def filter_schema(n_facts: int) -> dict:
    return {"type": "object",
            "properties": {"kept": {"type": "array", "items": {"type": "integer"}, "maxItems": max(1, n_facts)}},
            "required": ["kept"]}


def filter_messages(question: str, facts: Sequence[tuple[str, str, str]]) -> list[dict]:
    lines = "\n".join(f"[{i + 1}] {s} | {p} | {o}" for i, (s, p, o) in enumerate(facts))
    user = f"{FILTER_INSTRUCTIONS}Question: {question}\nFacts:\n{lines}"
    return [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": user}]


def filter_parser(n_facts: int):
    """Fact numbers in 1..n, de-duplicated, in the model's order; an empty list is a valid answer."""
    def parse(value: Any) -> list[int]:
        items = value.get("kept") if isinstance(value, dict) else value
        if not isinstance(items, list):
            raise ValueError('expected {"kept": [fact numbers]}')
        kept: list[int] = []
        for x in items:
            try:
                i = int(str(x).strip().strip("[]"))
            except ValueError:
                continue
            if 1 <= i <= n_facts and i not in kept:
                kept.append(i)
        if items and not kept:
            raise ValueError(f"no kept number is between 1 and {n_facts}")
        return kept
    return parse
