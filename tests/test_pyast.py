"""Parsing Python in threads (retrieval/core/pyast.py): CPython 3.11's AST converter shares its
recursion depth between threads, and the app died at start-up with "AST constructor recursion depth
mismatch" when two threads took the methods' fingerprints at once. Every parse is one at a time."""
from __future__ import annotations

import ast
import threading
import time

from retrieval import showcase
from retrieval.core import pyast
from retrieval.llm.jsonparse import parse_json


def test_parses_from_many_threads_run_one_at_a_time_and_a_files_parse_is_kept(monkeypatch):
    inside, most = [0], [0]
    real = ast.parse

    def watched(*args, **kwargs):   # the real parse, slowed so that overlapping calls would meet
        inside[0] += 1
        most[0] = max(most[0], inside[0])
        time.sleep(0.002)
        try:
            return real(*args, **kwargs)
        finally:
            inside[0] -= 1

    monkeypatch.setattr(ast, "parse", watched)
    monkeypatch.setattr(showcase, "_parsed", {})
    prints: list[str] = []
    replies: list[object] = []

    def work():
        prints.append(showcase.fingerprint("sag"))
        replies.append(parse_json("{'answer': 'Ostrevan', 'hops': (1, 2)}"))   # a Python literal, not JSON

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert most[0] == 1, f"{most[0]} parses ran at once"
    assert len(set(prints)) == 1 and replies == [{"answer": "Ostrevan", "hops": [1, 2]}] * 6
    files = showcase._method_files(showcase.METHODS["sag"])
    assert set(showcase._parsed) == {(str(f), f.stat().st_mtime_ns, f.stat().st_size) for f in files}
    assert pyast.literal_eval("  [1, 'a']") == [1, "a"]
