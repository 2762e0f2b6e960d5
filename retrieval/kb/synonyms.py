"""same_as derivation for extractors that give no aliases (GRIEVER §4.2.3).

As HippoRAG 2 derives synonym edges: two entities are aliases when their names'
embeddings are nearest neighbours above a similarity threshold, or when their names
normalise to the same string. HippoRAG 2 uses 0.8 with NV-Embed-v2; with MiniLM that
pairs "North Carolina" with "South Carolina" (0.848), so our default is 0.85. Incremental: only entities
added since the last derivation are compared (against all entities).
"""
from __future__ import annotations

import os
import re
import sqlite3

import numpy as np
from threadpoolctl import threadpool_limits

from . import db

MAX_NEIGHBOURS = 10  # keeps a generic name ("company") from aliasing half the KB
_HAS_DIGIT = re.compile(r"\d")
DEFAULT_THRESHOLD = 0.85


def derive_same_as(con: sqlite3.Connection, threshold: float = DEFAULT_THRESHOLD) -> int:
    upto = db.get_meta(con, "same_as_upto", 0)
    ents = con.execute("SELECT rowid, name, norm FROM entities ORDER BY rowid").fetchall()
    if not ents or ents[-1][0] <= upto:
        return 0
    name_of = {r: n for r, n, _ in ents}
    pairs: dict[tuple[str, str], tuple[float, str]] = {}

    by_norm: dict[str, list[str]] = {}
    for _, name, norm in ents:
        by_norm.setdefault(norm, []).append(name)
    for rid, name, norm in ents:
        if rid > upto:
            for other in by_norm[norm]:
                if other != name:
                    pairs[(name, other)] = (1.0, "normalised-name")

    dim = db.get_meta(con, "embed_dim")
    ids, mat = db.load_vectors(con, "entities", dim)
    # Names with numbers ("18 January 1940", "1 May 1945"; "2010 census") sit close in
    # embedding space but a changed digit is a different thing; only exact normalised matches.
    comparable = np.array([not _HAS_DIGIT.search(name_of.get(int(i), "")) for i in ids], dtype=bool)
    cols = np.nonzero(comparable)[0]
    cmat = np.ascontiguousarray(mat[cols])  # only comparable names are compared, on either side
    new_rows = np.nonzero(ids[cols] > upto)[0]
    # A build owns the machine: the BLAS pool (held to one thread for queries) gets every core.
    with threadpool_limits(os.cpu_count() or 1, user_api="blas"):
        for start in range(0, len(new_rows), 1024):
            block = new_rows[start:start + 1024]
            sims = cmat[block] @ cmat.T
            sims[np.arange(len(block)), block] = -1.0
            # Above the threshold first, then each name's MAX_NEIGHBOURS nearest of those: the same
            # pairs as the nearest MAX_NEIGHBOURS filtered by the threshold, without ranking every row.
            rows, js = np.nonzero(sims >= threshold)  # row-major: each row's hits are contiguous
            starts = np.searchsorted(rows, np.arange(len(block) + 1))
            for row in range(len(block)):
                cand = js[starts[row]:starts[row + 1]]
                if not len(cand):
                    continue
                cand = cand[np.argsort(-sims[row, cand], kind="stable")[:MAX_NEIGHBOURS]]
                a = name_of[int(ids[cols[block[row]]])]
                for j in cand:
                    pairs.setdefault((a, name_of[int(ids[cols[j]])]), (float(sims[row, j]), "embedding"))
    with con:
        n = 0
        for (a, b), (sim, method) in pairs.items():
            for x, y in ((a, b), (b, a)):
                n += con.execute("INSERT OR IGNORE INTO same_as(entity, alias, similarity, method) VALUES(?,?,?,?)",
                                 (x, y, round(sim, 4), method)).rowcount
        db.set_meta(con, "same_as_upto", ents[-1][0])
        db.set_meta(con, "same_as_threshold", threshold)
    return n
