"""Writing the question of a candidate: by template from its triples (the LLM only rephrases,
never seeing the bridge entity), or by the LLM from the passages themselves.

Our own prompts; every request sends a JSON schema (the small embedded models need one).
"""
from __future__ import annotations

from .pairs import Candidate

# template: the triples' template, rephrased by the LLM; llm: the LLM writes from the passages;
# template-only: the template itself, no LLM writing (the checks still ask the LLM).
MODES = ("template", "llm", "template-only")
PROMPT_VERSION = "qgen-1"

QUESTION_SCHEMA = {"type": "object", "properties": {"question": {"type": "string", "maxLength": 240}},
                   "required": ["question"]}
QA_SCHEMA = {"type": "object", "properties": {"question": {"type": "string", "maxLength": 240},
                                              "answer": {"type": "string", "maxLength": 80}},
             "required": ["question", "answer"]}
ANSWER_SCHEMA = {"type": "object", "properties": {"answer": {"type": "string", "maxLength": 80}},
                 "required": ["answer"]}


def template(c: Candidate) -> str:
    """The question written from the triples alone, each bridge entity replaced by what leads to it."""
    if c.kind == "comparison":
        x, y = c.facts
        return f"Which {x.predicate} first: {x.title} or {y.title}?"
    lead = f"the one that {c.facts[0].subject} {c.facts[0].predicate}"
    for f in c.facts[1:-1]:
        lead = f"the one that {lead} {f.predicate}"
    return f"{lead[0].upper()}{lead[1:]} {c.facts[-1].predicate} what?"


def masked_facts(c: Candidate) -> list[str]:
    """The hops as statements with the bridges as [X], [Y] and the answer as [ANSWER]."""
    if c.kind == "comparison":
        return [f"{f.subject} {f.predicate} [a year]." for f in c.facts]
    names = ["[X]", "[Y]"]
    out, prev = [], None
    for i, f in enumerate(c.facts):
        subject = f.subject if prev is None else prev
        obj = names[i] if i < len(c.facts) - 1 else "[ANSWER]"
        out.append(f"{subject} {f.predicate} {obj}.")
        prev = obj
    return out


def rephrase_messages(c: Candidate) -> list[dict]:
    """The LLM sees the template and the facts with the bridges masked: it cannot name what it never saw."""
    facts = "\n".join(f"Fact {i + 1}: {f}" for i, f in enumerate(masked_facts(c)))
    if c.kind == "comparison":
        ask = "Write one fluent question asking which of the two came first."
    else:
        ask = ("Write one fluent question whose answer is [ANSWER]. Describe [X]" + (" and [Y]" if c.hops > 2 else "")
               + " only through the facts, never as [X], and keep every name the facts give.")
    return [
        {"role": "system", "content": "You turn a clumsy templated question into one fluent English question with "
                                      "exactly the same meaning. Do not add facts, names or hints."},
        {"role": "user", "content": f"{facts}\nTemplate: {template(c)}\n{ask}\n"
                                    "Reply with JSON: {\"question\": \"...\"}"}]


def compose_messages(c: Candidate, passages: dict[str, tuple[str, str]]) -> list[dict]:
    """The LLM writes question and answer from the passages; it is told the bridge so it can hide it."""
    blocks = "\n\n".join(f"Passage {i + 1} ({passages[pid][0]}): {passages[pid][1]}" for i, pid in enumerate(c.gold))
    if c.kind == "comparison":
        task = ("Write one question that compares the two passages' subjects and can only be answered by reading "
                "both (for example, which came first). The answer is one of the two subjects' names.")
    else:
        hidden = " and ".join(f'"{b}"' for b in c.bridges)
        task = (f"The passages are linked through {hidden}. Write one question that needs every passage in order: "
                f"describe {hidden} only through the passage that mentions it, never by name, and ask for a fact "
                f"that only the last passage states. The answer is a short phrase copied from the last passage.")
    return [{"role": "system", "content": "You write multi-hop reading-comprehension questions."},
            {"role": "user", "content": f"{blocks}\n\n{task}\nReply with JSON: "
                                        "{\"question\": \"...\", \"answer\": \"...\"}"}]


def answer_messages(question: str, title: str, text: str) -> list[dict]:
    """The shortcut probe: one passage alone, answer or `unknown`."""
    return [{"role": "system", "content": "Answer the question from the passage alone, with a short phrase copied "
                                          "from it. If the passage alone does not answer it, reply unknown."},
            {"role": "user", "content": f"Passage ({title}): {text}\n\nQuestion: {question}\n"
                                        "Reply with JSON: {\"answer\": \"...\"}"}]


def clean_question(value) -> str:
    q = " ".join(str(value.get("question", "")).split()) if isinstance(value, dict) else ""
    if len(q) < 10:
        raise ValueError("the question is empty or too short")
    if any(mark in q for mark in ("[X]", "[Y]", "ANSWER", "[a year]")):
        raise ValueError("the question still holds a placeholder ([X], [Y] or [ANSWER]); describe it in words")
    return q if q.endswith("?") else q + "?"
