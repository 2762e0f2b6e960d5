"""Tolerant JSON parsing of model output.

Small models wrap JSON in code fences, add a sentence after it, leave trailing commas or
answer with Python-style single quotes. Each of those is recoverable without asking the
model again; anything else raises ValueError naming what was wrong, which the client turns
into one repair request.
"""
from __future__ import annotations

import json
import re
from typing import Any

from ..core import pyast

_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.S)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")


def _candidates(text: str) -> list[str]:
    out = [m.group(1) for m in _FENCE.finditer(text)]
    out.append(text)
    return out


def _decode_from(text: str) -> Any:
    """The first JSON value that starts at a '{' or '[' in `text`, ignoring what follows it."""
    dec = json.JSONDecoder()
    last_err: Exception | None = None
    for i, ch in enumerate(text):
        if ch not in "{[":
            continue
        for variant in (text[i:], _TRAILING_COMMA.sub(r"\1", text[i:])):
            try:
                return dec.raw_decode(variant)[0]
            except json.JSONDecodeError as e:
                last_err = e
        # Python literal (single quotes, tuples): only for a balanced prefix.
        end = _balanced_end(text, i)
        if end is not None:
            try:
                value = pyast.literal_eval(text[i:end])
                return _jsonable(value)
            except (ValueError, SyntaxError, MemoryError, RecursionError) as e:
                last_err = e
    raise ValueError(f"no JSON object or array found ({last_err})" if last_err else "no JSON object or array found")


def _balanced_end(text: str, start: int) -> int | None:
    depth, quote = 0, None
    for j in range(start, len(text)):
        c = text[j]
        if quote:
            if c == "\\":
                continue
            if c == quote:
                quote = None
        elif c in "\"'":
            quote = c
        elif c in "{[(":
            depth += 1
        elif c in "}])":
            depth -= 1
            if depth == 0:
                return j + 1
    return None


def _jsonable(v: Any) -> Any:
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    raise ValueError(f"not JSON data: {type(v).__name__}")


def parse_json(text: str) -> Any:
    """Parse model output into JSON data; raise ValueError saying why not."""
    if not text or not text.strip():
        raise ValueError("the model returned an empty answer")
    errors = []
    for cand in _candidates(text):
        cand = cand.strip()
        try:
            return json.loads(cand)
        except json.JSONDecodeError:
            pass
        try:
            return _decode_from(cand)
        except ValueError as e:
            errors.append(str(e))
    raise ValueError(errors[-1])
