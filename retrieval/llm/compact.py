"""Compact JSON answers from the embedded model: no whitespace between JSON tokens.

Output tokens are the slow ones on 2 cores (~17-22 a second against ~60 prompt tokens), and
llama.cpp's schema grammar lets the model write `", "` and `": "` between every pair of
values, which it does, copying the spaced examples it was shown. `{"a":["b","c"]}` is ~17 %
fewer Qwen2.5 tokens than `{"a": ["b", "c"]}` for the one-read extraction (171 vs 205
tokens on its worked example). A task opts in by marking its schema (`mark`); the embedded
server is then sent our own grammar for that schema, with no space between tokens (gbnf.py),
so the grammar itself holds the model to the compact form. An endpoint never sees the mark
(`unmark`): its own decoding decides the spacing, and the parsed value is the same either way.
"""
from __future__ import annotations

from typing import Optional

MARK = "x-hoptrace-compact"
# Every mark HopTrace puts in a schema for its embedded server starts so (early_stop.py has one).
MARK_PREFIX = "x-hoptrace-"

def mark(schema: dict) -> dict:
    """The schema of a task whose answers should be written without spaces between tokens."""
    return {**schema, MARK: True}


def unmark(schema: Optional[dict]) -> Optional[dict]:
    """The schema as an endpoint should see it: without any of HopTrace's marks."""
    if not schema or not any(k.startswith(MARK_PREFIX) for k in schema):
        return schema
    return {k: v for k, v in schema.items() if not k.startswith(MARK_PREFIX)}
