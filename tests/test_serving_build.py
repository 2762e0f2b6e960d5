"""A build that serves as it goes (retrieval/kb/publish.py): each method served as soon as its
units are whole, only the units the chosen methods need, a later append adding just the missing
ones, a killed build resumed with nothing stored encoded again, and the encoder's device."""
from __future__ import annotations

import os
import sqlite3

import pytest

from retrieval.core.errors import ConfigError, KBError
from retrieval.corpus.datasets import get_dataset
from retrieval.kb import readiness
from retrieval.kb.build import build_kb
from retrieval.kb.extract.openie_import import OpenIEImport
from retrieval.kb.extract.rules import RulesExtractor
from retrieval.methods import Context, make_method, targets
from retrieval.store.sqlite import SQLiteStore

Q = "Who was the first president of the association which published Journal of Psychotherapy Integration?"


def extractors():
    return [OpenIEImport(get_dataset("musique").openie), RulesExtractor(("events", "propositions"), n_process=1)]


def rows(path, sql):
    con = sqlite3.connect(path)
    try:
        return con.execute(sql).fetchone()[0]
    finally:
        con.close()


def run(path, embedder, name):
    return make_method(name, Context(SQLiteStore(path), embedder)).run(Q, k=5)


class Boom(Exception):
    pass


class DiesInExtraction(RulesExtractor):
    """The rules extractor, killed before its first passage (a Ctrl-C during extraction)."""

    def extract(self, passages):
        raise Boom()
        yield  # a generator, as the real one


def test_a_build_killed_after_the_passages_vectors_serves_bm25_and_dense(small_corpus, embedder, tmp_path):
    passages, questions = small_corpus
    path = tmp_path / "partial.sqlite"
    serve = targets(["bm25", "dense", "griever", "sag"])
    with pytest.raises(Boom):
        build_kb(path, passages, [DiesInExtraction(("triples", "events"), n_process=1)], embedder,
                 questions=questions, name="partial", progress=False, targets=serve)
    assert path.exists() and (tmp_path / "partial.sqlite.building").exists()
    assert readiness.read_status(path) is None, "a build that stopped says so by leaving no status behind"
    store = SQLiteStore(path)
    assert {"passages", "passages vectors"} <= store.whole_units()
    assert not {"triples", "events", "entities vectors"} & store.whole_units()
    for name in ("bm25", "dense", "rrf_hybrid"):
        got = run(path, embedder, name)
        assert got.status == "ok" and len(got.ranked) == 5, (name, got.error)
    with pytest.raises(KBError, match="griever needs the KB's triples layer .*--methods griever"):
        run(path, embedder, "griever")
    with pytest.raises(KBError, match="sag needs the KB's events layer"):
        run(path, embedder, "sag")


def test_a_running_build_says_when_a_method_will_be_ready(small_kb, embedder, tmp_path):
    import shutil

    path = tmp_path / "growing.sqlite"
    shutil.copyfile(small_kb, path)
    con = sqlite3.connect(path)
    con.execute("DELETE FROM vectors WHERE layer='events'")
    con.execute("UPDATE meta SET value='{}' WHERE key='vectors_upto'")
    con.commit()
    con.close()
    import time

    now = time.time()
    readiness.write_status(path, readiness.Readiness("growing", now - 30, now, os.getpid(),
                                                     {"bm25": 0.4, "dense": 12.0}, {"sag": 41.0}, []))
    try:
        with pytest.raises(KBError, match=r"sag is not ready on KB small yet: .*events vectors.*ready in ~4\d s"):
            run(path, embedder, "sag")
        status = readiness.read_status(path)
        assert status.state("bm25") == "ready" and status.state("gear") == "not built"
    finally:
        readiness.clear_status(path)


def test_methods_build_only_their_units_and_a_later_append_adds_the_rest(small_corpus, embedder, tmp_path):
    passages, questions = small_corpus
    path = tmp_path / "chosen.sqlite"
    first = build_kb(path, passages, extractors(), embedder, questions=questions, name="chosen", progress=False,
                     targets=targets(["griever", "dense"]))
    whole = SQLiteStore(path).whole_units()
    assert {"triples", "partial_triples", "same_as", "partial_triples vectors", "entities vectors"} <= whole
    assert not {"events", "propositions", "triples vectors"} & whole
    assert rows(path, "SELECT count(*) FROM events") == 0
    assert rows(path, "SELECT count(*) FROM vectors WHERE layer='triples'") == 0
    assert [m for _, ms in first.ready_at for m in ms] == ["dense", "griever"]
    assert run(path, embedder, "griever").status == "ok"
    with pytest.raises(KBError, match="sag needs the KB's events layer"):
        run(path, embedder, "sag")

    later = build_kb(path, passages, extractors(), embedder, name="chosen", progress=False,
                     targets=targets(["sag"]))
    assert later.passages_added == 0
    assert set(later.extracted) == {"events"}, "only the missing layer is extracted"
    assert later.encoded.get("passages", 0) == 0 and later.encoded.get("partial_triples", 0) == 0
    assert later.encoded["events"] > 0
    whole = SQLiteStore(path).whole_units()
    assert {"events", "events vectors", "entities vectors", "partial_triples vectors"} <= whole
    assert run(path, embedder, "sag").status == "ok" and run(path, embedder, "griever").status == "ok"
    again = build_kb(path, passages, extractors(), embedder, progress=False, targets=targets(["sag", "griever"]))
    assert again.reused


class CountingEmbedder:
    """The real embedder, counting each text it encodes and killed after `die_after` batches."""

    def __init__(self, inner, die_after=None):
        self.inner, self.die_after = inner, die_after
        self.name, self.dim = inner.name, inner.dim
        self.encoded: list[str] = []
        self.calls = 0

    def encode(self, texts, batch_size=64):
        self.calls += 1
        if self.die_after is not None and self.calls > self.die_after:
            raise Boom()
        out = self.inner.encode(texts, batch_size=batch_size)
        self.encoded.extend(texts)
        return out


def test_a_build_killed_mid_layer_resumes_encoding_only_what_was_not_stored(small_corpus, embedder, tmp_path,
                                                                            monkeypatch):
    import retrieval.kb.embed as embed

    monkeypatch.setattr(embed, "FLUSH_S", 0.0)             # store after every batch
    monkeypatch.setenv("HOPTRACE_ONNX", "0")              # fp32 through the embedder itself, counted
    passages, _ = small_corpus
    path = tmp_path / "killed.sqlite"
    serve = targets(["griever"])
    dying = CountingEmbedder(embedder, die_after=60)
    with pytest.raises(Boom):
        build_kb(path, passages, extractors(), dying, name="killed", progress=False, targets=serve, precision="fp32")
    work = tmp_path / "killed.sqlite.building"
    con = sqlite3.connect(work)
    per_layer = dict(con.execute("SELECT layer, count(*) FROM vectors GROUP BY layer").fetchall())
    size = {layer: con.execute(f"SELECT count(*) FROM {layer}").fetchone()[0] for layer in per_layer}
    con.close()
    halfway = [layer for layer in per_layer if 0 < per_layer[layer] < size[layer]]
    assert len(per_layer) >= 2 and halfway, f"killed part-way through a later layer: {per_layer} of {size}"

    again = CountingEmbedder(embedder)
    report = build_kb(path, passages, extractors(), again, name="killed", progress=False, targets=serve,
                      precision="fp32")
    assert not work.exists() and report.ready_at
    twice = set(dying.encoded) & set(again.encoded)
    assert not twice, f"encoded again after the resume: {sorted(twice)[:5]}"
    con = sqlite3.connect(path)
    total = con.execute("SELECT count(*) FROM vectors").fetchone()[0]
    con.close()
    distinct = len(set(dying.encoded) | set(again.encoded))
    assert total >= distinct and run(path, embedder, "griever").status == "ok"


def test_the_device_choice_on_a_machine_without_a_gpu(small_corpus, embedder, tmp_path):
    from retrieval.encoders.device import cuda_available, resolve_device

    assert resolve_device("cpu", "bf16") == "cpu"
    assert resolve_device("auto", "int8") == "cpu"
    with pytest.raises(ConfigError, match="int8 is an ONNX Runtime CPU quantisation"):
        resolve_device("cuda", "int8")
    with pytest.raises(ConfigError, match="choose one of auto, cpu, cuda"):
        resolve_device("tpu", "fp32")
    if cuda_available():
        pytest.skip("this machine has a GPU: the CPU-only refusal cannot be shown here")
    assert resolve_device("auto", "fp32") == "cpu"
    with pytest.raises(ConfigError, match="--device cuda: torch sees no CUDA GPU"):
        resolve_device("cuda", "fp32")
    passages, _ = small_corpus
    path = tmp_path / "cpu.sqlite"
    report = build_kb(path, passages[:20], [], embedder, progress=False, targets=targets(["dense"]), device="cpu")
    assert report.device.startswith("cpu (") and rows(path, "SELECT count(*) FROM vectors") == 20
    assert SQLiteStore(path).info().meta["embed_device"] == report.device
