"""§4.2.1 Relative clause splitting."""
from __future__ import annotations

import re
from dataclasses import dataclass

# Relative-clause connectors (§4.2.1 names where/who as examples; the rest are the usual
# English relative pronouns and adverbs).
CONNECTORS = ("where", "who", "whom", "whose", "which", "that", "when")
_WORD = re.compile(r"\w+(?:['’]\w+)*")


@dataclass(frozen=True)
class SubQuery:
    text: str
    start: int      # character offset in the question: the sub-query is question[start:]
    connector: str  # "" for the whole question


def split_relative_clauses(question: str) -> list[SubQuery]:
    """§4.2.1: the whole question, then one sub-query from each connector to the end.

    A connector opening the question ("When did …", "Who is …") asks, it does not relate,
    so it is not a split point.
    """
    subs = [SubQuery(question, 0, "")]
    for m in _WORD.finditer(question):
        word = m.group(0).lower()
        if word in CONNECTORS and m.start() > 0 and question[:m.start()].strip():
            subs.append(SubQuery(question[m.start():], m.start(), word))
    return subs
