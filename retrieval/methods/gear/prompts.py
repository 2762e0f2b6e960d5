"""GEAR's LLM steps: read (eq. 1/4), reason (eq. 6), rewrite (eq. 7).

Our own wording, following the structure of App. I.2: an instruction, one worked example,
the inputs, and the output format. Each step has a JSON schema (sent as response_format,
so llama.cpp constrains decoding to it) and a validator that cleans what comes back.
"""
from __future__ import annotations

from typing import Any, Sequence

from ...core.records import Passage

TRIPLE = tuple[str, str, str]

READ_SCHEMA = {
    "type": "object",
    "properties": {"triples": {"type": "array", "maxItems": 12,
                               "items": {"type": "array", "items": {"type": "string"}, "minItems": 3, "maxItems": 3}}},
    "required": ["triples"],
}
REASON_SCHEMA = {
    "type": "object",
    "properties": {"answerable": {"type": "boolean"}, "answer": {"type": "string"}, "reason": {"type": "string"}},
    "required": ["answerable", "answer", "reason"],
}
REWRITE_SCHEMA = {
    "type": "object", "properties": {"next_question": {"type": "string"}}, "required": ["next_question"],
}

_SYSTEM = "You are a careful research assistant. You answer only with JSON."


def _facts(triples: Sequence[TRIPLE]) -> str:
    return "; ".join(f'("{s}", "{p}", "{o}")' for s, p, o in triples) or "(none yet)"


def _cut(text: str, max_words: int) -> str:
    words = text.split()
    return text if not max_words or len(words) <= max_words else " ".join(words[:max_words]) + " …"


# Every prompt is [fixed instructions, example, output format] and then the inputs, so the
# fixed part is the same token prefix in every request of a step and llama.cpp reuses its
# cached computation instead of reading it again (tests/test_prompt_prefix.py checks this).
READ_INSTRUCTIONS = (
    "Task: collect the facts from the documents that help answer the question. Write each fact as a "
    "knowledge triple [subject, predicate, object]. Use the names as the documents spell them and replace "
    "pronouns with the names they stand for. A question like this is answered in steps (who or what is "
    "meant, then a fact about it), so give the facts for every step, including facts about entities that "
    "your other facts name. If the documents hold only part of what is needed, give the facts they do hold. "
    "If facts already known are listed, do not repeat them; add what is still missing.\n"
    'Answer as {"triples": [[subject, predicate, object], ...]}.\n\n'
    "Example\nQuestion: In which country was the composer of the opera Marisol born?\n"
    'Facts: {"triples": [["Marisol", "composed by", "Tomas Reyna"], ["Tomas Reyna", "born in", "Chile"]]}\n\n'
    "Now the documents and the question.\n")
REASON_INSTRUCTIONS = (
    "Task: decide whether the known facts are enough to answer the question.\n"
    'If they are enough, answer {"answerable": true, "answer": "<the answer>", "reason": "<which facts give it>"}.\n'
    'If not, answer {"answerable": false, "answer": "", "reason": "<what is missing and why>"}.\n\n')
# Profile `local` asks eq. 6 and eq. 7 in one request (one prompt read instead of two).
REASON_REWRITE_INSTRUCTIONS = (
    "Task: decide whether the known facts are enough to answer the question. If not, also write the next, "
    "simpler question to search for: the piece of information that is still missing, using what the facts "
    "already tell you.\n"
    'If they are enough, answer {"answerable": true, "answer": "<the answer>", "reason": "<which facts give it>", '
    '"next_question": ""}.\n'
    'If not, answer {"answerable": false, "answer": "", "reason": "<what is missing>", "next_question": '
    '"<the next question>"}.\n\n'
    "Example\nQuestion: Which river flows through the birthplace of the author of Grey Harbour?\n"
    'Known facts: ("Grey Harbour", "written by", "Ines Calder")\n'
    '{"answerable": false, "answer": "", "reason": "the birthplace of Ines Calder is missing", '
    '"next_question": "Where was Ines Calder born?"}\n\n')
REASON_REWRITE_SCHEMA = {
    "type": "object",
    "properties": {**REASON_SCHEMA["properties"], "next_question": {"type": "string"}},
    "required": ["answerable", "answer", "reason", "next_question"],
}
REWRITE_INSTRUCTIONS = (
    "Task: the known facts do not yet answer the question. Write the next, simpler question to search for, "
    "the piece of information that is still missing. Use what the facts already tell you.\n"
    'Answer as {"next_question": "..."}.\n\n'
    "Example\nQuestion: Which river flows through the birthplace of the author of Grey Harbour?\n"
    'Known facts: ("Grey Harbour", "written by", "Ines Calder")\n'
    "Why not answerable: the facts name the author but not where she was born.\n"
    'Next question: {"next_question": "Where was Ines Calder born?"}\n\n')


def read_messages(question: str, passages: Sequence[Passage], memory: Sequence[TRIPLE], max_words: int,
                  max_triples: int = 8) -> list[dict]:
    docs = "\n\n".join(f"[{i + 1}] {p.title}\n{_cut(p.text, max_words)}" for i, p in enumerate(passages))
    memory_part = f"\nFacts already known:\n{_facts(memory)}\n" if memory else ""
    user = (f"{READ_INSTRUCTIONS}Documents:\n{docs}\n{memory_part}\n"
            f"Question: {question}\nGive at most {max_triples} triples.")
    return [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": user}]


def read_schema(max_triples: int) -> dict:
    """READ_SCHEMA with the triple count capped by the grammar, not only asked for."""
    return {**READ_SCHEMA, "properties": {"triples": {**READ_SCHEMA["properties"]["triples"], "maxItems": max_triples}}}


def reason_messages(question: str, memory: Sequence[TRIPLE]) -> list[dict]:
    user = f"{REASON_INSTRUCTIONS}Question: {question}\nKnown facts: {_facts(memory)}"
    return [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": user}]


def reason_rewrite_messages(question: str, memory: Sequence[TRIPLE]) -> list[dict]:
    user = f"{REASON_REWRITE_INSTRUCTIONS}Question: {question}\nKnown facts: {_facts(memory)}"
    return [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": user}]


def rewrite_messages(question: str, memory: Sequence[TRIPLE], reason: str) -> list[dict]:
    user = f"{REWRITE_INSTRUCTIONS}Question: {question}\nKnown facts: {_facts(memory)}\nWhy not answerable: {reason}"
    return [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": user}]


# --- validators: clean the parsed JSON or raise ValueError naming the problem -----------------
def parse_read(value: Any) -> list[TRIPLE]:
    items = value.get("triples") if isinstance(value, dict) else value
    if not isinstance(items, list):
        raise ValueError('expected {"triples": [[subject, predicate, object], ...]}')
    out: list[TRIPLE] = []
    for t in items:
        if isinstance(t, dict):
            t = [t.get("subject"), t.get("predicate"), t.get("object")]
        if isinstance(t, (list, tuple)) and len(t) == 3 and all(isinstance(x, (str, int, float)) for x in t):
            s, p, o = (str(x).strip() for x in t)
            if s and p and o:
                out.append((s, p, o))
    if items and not out:
        raise ValueError("no item of the list is a [subject, predicate, object] triple of strings")
    return list(dict.fromkeys(out))


def parse_reason(value: Any) -> dict:
    if not isinstance(value, dict) or "answerable" not in value:
        raise ValueError('expected {"answerable": true|false, "answer": ..., "reason": ...}')
    a = value["answerable"]
    if isinstance(a, str):
        if a.strip().lower() not in ("yes", "no", "true", "false"):
            raise ValueError(f"answerable must be true or false, got {a!r}")
        a = a.strip().lower() in ("yes", "true")
    return {"answerable": bool(a), "answer": str(value.get("answer") or "").strip(),
            "reason": str(value.get("reason") or "").strip()}


def parse_reason_rewrite(value: Any) -> dict:
    verdict = parse_reason(value)
    verdict["next_question"] = str(value.get("next_question") or "").strip()
    return verdict


def parse_rewrite(value: Any) -> str:
    q = value.get("next_question") if isinstance(value, dict) else value
    if not isinstance(q, str) or not q.strip():
        raise ValueError('expected {"next_question": "<a non-empty question>"}')
    return q.strip()
