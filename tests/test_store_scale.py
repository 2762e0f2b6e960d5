"""`hoptrace bench-store` on a tiny synthetic KB: it builds, opens and runs the three methods.
(The figures themselves come from the CLI, never from a timed test.)"""
import sqlite3

from retrieval.bench.store_scale import METHODS, build_synthetic, render, run
from retrieval.cli import main


def test_synthetic_kb_has_the_tables_griever_reads(tmp_path):
    info = build_synthetic(tmp_path / "s.sqlite", 500)
    assert info["counts"]["passages"] == 500 and info["counts"]["triples"] == 500
    assert info["counts"]["partial_triples"] > 500 and info["counts"]["predicates"] > 1
    con = sqlite3.connect(tmp_path / "s.sqlite")
    layers = dict(con.execute("SELECT layer, count(*) FROM vectors GROUP BY layer"))
    assert layers == {"passages": 500, "partial_triples": info["counts"]["partial_triples"],
                      "entities": info["counts"]["entities"], "predicates": info["counts"]["predicates"]}


def test_bench_store_measures_every_method(tmp_path):
    (row,) = run([400], tmp_path, queries=3)
    assert row["n"] == 400 and row["peak_rss_mb"] > 0
    assert all(row[f"{m}_p50_ms"] > 0 for m in METHODS)
    assert "griever p50 ms" in render([row]) and not list(tmp_path.glob("*.sqlite"))


def test_bench_store_rejects_bad_sizes(capsys):
    assert main(["bench-store", "--sizes", "10,abc"]) == 2
    assert "--sizes" in capsys.readouterr().err


def test_synthetic_titles_are_unique_names():
    import numpy as np

    from retrieval.bench.store_scale import _namer

    name = _namer(np.random.default_rng(0), 20_000)
    titles = [name(i) for i in range(20_000)]
    assert len(set(titles)) == 20_000 and all(len(t.split()) == 2 for t in titles)
