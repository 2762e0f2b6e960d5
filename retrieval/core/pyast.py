"""Python's `ast.parse` and `ast.literal_eval`, one thread at a time.

CPython 3.11 keeps the AST converter's recursion depth in state all threads share; two threads
parsing at once can fail with "SystemError: AST constructor recursion depth mismatch"
(python/cpython#106905 fixed one path to it, not this one). The app died at start-up this way:
the lab's leaderboard took the methods' fingerprints (retrieval/showcase.py) while another thread
did the same. Every parse in HopTrace goes through this lock.
"""
from __future__ import annotations

import ast
import threading
from typing import Any

_LOCK = threading.Lock()


def parse(source: str, filename: str = "<unknown>", mode: str = "exec") -> ast.AST:
    with _LOCK:
        return ast.parse(source, filename, mode)


def literal_eval(text: str) -> Any:
    """ast.literal_eval of a string, its parse under the lock (the evaluation needs none)."""
    return ast.literal_eval(parse(text.lstrip(" \t"), mode="eval"))
