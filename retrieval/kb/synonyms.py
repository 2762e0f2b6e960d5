"""same_as derivation for extractors that give no aliases (GRIEVER §4.2.3).

As HippoRAG 2 derives synonym edges: two entities are aliases when their names'
embeddings are nearest neighbours above a similarity threshold, or when their names
normalise to the same string. HippoRAG 2 uses 0.8 with NV-Embed-v2; with MiniLM that
pairs "North Carolina" with "South Carolina" (0.848), so our default is 0.85. Incremental: only entities
added since the last derivation are compared (against all entities).

Comparing every name with every name costs the square of their number: 20 s for 2Wiki's 55,619
comparable names, ~80 min for the ~900,000 of 100,000 passages. Above EXACT_UP_TO comparable names the
neighbours come from an inverted-file index (faiss IVF, inner product) instead; on 2Wiki's names
forced through it, it found 99+ % of the exact pairs (docs/profiles.md, "Building faster").
"""
from __future__ import annotations

import os
import re
import sqlite3

import numpy as np
from threadpoolctl import threadpool_limits

from ..core.errors import ConfigError
from . import db

MAX_NEIGHBOURS = 10  # keeps a generic name ("company") from aliasing half the KB
_HAS_DIGIT = re.compile(r"\d")
DEFAULT_THRESHOLD = 0.85
EXACT_UP_TO = 100_000   # comparable names: exact ~1 min here (IVF ~12 s); every bundled KB stays exact
IVF_PROBES = 16         # lists searched per name, of ~4·√n


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
    search = _nearest_exact if len(cols) <= _exact_up_to() else _nearest_ivf
    # A build owns the machine: the BLAS pool (held to one thread for queries) gets every core.
    with threadpool_limits(os.cpu_count() or 1, user_api="blas"):
        for row, cand, sims in search(cmat, new_rows, threshold):
            a = name_of[int(ids[cols[row]])]
            for j, sim in zip(cand, sims):
                pairs.setdefault((a, name_of[int(ids[cols[j]])]), (float(sim), "embedding"))
    with con:
        n = 0
        for (a, b), (sim, method) in pairs.items():
            for x, y in ((a, b), (b, a)):
                n += con.execute("INSERT OR IGNORE INTO same_as(entity, alias, similarity, method) VALUES(?,?,?,?)",
                                 (x, y, round(sim, 4), method)).rowcount
        db.set_meta(con, "same_as_upto", ents[-1][0])
        db.set_meta(con, "same_as_threshold", threshold)
    return n


def _exact_up_to() -> int:
    """EXACT_UP_TO, or HOPTRACE_SAME_AS_EXACT_UP_TO (0 forces the index, to measure it)."""
    value = os.environ.get("HOPTRACE_SAME_AS_EXACT_UP_TO", "").strip()
    if not value:
        return EXACT_UP_TO
    if not value.isdigit():
        raise ConfigError(f"HOPTRACE_SAME_AS_EXACT_UP_TO must be a whole number, got {value!r}")
    return int(value)


def _nearest_exact(cmat: np.ndarray, rows: np.ndarray, threshold: float):
    """(row, its neighbours at or above the threshold, nearest first and at most MAX_NEIGHBOURS,
    their similarities), from every row's product with every name."""
    for start in range(0, len(rows), 1024):
        block = rows[start:start + 1024]
        sims = cmat[block] @ cmat.T
        sims[np.arange(len(block)), block] = -1.0
        # Above the threshold first, then each name's MAX_NEIGHBOURS nearest of those: the same
        # pairs as the nearest MAX_NEIGHBOURS filtered by the threshold, without ranking every row.
        hit_rows, js = np.nonzero(sims >= threshold)  # row-major: each row's hits are contiguous
        starts = np.searchsorted(hit_rows, np.arange(len(block) + 1))
        for r in range(len(block)):
            cand = js[starts[r]:starts[r + 1]]
            if len(cand):
                cand = cand[np.argsort(-sims[r, cand], kind="stable")[:MAX_NEIGHBOURS]]
                yield int(block[r]), cand, sims[r, cand]


def _nearest_ivf(cmat: np.ndarray, rows: np.ndarray, threshold: float):
    """The same, from faiss's inverted-file index: each name is searched in the IVF_PROBES lists
    nearest to it, so a pair whose names fell in far-apart lists can be missed."""
    try:
        import faiss
    except ImportError as e:
        raise ConfigError(f"{len(cmat):,} names are too many to compare exactly and faiss-cpu is not "
                          "installed (pip install faiss-cpu)") from e
    faiss.omp_set_num_threads(os.cpu_count() or 1)
    n, dim = cmat.shape
    nlist = max(1, int(4 * np.sqrt(n)))
    index = faiss.IndexIVFFlat(faiss.IndexFlatIP(dim), dim, nlist, faiss.METRIC_INNER_PRODUCT)
    rng = np.random.default_rng(0)  # the same sample, the same lists, the same pairs on a rebuild
    index.train(cmat[rng.choice(n, min(n, 64 * nlist), replace=False)])
    index.add(cmat)
    index.nprobe = IVF_PROBES
    for start in range(0, len(rows), 65536):
        block = rows[start:start + 65536]
        sims, found = index.search(cmat[block], MAX_NEIGHBOURS + 1)
        for r, row in enumerate(block):
            keep = (found[r] >= 0) & (found[r] != row) & (sims[r] >= threshold)
            if keep.any():
                yield int(row), found[r][keep][:MAX_NEIGHBOURS], sims[r][keep][:MAX_NEIGHBOURS]
