"""`hoptrace bench-store`: how the embedded SQLite store scales (memory, build time, latency).

Synthetic KBs of N passages measure the store itself, not extraction or embedding:
passage text is Zipf-distributed pseudo-words plus mentions of other passages' titles
(so BM25 has realistic posting lists; titles are two-word names), each passage has one triple (title, predicate,
another title) from which partial triples, entities and predicates are derived with the
same tables the real build fills, and random unit vectors stand in for embeddings.

Each size is built and then measured in a fresh subprocess, so peak RSS belongs to that
size alone. Query latency is the method's own `latency_ms` (what `hoptrace bench`
reports): `bm25`, `dense` (query encoding with the real MiniLM + kNN) and `griever`.
"""
from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from ..kb import db

DIM = 384
EMBED_MODEL = "all-MiniLM-L6-v2"   # the query encoder the methods load; vectors are random
VOCAB = 30_000
WORDS_PER_PASSAGE = 60
MENTIONS = 2
PREDICATES = 64
CHUNK = 50_000
METHODS = ("bm25", "dense", "griever")
NAMES = 500   # given names; family names grow with N
HEAD_WORDS = 100


def _words(rng: np.random.Generator, n: int = VOCAB, avoid: frozenset = frozenset()) -> np.ndarray:
    """n distinct pseudo-words (distinct, so titles built from them are unique names)."""
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    out: dict[str, None] = {}
    while len(out) < n:
        for k in rng.integers(3, 10, n - len(out)):
            w = "".join(rng.choice(letters, k))
            if w not in avoid:
                out.setdefault(w)
    return np.array(list(out))


def _namer(rng: np.random.Generator, n: int):
    """Title i as "Given Family": unique names whose words repeat like real names do (a
    given name in ~2,000 titles at 1M passages), not one shared word that would make every
    title match every query."""
    given = [w.capitalize() for w in _words(rng, NAMES)]
    family = [w.capitalize() for w in _words(rng, max(1, -(-n // NAMES)), frozenset(w.lower() for w in given))]
    return lambda i: f"{given[i % NAMES]} {family[i // NAMES]}"


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.standard_normal((n, DIM), dtype=np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return v.astype(np.float16)


def build_synthetic(path: Path, n: int, seed: int = 0) -> dict:
    """Write a synthetic KB of `n` passages at `path`; return timings per step (seconds)."""
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    path.unlink(missing_ok=True)
    con = db.connect(path)
    con.execute("PRAGMA journal_mode=OFF")
    con.execute("PRAGMA synchronous=OFF")
    db.create(con, EMBED_MODEL, DIM)
    words = _words(rng)
    name = _namer(rng, n)
    preds = [f"{words[i]} {words[i + 1]}" for i in range(0, 2 * PREDICATES, 2)]
    # Zipf ranks over the vocabulary (s ≈ 1), the usual shape of word frequencies.
    probs = 1.0 / np.arange(1, VOCAB + 1)
    probs /= probs.sum()
    steps: dict[str, float] = {}
    t = time.perf_counter()
    for lo in range(0, n, CHUNK):
        hi = min(n, lo + CHUNK)
        ids = rng.choice(VOCAB, size=(hi - lo, WORDS_PER_PASSAGE), p=probs)
        others = rng.integers(0, n, size=(hi - lo, MENTIONS))
        rows, triples = [], []
        for j, i in enumerate(range(lo, hi)):
            title = name(i)
            mention = [name(int(o)) for o in others[j]]
            text = " ".join(words[ids[j]]) + " " + " and ".join(mention) + "."
            rows.append((i + 1, f"p{i}", title, text))
            triples.append((i + 1, title, preds[(i * 7) % PREDICATES], mention[0]))
        with con:
            con.executemany("INSERT INTO passages(rowid, id, title, text) VALUES(?,?,?,?)", rows)
            con.executemany("INSERT INTO triples(passage_rowid, subject, predicate, object) VALUES(?,?,?,?)", triples)
    steps["passages+triples"] = time.perf_counter() - t
    t = time.perf_counter()
    with con:
        con.execute("INSERT INTO passages_fts(rowid, title, text) SELECT rowid, title, text FROM passages")
        con.execute("INSERT INTO triples_fts(rowid, subject, predicate, object) "
                    "SELECT rowid, subject, predicate, object FROM triples")
    steps["fts"] = time.perf_counter() - t
    t = time.perf_counter()
    with con:  # the same derived tables build.py fills, set-based
        con.execute("INSERT INTO entities(name, norm, type) SELECT title, lower(title), NULL FROM passages")
        con.execute("INSERT INTO entity_passages SELECT e.rowid, t.passage_rowid FROM triples t "
                    "JOIN entities e ON e.name=t.subject UNION "
                    "SELECT e.rowid, t.passage_rowid FROM triples t JOIN entities e ON e.name=t.object")
        con.execute("INSERT INTO entities_fts(rowid, name) SELECT rowid, name FROM entities")
        con.execute("INSERT INTO predicates(name) SELECT DISTINCT predicate FROM triples")
        con.execute("INSERT INTO partial_triples(subject, predicate, is_inverse, content) "
                    "SELECT DISTINCT subject, predicate, 0, subject || ' ' || predicate FROM triples "
                    "UNION SELECT DISTINCT object, predicate, 1, predicate || ' ' || object FROM triples")
        con.execute("INSERT INTO partial_triple_links SELECT pt.rowid, t.object, t.passage_rowid FROM triples t "
                    "JOIN partial_triples pt ON pt.subject=t.subject AND pt.predicate=t.predicate AND pt.is_inverse=0 "
                    "UNION SELECT pt.rowid, t.subject, t.passage_rowid FROM triples t JOIN partial_triples pt "
                    "ON pt.subject=t.object AND pt.predicate=t.predicate AND pt.is_inverse=1")
        con.execute("INSERT INTO partial_triples_fts(rowid, content) SELECT rowid, content FROM partial_triples")
    steps["derived"] = time.perf_counter() - t
    t = time.perf_counter()
    for layer, table in (("passages", "passages"), ("partial_triples", "partial_triples"),
                         ("entities", "entities"), ("predicates", "predicates")):
        rowids = [r[0] for r in con.execute(f"SELECT rowid FROM {table} ORDER BY rowid")]
        for lo in range(0, len(rowids), CHUNK):
            chunk = rowids[lo:lo + CHUNK]
            vecs = _unit(rng, len(chunk))
            with con:
                con.executemany("INSERT INTO vectors(layer, item_rowid, vec) VALUES(?,?,?)",
                                [(layer, r, v.tobytes()) for r, v in zip(chunk, vecs)])
    steps["vectors"] = time.perf_counter() - t
    with con:
        # Zipf's head words are in nearly every passage, like "the" in real text; questions
        # rarely ask with them, so the measured queries leave them out (as stopwords are).
        db.set_meta(con, "synthetic_head_words", [str(w) for w in words[:HEAD_WORDS]])
        db.set_meta(con, "name", f"synthetic-{n}")
        db.set_meta(con, "synthetic", True)
        db.set_meta(con, "complete", True)
    counts = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
              for t in ("passages", "triples", "partial_triples", "entities", "predicates")}
    con.close()
    return {"n": n, "build_s": round(time.perf_counter() - t0, 1), "steps_s": {k: round(v, 1) for k,
                                                                               v in steps.items()},
            "counts": counts, "size_mb": round(path.stat().st_size / 1e6, 1), "build_peak_rss_mb": _peak_rss_mb()}


def measure(path: Path, queries: int = 50, seed: int = 1) -> dict:
    """Open the KB as the app does (warm), then time each method over `queries` questions."""
    from ..encoders.embedder import get_embedder
    from ..methods import Context, make_method
    from ..store.sqlite import SQLiteStore

    t0 = time.perf_counter()
    store = SQLiteStore(path)
    ctx = Context(store, get_embedder(EMBED_MODEL))
    ctx.warm()
    load_s = time.perf_counter() - t0
    rss_loaded = _rss_mb()
    rng = np.random.default_rng(seed)
    n = store.info().counts["passages"]
    picks = rng.integers(0, n, queries)
    head = set(store.info().meta.get("synthetic_head_words", []))
    texts = []
    for i in picks:
        p = store.passages([f"p{i}"])[0]
        words = [w for w in p.text.split() if w not in head]
        texts.append(f"Which {' '.join(words[:4])} is linked to {p.title}?")
    out = {"n": n, "load_s": round(load_s, 1), "rss_after_load_mb": rss_loaded}
    for name in METHODS:
        method = make_method(name, ctx)
        lat = []
        for q in texts:
            run = method.run(q, k=10)
            if run.status != "ok":
                raise RuntimeError(f"{name} failed on a synthetic KB: {run.error}")
            lat.append(run.latency_ms)
        out[f"{name}_p50_ms"] = round(statistics.median(lat), 2)
        out[f"{name}_p95_ms"] = round(float(np.percentile(lat, 95)), 2)
    out["peak_rss_mb"] = _peak_rss_mb()
    return out


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def _peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _child(args: list[str]) -> dict:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-m", "retrieval.bench.store_scale", *args], capture_output=True,
                          text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"store_scale {' '.join(args)} failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run(sizes: list[int], directory: Path, queries: int = 50, keep: bool = False) -> list[dict]:
    directory.mkdir(parents=True, exist_ok=True)
    rows = []
    for n in sizes:
        path = directory / f"synthetic-{n}.sqlite"
        row = _child(["build", str(path), str(n)])
        row.update(_child(["measure", str(path), str(queries)]))
        rows.append(row)
        print(render([row]).splitlines()[-1], flush=True)
        if not keep:
            path.unlink(missing_ok=True)
    return rows


def render(rows: list[dict]) -> str:
    head = (f"{'passages':>10} {'build s':>8} {'KB MB':>8} {'build RSS MB':>12} {'load s':>7} {'RSS loaded MB':>13} "
            f"{'peak RSS MB':>11} " + " ".join(f"{m + ' p50 ms':>16}" for m in METHODS))
    lines = [head]
    for r in rows:
        lines.append(f"{r['n']:>10,} {r['build_s']:>8} {r['size_mb']:>8} {r['build_peak_rss_mb']:>12} {r['load_s']:>7} "
                     f"{r['rss_after_load_mb']:>13} {r['peak_rss_mb']:>11} "
                     + " ".join(f"{r[m + '_p50_ms']:>16}" for m in METHODS))
    return "\n".join(lines)


if __name__ == "__main__":
    cmd, path = sys.argv[1], Path(sys.argv[2])
    if cmd == "build":
        print(json.dumps(build_synthetic(path, int(sys.argv[3]))))
    else:
        print(json.dumps(measure(path, int(sys.argv[3]))))
