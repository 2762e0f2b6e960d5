"""SAG's two online LLM calls (our wording, following §3.3 and §3.4): query entity extraction
f_entity (few-shot) and the joint rerank over the candidate events."""
from __future__ import annotations

from typing import Any, Sequence

from ...core.records import SAG_ENTITY_TYPES

ENTITY_SCHEMA = {
    "type": "object",
    "properties": {"entities": {"type": "array", "maxItems": 8, "items": {
        "type": "object", "properties": {"name": {"type": "string"}, "type": {"type": "string",
                                                                             "enum": list(SAG_ENTITY_TYPES)}},
        "required": ["name", "type"]}}},
    "required": ["entities"],
}
RERANK_SCHEMA = {
    "type": "object",
    "properties": {"selected": {"type": "array", "items": {"type": "integer"}, "maxItems": 10}},
    "required": ["selected"],
}


def rerank_schema(k_event: int) -> dict:
    """RERANK_SCHEMA with at most K_event numbers, enforced by the grammar."""
    sel = RERANK_SCHEMA["properties"]["selected"]
    return {**RERANK_SCHEMA, "properties": {"selected": {**sel, "maxItems": max(1, k_event)}}}


_SYSTEM = "You are a precise retrieval assistant. You answer only with JSON."


# Fixed instructions first, inputs last: every request of a step shares the fixed part as a
# token prefix, which llama.cpp keeps computed (tests/test_prompt_prefix.py).
ENTITY_INSTRUCTIONS = (
    "List the entities in the question that a search index could be looked up with: names of people, "
    "places, organisations, groups, works, products, dates and other specific things. Give each one a type "
    f"from: {', '.join(SAG_ENTITY_TYPES)}.\n"
    'Answer as {"entities": [{"name": ..., "type": ...}, ...]}.\n\n'
    "Example 1\nQuestion: Which label released the debut album of the singer born in Tromsø in 1990?\n"
    '{"entities": [{"name": "Tromsø", "type": "location"}, {"name": "1990", "type": "time"}, '
    '{"name": "debut album", "type": "work"}]}\n\n'
    "Example 2\nQuestion: Who chaired the committee that approved the Harlow Dam project?\n"
    '{"entities": [{"name": "Harlow Dam", "type": "product"}, {"name": "committee", "type": "group"}]}\n\n')
RERANK_INSTRUCTIONS = (
    "Below are a question and numbered candidate events, each a short statement with some of the entities it "
    "mentions. Choose the events that together give the evidence needed to answer the question. A multi-hop "
    "question needs a chain: an event that identifies the bridge entity, and an event about that entity. "
    "Events that share entities often belong to the same chain. Order the chosen events from most to least "
    'useful. Answer as {"selected": [event numbers]}.\n\n')


def entity_messages(question: str) -> list[dict]:
    user = f"{ENTITY_INSTRUCTIONS}Question: {question}"
    return [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": user}]


def rerank_messages(question: str, events: Sequence[tuple[str, Sequence[str]]], k_event: int,
                    max_entities: int = 8) -> list[dict]:
    def ents(names: Sequence[str]) -> str:
        return f" (entities: {'; '.join(names[:max_entities])})" if names and max_entities > 0 else ""
    lines = "\n".join(f"[{i + 1}] {summary}{ents(names)}" for i, (summary, names) in enumerate(events))
    user = f"{RERANK_INSTRUCTIONS}Question: {question}\nEvents:\n{lines}\n\nChoose at most {k_event} events."
    return [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": user}]


def parse_entities(value: Any) -> list[tuple[str, str]]:
    items = value.get("entities") if isinstance(value, dict) else value
    if not isinstance(items, list):
        raise ValueError('expected {"entities": [{"name": ..., "type": ...}, ...]}')
    out = []
    for it in items:
        if isinstance(it, str):
            it = {"name": it, "type": "label"}
        if not isinstance(it, dict) or not str(it.get("name") or "").strip():
            continue
        etype = str(it.get("type") or "label").strip().lower()
        out.append((str(it["name"]).strip(), etype if etype in SAG_ENTITY_TYPES else "label"))
    if items and not out:
        raise ValueError("no item has a non-empty entity name")
    return list(dict.fromkeys(out))


def rerank_parser(n_candidates: int, k_event: int):
    """Validator for the rerank answer: numbers in 1..n, de-duplicated, at most k_event."""
    def parse(value: Any) -> list[int]:
        items = value.get("selected") if isinstance(value, dict) else value
        if not isinstance(items, list):
            raise ValueError('expected {"selected": [event numbers]}')
        picked: list[int] = []
        for x in items:
            try:
                i = int(str(x).strip().strip("[]"))
            except ValueError:
                continue
            if 1 <= i <= n_candidates and i not in picked:
                picked.append(i)
        if items and not picked:
            raise ValueError(f"no selected number is between 1 and {n_candidates}")
        return picked[:k_event]
    return parse
