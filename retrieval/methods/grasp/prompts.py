"""GRASP's LLM steps (our wording, following §3.2–3.3 and the roles of A.2's prompts):
planner, query rewriting, entity selection, evidence evaluation, answer synthesis."""
from __future__ import annotations

from typing import Any, Sequence

from ...llm import early_stop

_SYSTEM = "You are a careful research agent. You answer only with JSON."

PLAN_SCHEMA = {"type": "object", "properties": {
    "plan": {"type": "string"},
    "sub_questions": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 5}},
    "required": ["plan", "sub_questions"]}
REWRITE_SCHEMA = {"type": "object", "properties": {
    "statement": {"type": "string"}, "keywords": {"type": "array", "items": {"type": "string"}, "maxItems": 8}},
    "required": ["statement", "keywords"]}
SELECT_SCHEMA = {"type": "object", "properties": {
    "selected": {"type": "array", "items": {"type": "integer"}, "maxItems": 5}}, "required": ["selected"]}
# The grammar caps every free-text field: an uncapped observation once ran the reply past its
# token limit mid-string (a failed round and ~60 s lost). An observation is one fact, an answer a
# name or a date, a statement one sentence, so the caps cut only rambling.
OBSERVATION_MAX_CHARS, ANSWER_MAX_CHARS, STATEMENT_MAX_CHARS, KEYWORD_MAX_CHARS = 120, 80, 160, 40
EVALUATE_SCHEMA = {"type": "object", "properties": {
    "observations": {"type": "array", "items": {"type": "string", "maxLength": OBSERVATION_MAX_CHARS},
                     "maxItems": 4},
    "action": {"type": "string", "enum": ["DONE", "QUERY_AGAIN"]},
    "answer": {"type": "string", "maxLength": ANSWER_MAX_CHARS},
    "next_statement": {"type": "string", "maxLength": STATEMENT_MAX_CHARS},
    "next_keywords": {"type": "array", "items": {"type": "string", "maxLength": KEYWORD_MAX_CHARS},
                      "maxItems": 8}},
    "required": ["observations", "action", "answer", "next_statement", "next_keywords"]}
ANSWER_SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}


# Each prompt is [fixed instructions, examples, output format] then the inputs, so the fixed
# part is a token prefix shared by every request of a step and llama.cpp keeps it computed
# (tests/test_prompt_prefix.py).
PLAN_INSTRUCTIONS = (
    "Break the question into the single-fact questions that answer it, in the order they must be asked. "
    "Refer to the answer of an earlier sub-question as #1, #2, … First write a one-line plan.\n"
    'Answer as {"plan": "...", "sub_questions": ["...", ...]}.\n\n'
    "Example (a chain)\nQuestion: What currency is used in the country where the inventor of the Varga "
    "loom was born?\n"
    '{"plan": "find the inventor, then the birth country, then its currency", "sub_questions": '
    '["Who invented the Varga loom?", "In which country was #1 born?", "What currency is used in #2?"]}\n\n'
    "Example (two branches)\nQuestion: Were the director of Blue Orchard and the author of Salt Roads born "
    "in the same city?\n"
    '{"plan": "find each person and their birthplace, then compare", "sub_questions": ["Who directed Blue '
    'Orchard?", "Where was #1 born?", "Who wrote Salt Roads?", "Where was #3 born?"]}\n\n'
    "Example (a comparison)\nQuestion: Which opened first, Harlow Bridge or Kessing Tunnel?\n"
    '{"plan": "find both opening dates and compare", "sub_questions": ["When did Harlow Bridge open?", '
    '"When did Kessing Tunnel open?"]}\n\n')
REWRITE_INSTRUCTIONS = (
    "Turn the sub-question (not the main question) into a declarative search statement — a sentence shaped "
    "like the fact that would answer it, with the answer left open — and a few keywords for exact matching "
    "(names, titles, dates) taken from the sub-question.\n"
    'Answer as {"statement": "...", "keywords": ["...", ...]}.\n\n'
    "Example\nSub-question: In which country was Ada Mireles born?\n"
    '{"statement": "Ada Mireles was born in the country of", "keywords": ["Ada Mireles", "born"]}\n\n')
SELECT_INSTRUCTIONS = (
    "Choose the entities whose facts should be read to answer the sub-question. Pick only those that are "
    'likely to hold the answer or lead to it. Answer as {"selected": [entity numbers]}.\n\n')
EVALUATE_INSTRUCTIONS = (
    "Decide whether the evidence answers the sub-question. Use only the passages and observations below, not "
    "what you know yourself. Write down short observations about the entities that matter. If the evidence "
    'answers it, answer with "action": "DONE" and the answer. If not, and another search is allowed, answer '
    'with "action": "QUERY_AGAIN", a new search statement in "next_statement" and new search keywords in '
    '"next_keywords".\n'
    'Answer as {"observations": ["..."], "action": "DONE" or "QUERY_AGAIN", "answer": "<short answer or empty>", '
    '"next_statement": "<new search statement or empty>", "next_keywords": ["<keyword>", ...]}.\n\n')
SYNTHESIS_INSTRUCTIONS = (
    "Follow the chain of sub-questions and answers step by step and give the final answer to the main "
    'question: a short phrase of at most 6 words, no explanation. Answer as {"answer": "..."}.\n\n')


def plan_messages(question: str) -> list[dict]:
    return [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": f"{PLAN_INSTRUCTIONS}Question: "
                                                                                f"{question}"}]


def _history(history: Sequence[tuple[str, str]]) -> str:
    return "\n".join(f"- {q} → {a}" for q, a in history) or "(none yet)"


def rewrite_messages(question: str, sub_question: str, history: Sequence[tuple[str, str]]) -> list[dict]:
    user = (f"{REWRITE_INSTRUCTIONS}Main question: {question}\nAnswers so far:\n{_history(history)}\n"
            f"Sub-question: {sub_question}")
    return [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": user}]


def select_messages(sub_question: str, candidates: Sequence[tuple[str, Sequence[str]]],
                    observations: Sequence[str]) -> list[dict]:
    lines = "\n".join(f"[{i + 1}] {name} — e.g. {' | '.join(props[:2])}" for i, (name, props) in enumerate(candidates))
    user = (f"{SELECT_INSTRUCTIONS}Sub-question: {sub_question}\n"
            f"What you have observed so far: {'; '.join(observations) or '(nothing)'}\n"
            f"Candidate entities:\n{lines}")
    return [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": user}]


def evaluate_messages(question: str, sub_question: str, history: Sequence[tuple[str, str]],
                      observations: Sequence[str], evidence: Sequence[tuple[str, str]], can_retry: bool) -> list[dict]:
    docs = "\n\n".join(f"Title: {t}\n{x}" for t, x in evidence) or "(no new passage)"
    retry = ("Another search is allowed." if can_retry
             else 'This is the last search: answer with "action": "DONE" and your best answer.')
    user = (f"{EVALUATE_INSTRUCTIONS}Main question: {question}\nAnswers so far:\n{_history(history)}\n"
            f"Sub-question: {sub_question}\nObservations so far: {'; '.join(observations) or '(none)'}\n\n"
            f"New passages:\n{docs}\n\n{retry}")
    return [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": user}]


# A DONE reply is complete once its answer is: what follows is the empty next_statement and
# next_keywords, which the embedded model no longer writes (llm/early_stop.py). An observation
# cannot match this, because a quote inside a JSON string is escaped.
DONE_ANSWERED = r'"action"\s*:\s*"DONE"\s*,\s*"answer"\s*:\s*"(?:[^"\\]|\\.)*"'


def evaluate_schema(max_observations: int) -> dict:
    """EVALUATE_SCHEMA with the observation count capped by the grammar, ending after a DONE's answer."""
    obs = EVALUATE_SCHEMA["properties"]["observations"]
    return early_stop.mark({**EVALUATE_SCHEMA, "properties": {
        **EVALUATE_SCHEMA["properties"], "observations": {**obs, "maxItems": max(1, max_observations)}}},
        DONE_ANSWERED)


def evaluate_max_tokens(max_observations: int) -> int:
    """A token limit the capped reply cannot reach: every field at its cap, ~3 characters a token
    (English runs at ~4), plus the JSON keys and punctuation."""
    chars = (max(1, max_observations) * OBSERVATION_MAX_CHARS + ANSWER_MAX_CHARS + STATEMENT_MAX_CHARS
             + EVALUATE_SCHEMA["properties"]["next_keywords"]["maxItems"] * KEYWORD_MAX_CHARS)
    return chars // 3 + 60


def synthesis_messages(question: str, history: Sequence[tuple[str, str]]) -> list[dict]:
    user = f"{SYNTHESIS_INSTRUCTIONS}Main question: {question}\nChain:\n{_history(history)}"
    return [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": user}]


# --- validators ----------------------------------------------------------------------------------
def parse_rewrite(value: Any) -> dict:
    if not isinstance(value, dict) or not str(value.get("statement") or "").strip():
        raise ValueError('expected {"statement": "<non-empty>", "keywords": [...]}')
    kws = value.get("keywords") or []
    kws = [str(k).strip() for k in (kws if isinstance(kws, list) else [kws]) if str(k).strip()]
    return {"statement": str(value["statement"]).strip(), "keywords": kws}


def parse_selection(n: int):
    def parse(value: Any) -> list[int]:
        items = value.get("selected") if isinstance(value, dict) else value
        if not isinstance(items, list):
            raise ValueError('expected {"selected": [entity numbers]}')
        out = []
        for x in items:
            try:
                i = int(x)
            except (TypeError, ValueError):
                continue
            if 1 <= i <= n and i not in out:
                out.append(i)
        if items and not out:
            raise ValueError(f"no selected number is between 1 and {n}")
        return out
    return parse


def parse_evaluation(value: Any) -> dict:
    if not isinstance(value, dict):
        raise ValueError('expected {"observations", "action", "answer", "next_statement"}')
    action = str(value.get("action") or "").strip().upper().replace(" ", "_")
    if action not in ("DONE", "QUERY_AGAIN"):
        raise ValueError(f'action must be "DONE" or "QUERY_AGAIN", got {value.get("action")!r}')
    obs = value.get("observations") or []
    obs = [str(o).strip() for o in (obs if isinstance(obs, list) else [obs]) if str(o).strip()]
    kws = value.get("next_keywords") or []
    kws = [str(k).strip() for k in (kws if isinstance(kws, list) else [kws]) if str(k).strip()]
    return {"observations": obs, "action": action, "answer": str(value.get("answer") or "").strip(),
            "next_statement": str(value.get("next_statement") or "").strip(), "next_keywords": kws}


def parse_answer(value: Any) -> str:
    a = value.get("answer") if isinstance(value, dict) else value
    if not isinstance(a, (str, int, float)) or not str(a).strip():
        raise ValueError('expected {"answer": "<short answer>"}')
    return str(a).strip()


def statement_keywords(statement: str) -> list[str]:
    """Keywords K for a statement the model gave without any: its content words, in order."""
    from ...store.sqlite import STOPWORDS
    words = [w.strip(".,;:!?\"'()") for w in statement.split()]
    return list(dict.fromkeys(w for w in words if w and w.lower() not in STOPWORDS))[:8]
