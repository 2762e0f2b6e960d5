"""A collection as it is (issue 64): its own passage ids in JSON, JSONL, TSV and BEIR folders, TREC
qrels as gold, ids kept from the file through the KB and a run's trace to an export."""
import json
from pathlib import Path

import pytest

from retrieval.core.errors import InputError
from retrieval.corpus import load_corpus, load_questions, read_beir
from retrieval.corpus.collection import ids_kind, read_qrels


def _jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_jsonl_keeps_ids_reads_flashrag_contents_and_names_bad_lines(tmp_path):
    f = _jsonl(tmp_path / "c.jsonl", [{"_id": "d1", "title": "Alpha", "text": "Alpha is a town."},
                                      {"id": 7, "contents": "\"Beta\"\nBeta is a river."},
                                      {"id": "d3", "text": "No title here."}])
    ps = load_corpus(f)
    assert [(p.id, p.title, p.text) for p in ps] == [("d1", "Alpha", "Alpha is a town."),
                                                     ("7", "Beta", "Beta is a river."), ("d3", "", "No title here.")]
    assert ids_kind([p.id for p in ps]) == "the collection's own ids"

    dup = _jsonl(tmp_path / "dup.jsonl", [{"id": "a", "text": "x"}, {"id": "b", "text": "y"}, {"id": "a", "text": "z"}])
    with pytest.raises(InputError, match=r"passage id 'a' appears twice: line 1 and line 3"):
        load_corpus(dup)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "text": "x"}\n{"id": "b", "text": \n')
    with pytest.raises(InputError, match=r"bad.jsonl: line 2 is not JSON"):
        load_corpus(bad)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    with pytest.raises(InputError, match="the corpus has no passages"):
        load_corpus(empty)


def test_tsv_and_json_records_keep_their_ids_and_refuse_a_repeated_one(tmp_path):
    tsv = tmp_path / "collection.tsv"
    tsv.write_text("id\ttext\ttitle\n0\tThe first passage.\tOne\n1\tThe second passage.\n")
    assert [(p.id, p.title) for p in load_corpus(tsv)] == [("0", "One"), ("1", "")]
    tsv.write_text("0\tonly\tthree\tfour\n")
    with pytest.raises(InputError, match=r"line 1: expected id<TAB>text"):
        load_corpus(tsv)

    js = tmp_path / "c.json"
    js.write_text(json.dumps([{"id": "p1", "title": "A", "text": "a"}, {"title": "B", "text": "b"}]))
    ids = [p.id for p in load_corpus(js)]
    assert ids[0] == "p1" and ids[1].startswith("chunk-")   # no id: today's chunk id
    assert ids_kind(ids).startswith("mixed")
    js.write_text(json.dumps([{"id": "p1", "title": "A", "text": "a"}, {"id": "p1", "title": "B", "text": "b"}]))
    with pytest.raises(InputError, match=r"passage id 'p1' appears twice: .*\[0\] and .*\[1\]"):
        load_corpus(js)


def test_jsonl_questions_take_graded_gold_from_trec_qrels(tmp_path):
    corpus = load_corpus(_jsonl(tmp_path / "c.jsonl", [{"id": f"d{i}", "text": f"text {i}"} for i in range(4)]))
    qs = _jsonl(tmp_path / "q.jsonl", [{"id": "q1", "question": "Which?", "golden_answers": ["x"]},
                                       {"_id": "q2", "text": "What?"}])
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("q1 0 d0 2\nq1 0 d1 1\nq1 0 d2 0\nq2 0 d3 1\n")
    got = load_questions(qs, corpus, qrels)
    assert [(q.id, q.gold_passage_ids, q.answers) for q in got] == [("q1", ["d0", "d1"], ["x"]), ("q2", ["d3"], [])]
    assert load_questions(qs, corpus, qrels, min_grade=2)[0].gold_passage_ids == ["d0"]
    assert read_qrels(qrels)["q1"] == {"d0": 2, "d1": 1, "d2": 0}   # graded stays graded
    assert got[0].grades == {"d0": 2, "d1": 1, "d2": 0}
    qrels.write_text("q1 0 d0 1\nq1 0 nowhere-7 1\n")
    with pytest.raises(InputError, match=r"question 'q1' grades passage id 'nowhere-7'"):
        load_questions(qs, corpus, qrels)


def make_beir(folder: Path, n_questions: int = 6) -> Path:
    """A BEIR folder from the bundled HotpotQA data, in ids of its own ("hp-0001", …)."""
    from retrieval.corpus.datasets import get_dataset

    ds = get_dataset("hotpotqa")
    passages = load_corpus(ds.corpus)
    questions = load_questions(ds.questions, passages)[:n_questions]
    keep = {g for q in questions for g in q.gold_passage_ids}
    keep |= {p.id for p in passages[:40]}
    own = {p.id: f"hp-{i:04d}" for i, p in enumerate(p for p in passages if p.id in keep)}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "qrels").mkdir(exist_ok=True)
    _jsonl(folder / "corpus.jsonl", [{"_id": own[p.id], "title": p.title, "text": p.text}
                                      for p in passages if p.id in own])
    _jsonl(folder / "queries.jsonl", [{"_id": f"q{i}", "text": q.text, "metadata": {}}
                                       for i, q in enumerate(questions)])
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"q{i}\t{own[g]}\t1\n" for i, q in enumerate(questions) for g in q.gold_passage_ids))
    return folder


def test_a_beir_folder_is_read_with_its_split_and_says_which_splits_it_has(tmp_path):
    folder = make_beir(tmp_path / "beir")
    passages, questions = read_beir(folder)
    assert all(p.id.startswith("hp-") for p in passages) and len(questions) == 6
    assert all(g.startswith("hp-") for q in questions for g in q.gold_passage_ids)
    with pytest.raises(InputError, match=r"no qrels/dev.tsv \(it has test: pass --split\)"):
        read_beir(folder, "dev")


def test_beir_ids_are_kept_from_the_file_through_the_kb_a_trace_and_an_export(tmp_path, embedder):
    from retrieval.bench.runner import run_bench
    from retrieval.kb.build import build_kb
    from retrieval.kb.extract.rules import RulesExtractor
    from retrieval.methods import Context
    from retrieval.store.sqlite import SQLiteStore
    from traces.storage.experiments import Experiments, kb_fingerprint, question_record
    from traces.storage.store import TraceStore

    passages, questions = read_beir(make_beir(tmp_path / "beir"))
    kb = tmp_path / "beir.sqlite"
    build_kb(kb, passages, [RulesExtractor(("triples", "events", "propositions"))], embedder, questions=questions,
             name="beir", progress=False)
    store = SQLiteStore(kb)
    assert set(store.all_passage_ids()) == {p.id for p in passages}
    assert store.questions()[0].gold_passage_ids == questions[0].gold_passage_ids
    # The KB keeps the qrels' grades beside the gold, and an experiment's questions carry them.
    assert store.questions()[0].grades == {g: 1 for g in questions[0].gold_passage_ids}
    assert question_record(store.questions()[0])["grades"] == store.questions()[0].grades
    ctx = Context(store, embedder)
    exps = Experiments(TraceStore(tmp_path / "traces.sqlite"))
    spec = {"methods": {"bm25": {}, "dense": {}}, "ks": [5], "protocol": "per-k",
            "questions": [question_record(q) for q in store.questions()], "args": {}}
    exp = exps.start("bench", "beir", kb_fingerprint(store), "none", spec)
    res = run_bench(ctx, "beir", store.questions(), ["bm25", "dense"], ks=[5], progress=False, sink=exps.sink(exp))
    assert res.methods["dense"]["recall@5"] > 0
    run, _ = exps.traces.load_run(exps.entries(exp)[0]["run_id"])
    assert run.ranked and all(r.passage_id.startswith("hp-") for r in run.ranked)
    from traces.storage.runfiles import export_run

    lines = export_run(exps, exp, "dense").splitlines()
    assert lines and all(line.split()[2].startswith("hp-") for line in lines)

    # A run made elsewhere, in the collection's ids, enters the comparison with no translation,
    # and its recall@5 is the one computed here by hand.
    from retrieval.bench.metrics import recall_at
    from traces.stats.compare import compare
    from traces.storage.runfiles import import_run, read_run

    golds = {q.id: q.gold_passage_ids for q in store.questions()}
    ranked = {q: sorted(golds[q])[:1] + [p.id for p in passages[:4]] for q in golds}
    run_file = tmp_path / "elsewhere.trec"
    run_file.write_text("".join(f"{q} Q0 {pid} {i + 1} {10 - i} bm25s\n" for q, ids in ranked.items()
                                for i, pid in enumerate(ids)))
    import_run(exps, exp, read_run(run_file), "elsewhere", store)
    by_hand = sum(recall_at(ranked[q], golds[q], 5) for q in golds) / len(golds)
    c = compare(exps, exp, "recall@5")
    assert c.means["elsewhere"].mean == pytest.approx(by_hand)
    # A run made elsewhere has no cost here: "not recorded", not "price unknown" and not $0.
    assert {t.method: t.usd_label for t in c.tradeoff} == {"bm25": "$0", "dense": "$0", "elsewhere": "not recorded"}


def _local_irds(folder: Path, name: str) -> str:
    """A dataset ir_datasets reads from local files (nothing downloaded): the BEIR folder above as
    TSV documents and queries and TREC qrels, registered under `name`."""
    import ir_datasets
    from ir_datasets.datasets.base import Dataset
    from ir_datasets.formats import TrecQrels, TsvDocs, TsvQueries
    from ir_datasets.util import LocalDownload

    passages, questions = read_beir(make_beir(folder / "beir"))
    (folder / "docs.tsv").write_text("".join(f"{p.id}\t{p.title}. {p.text}\n" for p in passages))
    (folder / "queries.tsv").write_text("".join(f"{q.id}\t{q.text}\n" for q in questions))
    (folder / "qrels.txt").write_text("".join(f"{q.id} 0 {g} 1\n" for q in questions for g in q.gold_passage_ids))
    if name not in ir_datasets.registry:
        ir_datasets.registry.register(name, Dataset(
            TsvDocs(LocalDownload(folder / "docs.tsv")), TsvQueries(LocalDownload(folder / "queries.tsv")),
            TrecQrels(LocalDownload(folder / "qrels.txt"), {0: "not relevant", 1: "relevant"})))
    return name


def test_ir_datasets_on_a_local_dataset_and_the_offline_error(tmp_path, monkeypatch):
    from retrieval.core.errors import ConfigError
    from retrieval.corpus.irds import load_irds
    from retrieval.kb.presets import IRDS, load_sources

    name = _local_irds(tmp_path, "hoptrace-test/hotpotqa-local")
    passages, questions = load_irds(name)
    assert len(passages) > 40 and all(p.id.startswith("hp-") for p in passages)
    assert len(questions) == 6 and all(q.gold_passage_ids and q.gold_passage_ids[0].startswith("hp-")
                                       for q in questions)
    same, _ = load_sources(IRDS + name)
    assert [p.id for p in same] == [p.id for p in passages]

    # An unknown name, and a dataset whose files cannot be fetched (this machine has no network).
    with pytest.raises(InputError, match="ir_datasets has no dataset 'no/such/thing'"):
        load_irds("no/such/thing")
    monkeypatch.setenv("IR_DATASETS_HOME", str(tmp_path / "irds-home"))
    import ir_datasets

    def offline(*a, **k):
        raise OSError("Max retries exceeded with url: /thakur/BEIR/datasets/hotpotqa.zip (no network)")

    ds = ir_datasets.load("beir/hotpotqa/test")
    monkeypatch.setattr(type(ds), "docs_iter", offline, raising=False)
    monkeypatch.setattr(ir_datasets, "load", lambda n: ds)
    with pytest.raises(ConfigError, match=r"could not read 'beir/hotpotqa/test'.*irds-home"):
        load_irds("beir/hotpotqa/test")
