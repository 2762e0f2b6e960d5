"""Ending a reply as soon as what is left of it is known to be empty.

GRASP's evaluate step (§3.3, step ❹) replies DONE with an answer, or QUERY_AGAIN with a new
search statement and keywords. One schema holds both shapes, so a DONE reply goes on to write
`, "next_statement": "", "next_keywords": []}`: ~12 tokens, ~0.7 s on 2 cores, that say
nothing. (Two schema alternatives would end it too, but they change what the model may write
after the answer, and a prompt that shows both shapes changed its decisions: docs/profiles.md.)

A task marks its schema with a pattern (`mark`). The embedded server's reply is streamed, and
the stream is closed once the text written so far matches the pattern (llama-server stops
decoding when its client goes: server.py). Every token before that is the one the model writes
without the mark: the same grammar and the same decodes, so the same greedy choices. The token
that completed the match may carry more than the pattern needs (Qwen writes `", "` as one token),
so the backend keeps the text up to the end of the match and closes the object (`close`). The parsed value lacks the
fields that were never written, which the caller reads with their empty defaults. Endpoints
never see the mark (compact.unmark): they write the whole reply, which parses to the same value.
"""
from __future__ import annotations

import json
import re
from typing import Optional

MARK = "x-hoptrace-stop-after"


def mark(schema: dict, pattern: str) -> dict:
    """The schema of a task whose reply may end once the text written so far matches `pattern`
    (a regular expression searched in the whole reply)."""
    if not pattern:
        raise ValueError("an early-stop pattern must not be empty: it would end every reply at once")
    re.compile(pattern)  # a bad pattern fails here, in the caller, not in the server's process
    return {**schema, MARK: pattern}


def close(text: str, schema: Optional[dict]) -> str:
    """A reply that ended at its schema's mark, as the JSON object it stands for: the text up to
    the end of the match, then `}`. A reply that is whole (no mark, an endpoint, a sampled repair
    request) is returned unchanged."""
    pattern = schema.get(MARK) if schema else None
    if not pattern:
        return text
    try:
        json.loads(text)
        return text
    except ValueError:
        pass
    m = re.search(pattern, text, re.S)
    return text[:m.end()] + "}" if m else text
