"""The planner's output and `#N` placeholders (§3.2)."""
from __future__ import annotations

import re
from typing import Any

_PLACEHOLDER = re.compile(r"#(\d+)")


def placeholders(sub_question: str) -> list[int]:
    return [int(n) for n in _PLACEHOLDER.findall(sub_question)]


def resolve(sub_question: str, answers: list[str]) -> str:
    """Replace #N with the answer of sub-question N (1-based); an unknown #N stays as it is."""
    def sub(m: re.Match) -> str:
        n = int(m.group(1))
        return answers[n - 1] if 1 <= n <= len(answers) and answers[n - 1] else m.group(0)
    return _PLACEHOLDER.sub(sub, sub_question)


def parse_plan(max_sub_questions: int):
    def parse(value: Any) -> dict:
        if not isinstance(value, dict):
            raise ValueError('expected {"plan": "...", "sub_questions": ["...", ...]}')
        subs = value.get("sub_questions")
        if not isinstance(subs, list) or not subs:
            raise ValueError("sub_questions must be a non-empty list of questions")
        subs = [str(s).strip() for s in subs if str(s).strip()][:max_sub_questions]
        warnings = []
        for i, s in enumerate(subs, start=1):
            if not re.search(r"[^\W\d_]{2,}", s):
                # small models sometimes echo the format ("...") instead of writing questions
                raise ValueError(f"sub-question {i} ({s!r}) is not a question about the input")
            bad = [n for n in placeholders(s) if n >= i]
            if bad:
                # Kept, not rejected: the sub-agent still searches; the unresolved #N stays visible.
                warnings.append(f"sub-question {i} refers to #{bad[0]}, which is not an earlier sub-question")
        return {"plan": str(value.get("plan") or "").strip(), "sub_questions": subs, "warnings": warnings}
    return parse
