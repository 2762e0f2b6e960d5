"""Issue 46's levers, each on the real embedding model and a real SQLite KB: one encoding per
distinct text across layers, incremental adds that encode only what is new, token-budget
batches, one encoder session per core, the int8 encoder's switch, progress that names the
layer and what is left, and `compare --against` that checks a rebuild lost no recall."""
from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from retrieval.core.errors import ConfigError, InputError, KBError
from retrieval.kb import db
from retrieval.kb.build import build_kb
from retrieval.kb.embed import EmbedSettings, _batches
from retrieval.kb.extract.rules import RulesExtractor
from retrieval.kb.progress import BuildStatus
from retrieval.kb.schema import EMBEDDED_LAYERS


def _vectors(path, layer) -> dict[str, bytes]:
    """text → stored vector bytes for every item of a layer."""
    con = sqlite3.connect(path)
    try:
        texts = dict(con.execute(EMBEDDED_LAYERS[layer]))
        return {texts[rid]: bytes(v) for rid, v in
                con.execute("SELECT item_rowid, vec FROM vectors WHERE layer=?", (layer,))}
    finally:
        con.close()


def _distinct_texts(path) -> int:
    con = sqlite3.connect(path)
    try:
        return len({t for sql in EMBEDDED_LAYERS.values() for _, t in con.execute(sql)})
    finally:
        con.close()


def test_a_text_in_two_layers_is_encoded_once_and_both_layers_get_its_vector(small_corpus, embedder, tmp_path,
                                                                             monkeypatch):
    passages, _ = small_corpus
    path = tmp_path / "kb.sqlite"
    # The rules extractor's event is a passage's first sentence, which is also one of its propositions.
    report = build_kb(path, passages[:12], [RulesExtractor(n_process=1)], embedder, progress=False)
    events, props = _vectors(path, "events"), _vectors(path, "propositions")
    shared = set(events) & set(props)
    assert len(shared) >= 10, "the fixture should give events that are also propositions"
    for text in shared:
        assert events[text] == props[text]
    items = sum(report.embedded.values())
    assert sum(report.encoded.values()) == _distinct_texts(path) < items
    assert report.encoded["events"] <= len(events) - len(shared)  # the shared ones came from propositions

    # The switch: with dedupe off every layer encodes its own texts again (the old behaviour).
    off = tmp_path / "off.sqlite"
    monkeypatch.setenv("HOPTRACE_BUILD_DEDUPE", "0")
    again = build_kb(off, passages[:12], [RulesExtractor(n_process=1)], embedder, progress=False)
    assert again.encoded["events"] == len(set(_vectors(off, "events")))
    assert sum(again.encoded.values()) > sum(report.encoded.values())
    e2 = _vectors(off, "events")
    for text in shared:  # the same encoder, the same vector either way
        a = np.frombuffer(e2[text], np.float16).astype(np.float32)
        b = np.frombuffer(events[text], np.float16).astype(np.float32)
        assert float(a @ b) > 0.999


def test_an_incremental_add_encodes_only_the_new_texts(small_corpus, embedder, tmp_path):
    passages, _ = small_corpus
    path = tmp_path / "kb.sqlite"
    build_kb(path, passages[:20], [RulesExtractor(n_process=1)], embedder, progress=False)
    old = {layer: _vectors(path, layer) for layer in EMBEDDED_LAYERS}
    texts_before = {t for layer in old.values() for t in layer}
    second = build_kb(path, passages[:26], [RulesExtractor(n_process=1)], embedder, progress=False)
    assert second.embedded["passages"] == 6
    new = {layer: _vectors(path, layer) for layer in EMBEDDED_LAYERS}
    added = {t for layer in EMBEDDED_LAYERS for t in set(new[layer]) - set(old[layer])}
    assert sum(second.encoded.values()) == len(added)  # each new item's text once, nothing old again
    assert sum(second.encoded.values()) < len(texts_before)
    for layer in EMBEDDED_LAYERS:  # what was there keeps its bytes
        assert all(new[layer][t] == v for t, v in old[layer].items())


def test_batches_keep_within_the_token_budget_and_cover_every_text():
    lengths = [3, 3, 5, 8, 40, 120, 256, 7, 9, 2]
    order = sorted(range(len(lengths)), key=lambda j: lengths[j])
    batches = _batches(order, lengths, 64)
    assert sorted(j for b in batches for j in b) == list(range(len(lengths)))
    for b in batches:
        assert len(b) == 1 or len(b) * max(lengths[j] for j in b) <= 64
    assert [256] in [[lengths[j] for j in b] for b in batches]  # a text over the budget goes alone


def test_one_session_per_core_gives_the_vectors_of_one_session(embedder):
    from retrieval.encoders.parallel import ParallelEncoder

    texts = ["Lothair II", "Lothair II married Teutberga", "The Journal of Mathematical Physics is a journal.",
             "born in", "Teutberga was a queen of Lotharingia by marriage to Lothair II."] * 3
    two = ParallelEncoder.load(embedder, "fp32", workers=2)
    if two is None:
        pytest.skip("onnxruntime is not installed")
    ids = two.tokenize(texts)
    got = {}
    two.run(ids, [[0, 1, 2], [3, 4], list(range(5, 15))], lambda b, v: got.update(zip(b, v)))
    mat = np.stack([got[i] for i in range(len(texts))])
    ref = embedder.encode(texts)
    assert np.abs(mat - ref).max() < 1e-4
    # The next build's encoders reuse these sessions (each graph optimised once), a session per core.
    again = ParallelEncoder.load(embedder, "fp32", workers=2)
    assert [w.session for w in again.workers] == [w.session for w in two.workers]
    assert two.workers[0].session is not two.workers[1].session


def test_the_int8_encoder_is_a_switch_a_kb_keeps(small_corpus, embedder, tmp_path):
    passages, _ = small_corpus
    fp, q = tmp_path / "fp.sqlite", tmp_path / "q.sqlite"
    build_kb(fp, passages[:8], [RulesExtractor(n_process=1)], embedder, progress=False, precision="fp32")
    report = build_kb(q, passages[:8], [RulesExtractor(n_process=1)], embedder, progress=False, precision="int8")
    if "onnxruntime" not in report.encoder:
        pytest.skip("onnxruntime is not installed: the build fell back to torch fp32")
    assert "int8" in report.encoder
    con = db.connect(q, readonly=True)
    assert db.get_meta(con, "embed_precision") == "int8"
    con.close()
    a, b = _vectors(fp, "passages"), _vectors(q, "passages")
    cos = [float(np.frombuffer(a[t], np.float16).astype(np.float32) @ np.frombuffer(b[t], np.float16)
                 .astype(np.float32)) for t in a]
    assert 0.97 < min(cos) and max(cos) < 0.99999  # close to fp32's, and really another encoder
    before = q.read_bytes()
    for other in ("fp32", "bf16"):
        with pytest.raises(KBError, match="made by the int8 encoder.*--precision int8"):
            build_kb(q, passages[:10], [RulesExtractor(n_process=1)], embedder, progress=False, precision=other)
        assert q.read_bytes() == before
    # Not asked: an append keeps the KB's own encoder.
    more = build_kb(q, passages[:10], [RulesExtractor(n_process=1)], embedder, progress=False)
    assert "int8" in more.encoder and more.embedded["passages"] == 2
    with pytest.raises(ConfigError, match="encoder precision 'int4'"):
        EmbedSettings(precision="int4")


def test_bf16_gives_fp32s_vectors_within_a_hair_and_shares_a_kb_with_them(small_corpus, embedder, tmp_path):
    passages, _ = small_corpus   # four: bf16 is emulated, and slow, on a CPU without it (AVX2 here)
    fp, b = tmp_path / "fp.sqlite", tmp_path / "b.sqlite"
    build_kb(fp, passages[:4], [RulesExtractor(n_process=1)], embedder, progress=False, precision="fp32")
    report = build_kb(b, passages[:4], [RulesExtractor(n_process=1)], embedder, progress=False, precision="bf16")
    assert report.encoder.startswith("torch bf16 ×")
    con = db.connect(b, readonly=True)
    assert db.get_meta(con, "embed_precision") == "bf16"
    con.close()
    for layer in ("passages", "triples", "entities"):
        x, y = _vectors(fp, layer), _vectors(b, layer)
        assert set(x) == set(y)
        cos = [float(np.frombuffer(x[t], np.float16).astype(np.float32) @ np.frombuffer(y[t], np.float16)
                     .astype(np.float32)) for t in x]
        assert min(cos) > 0.9998, layer  # int8's lowest is ~0.97: bf16 is fp32 within rounding
    # One kind of vectors: an fp32 append to a bf16 KB (and back) is taken; int8 is refused.
    more = build_kb(b, passages[:6], [RulesExtractor(n_process=1)], embedder, progress=False, precision="fp32")
    assert more.embedded["passages"] == 2 and "fp32" in more.encoder
    before = b.read_bytes()
    with pytest.raises(KBError, match="made by the fp32 encoder, so it cannot take int8"):
        build_kb(b, passages[:8], [RulesExtractor(n_process=1)], embedder, progress=False, precision="int8")
    assert b.read_bytes() == before


def test_bf16_workers_give_the_vectors_of_the_fp32_model(embedder):
    from retrieval.encoders.parallel import ParallelEncoder

    texts = ["Lothair II", "Lothair II married Teutberga", "The Journal of Mathematical Physics is a journal.",
             "born in", "Teutberga was a queen of Lotharingia by marriage to Lothair II."] * 3
    two = ParallelEncoder.load(embedder, "bf16", workers=2)
    assert two.runtime == "torch" and len(two.workers) == 2
    ids = two.tokenize(texts)
    got = {}
    two.run(ids, [[0, 1, 2], [3, 4], list(range(5, 15))], lambda b, v: got.update(zip(b, v)))
    mat = np.stack([got[i] for i in range(len(texts))])
    ref = embedder.encode(texts)
    cos = (mat * ref).sum(1)
    assert cos.min() > 0.9998 and np.abs(mat - ref).max() > 0  # not fp32 itself, but within a hair of it
    assert np.allclose(np.linalg.norm(mat, axis=1), 1, atol=1e-5)


def test_the_default_encoder_is_bf16_only_where_the_cpu_has_it(monkeypatch):
    import retrieval.encoders.bf16 as bf16
    from retrieval.kb.embed import default_precision

    monkeypatch.delenv("HOPTRACE_BUILD_PRECISION", raising=False)
    monkeypatch.setattr(bf16, "native_bf16", lambda: False)
    assert default_precision() == "fp32" and EmbedSettings.from_env().precision == "fp32"
    monkeypatch.setattr(bf16, "native_bf16", lambda: True)
    assert default_precision() == "bf16" and EmbedSettings.from_env().precision == "bf16"
    assert EmbedSettings.from_env("fp32").precision == "fp32"


def test_bad_build_settings_in_the_environment_are_named(monkeypatch):
    monkeypatch.setenv("HOPTRACE_BUILD_PRECISION", "int4")
    with pytest.raises(ConfigError, match="HOPTRACE_BUILD_PRECISION must be one of fp32, bf16, int8, got 'int4'"):
        EmbedSettings.from_env()
    assert EmbedSettings.from_env("int8").precision == "int8"  # --precision outranks the variable
    monkeypatch.setenv("HOPTRACE_BUILD_PRECISION", "fp32")
    monkeypatch.setenv("HOPTRACE_BUILD_WORKERS", "-1")
    with pytest.raises(ConfigError, match="HOPTRACE_BUILD_WORKERS must be positive"):
        EmbedSettings.from_env()
    monkeypatch.setenv("HOPTRACE_BUILD_WORKERS", "1")
    monkeypatch.setenv("HOPTRACE_BUILD_TOKEN_BUDGET", "256")
    s = EmbedSettings.from_env()
    assert (s.precision, s.workers, s.token_budget, s.dedupe) == ("fp32", 1, 256, True)


def test_progress_names_each_layer_what_is_left_and_the_whole_builds_finish(small_corpus, embedder, tmp_path):
    passages, _ = small_corpus
    heard: list[BuildStatus] = []
    build_kb(tmp_path / "kb.sqlite", passages[:10], [RulesExtractor(n_process=1)], embedder, progress=False,
             listener=lambda st: heard.append(BuildStatus(**st.__dict__)))
    steps = [s.step for s in heard]
    assert any(s.startswith("extract ") for s in steps)
    embedded = {s.step.split()[1] for s in heard if s.step.startswith("embed ")}
    assert {"passages", "partial_triples", "entities"} <= embedded
    last = [s for s in heard if s.step.startswith("embed ")][-1]
    assert last.done == last.total and "0 in all layers" in last.line()
    mid = [s for s in heard if s.step.startswith("embed ") and s.done < s.total]
    assert mid and all("texts left in " + s.step.split()[1] in s.line() and "build done in" in s.line()
                       for s in mid)
    assert all(s.eta_s is None or s.eta_s >= 0 for s in heard)


def test_compare_against_pairs_two_experiments_by_question(ctx, tmp_path, capsys):
    from retrieval.bench.runner import run_bench
    from traces.stats.across import compare_across, render_across
    from traces.storage.experiments import Experiments, kb_fingerprint, question_record
    from traces.storage.store import TraceStore

    questions = ctx.store.questions()
    exps = Experiments(TraceStore(tmp_path / "traces.sqlite"))
    made = []
    for methods in (["bm25", "dense"], ["bm25", "dense", "composed"]):
        spec = {"methods": {m: {"method": m} for m in methods}, "ks": [5], "protocol": "per-k",
                "questions": [question_record(q) for q in questions], "args": {}}
        exp = exps.start("bench", "small", kb_fingerprint(ctx.store), "none", spec)
        res = run_bench(ctx, "small", questions, methods, ks=(5,), progress=False, sink=exps.sink(exp))
        exps.finish(exp, res.to_json(include_per_question=False))
        made.append(exp)
    c = compare_across(exps, made[0], made[1], "recall@5")
    assert [r.method for r in c.rows] == ["bm25", "dense"] and c.not_shared == ["composed"]
    for r in c.rows:  # the same KB and code: the same scores, no change
        assert r.change.n == len(questions) and r.change.mean_diff == 0 and r.verdict == "no significant change"
    text = render_across(c)
    assert "change = new − old" in text and "Holm-adjusted over 2 methods" in text and "composed" in text
    with pytest.raises(InputError, match="not the same one"):
        compare_across(exps, made[0], made[0], "recall@5")
    with pytest.raises(InputError, match="composed.*not scored in both"):
        compare_across(exps, made[0], made[1], "recall@5", ["composed"])
    with pytest.raises(InputError, match="up to k = 5"):
        compare_across(exps, made[0], made[1], "recall@10")


def test_rules_in_worker_processes_extract_what_one_process_does(musique):
    import dataclasses

    from retrieval.kb.extract.rules import load_spacy

    _, passages, _ = musique
    sample = passages[:210]  # 200 or more passages start the workers
    one = RulesExtractor(n_process=1)
    docs = load_spacy().pipe((p.text for p in sample), batch_size=64)
    alone = [dataclasses.asdict(one._one(p, d)) for p, d in zip(sample, docs)]
    workers = [dataclasses.asdict(x) for x in RulesExtractor(n_process=2).extract(sample)]
    assert workers == alone


def _same_as_afresh(kb, path) -> sqlite3.Connection:
    """A copy of `kb` at `path` whose same_as pairs were derived again from nothing."""
    import shutil

    from retrieval.kb.synonyms import derive_same_as

    shutil.copyfile(kb, path)
    con = db.connect(path)
    with con:
        con.execute("DELETE FROM same_as")
        db.set_meta(con, "same_as_upto", 0)
    derive_same_as(con)
    return con


def test_same_as_pairs_equal_the_nearest_neighbours_ranked_in_full(small_kb, tmp_path):
    """The threshold-first derivation against the plain one it replaced: every name's ten nearest
    (names with digits left out), kept when at least the threshold."""
    import re

    from retrieval.kb.synonyms import DEFAULT_THRESHOLD, MAX_NEIGHBOURS

    con = _same_as_afresh(small_kb, tmp_path / "kb.sqlite")
    rows = list(con.execute("SELECT entity, alias, method FROM same_as"))
    got = {(a, b) for a, b, m in rows if m == "embedding"}
    every = {(a, b) for a, b, _ in rows}  # a pair of names that normalise alike is kept under that reason
    name_of = dict(con.execute("SELECT rowid, name FROM entities"))
    ids, mat = db.load_vectors(con, "entities", db.get_meta(con, "embed_dim"))
    con.close()
    ok = np.array([not re.search(r"\d", name_of[int(i)]) for i in ids])
    sims = mat @ mat.T
    sims[:, ~ok] = -1.0
    np.fill_diagonal(sims, -1.0)
    want = set()
    for r in np.nonzero(ok)[0]:
        for j in np.argsort(-sims[r], kind="stable")[:MAX_NEIGHBOURS]:
            if sims[r, j] >= DEFAULT_THRESHOLD:
                want |= {(name_of[int(ids[r])], name_of[int(ids[j])]), (name_of[int(ids[j])], name_of[int(ids[r])])}
    assert got and got <= want and want <= every


def test_same_as_over_too_many_names_for_exact_comes_from_an_index_and_finds_the_exact_pairs(small_kb, tmp_path,
                                                                                            monkeypatch):
    """Above HOPTRACE_SAME_AS_EXACT_UP_TO comparable names (forced here with 0) the neighbours come
    from faiss's IVF index: nearly every exact pair, none below the threshold."""
    from retrieval.kb.synonyms import DEFAULT_THRESHOLD

    def derive(path):
        con = _same_as_afresh(small_kb, path)
        rows = {(a, b): s for a, b, s in con.execute(
            "SELECT entity, alias, similarity FROM same_as WHERE method='embedding'")}
        con.close()
        return rows

    exact = derive(tmp_path / "exact.sqlite")
    monkeypatch.setenv("HOPTRACE_SAME_AS_EXACT_UP_TO", "0")
    ivf = derive(tmp_path / "ivf.sqlite")
    assert len(exact) > 100
    assert len(set(exact) & set(ivf)) >= 0.95 * len(exact)
    assert min(ivf.values()) >= DEFAULT_THRESHOLD
    assert all(abs(ivf[p] - exact[p]) < 1e-3 for p in set(exact) & set(ivf))  # the same similarities
    monkeypatch.setenv("HOPTRACE_SAME_AS_EXACT_UP_TO", "lots")
    with pytest.raises(ConfigError, match="HOPTRACE_SAME_AS_EXACT_UP_TO must be a whole number, got 'lots'"):
        derive(tmp_path / "bad.sqlite")
