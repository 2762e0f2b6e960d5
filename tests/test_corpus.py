import gzip
import json

import pytest

from retrieval.core.errors import InputError
from retrieval.core.records import passage_id
from retrieval.corpus import load_corpus, load_questions
from retrieval.corpus.datasets import DATASETS


@pytest.mark.parametrize("name,n_passages,n_questions,n_gold", [
    ("musique", 1890, 100, 237), ("hotpotqa", 994, 100, 200), ("2wiki", 6119, 93, 224)])
def test_bundled_datasets_import_with_every_gold_passage(name, n_passages, n_questions, n_gold):
    ds = DATASETS[name]
    passages = load_corpus(ds.corpus)
    questions = load_questions(ds.questions, passages)
    assert len(passages) == n_passages
    assert len(questions) == n_questions
    assert sum(len(q.gold_passage_ids) for q in questions) == n_gold
    assert all(q.answers and q.text for q in questions)


def test_musique_questions_keep_hops_aliases_and_decomposition(musique):
    _, _, questions = musique
    q = questions[0]
    assert q.answers == ["G. Stanley Hall", "Stanley Hall"]
    assert q.hops == 2 and q.type == "2hop"
    assert q.decomposition[1]["question"] == "Who was the first president of #1 ?"


def test_passage_ids_are_hipporag_chunk_ids():
    # HippoRAG 2: "chunk-" + md5(title + "\n" + text)
    assert passage_id("A", "b") == "chunk-" + __import__("hashlib").md5(b"A\nb").hexdigest()


def write(tmp_path, name, data: bytes):
    p = tmp_path / name
    p.write_bytes(data)
    return p


def test_invalid_utf8_names_the_byte(tmp_path):
    p = write(tmp_path, "c.json", b'[{"title": "A", "text": "caf\xe9"}]')
    with pytest.raises(InputError, match=r"invalid UTF-8 at byte 28 \(line 1\)"):
        load_corpus(p)


@pytest.mark.parametrize("data,message", [
    ([{"title": "A"}], r"c.json\[0\]: missing field 'text'"),
    ([{"title": "A", "text": "  "}], r"empty text"),
    ([{"title": "", "text": "x"}], r"empty title"),
    ([{"title": "A", "text": "x"}, {"title": "A", "text": "x"}], r"duplicate passage: title 'A'"),
    ([{"title": "A", "text": 3}], r"field 'text' should be str"),
    ([], r"no passages"),
    ({"A": "not a list"}, r"unknown corpus format"),
])
def test_bad_corpus_errors_name_the_problem(tmp_path, data, message):
    p = write(tmp_path, "c.json", json.dumps(data).encode())
    with pytest.raises(InputError, match=message):
        load_corpus(p)


def test_duplicate_title_in_title_sentences_corpus_is_an_error(tmp_path):
    p = write(tmp_path, "c.json", b'{"A": ["x."], "A": ["y."]}')
    with pytest.raises(InputError, match="duplicate key 'A'"):
        load_corpus(p)


def test_repeated_title_with_other_text_is_allowed(tmp_path):
    # MuSiQue splits articles: 85 titles repeat in the demo corpus with different text.
    p = write(tmp_path, "c.json", json.dumps([{"title": "A", "text": "x"}, {"title": "A", "text": "y"}]).encode())
    assert len(load_corpus(p)) == 2


def test_gzip_and_not_json(tmp_path):
    p = write(tmp_path, "c.json.gz", gzip.compress(b'[{"title": "A", "text": "x"}]'))
    assert load_corpus(p)[0].title == "A"
    with pytest.raises(InputError, match="not valid JSON"):
        load_corpus(write(tmp_path, "bad.json", b"[{"))
    with pytest.raises(InputError, match="file not found"):
        load_corpus(tmp_path / "missing.json")


def test_questions_with_gold_outside_the_corpus_are_refused(tmp_path, musique):
    _, passages, _ = musique
    q = [{"_id": "x", "question": "?", "answer": "a", "supporting_passage_idx": [99999]}]
    with pytest.raises(InputError, match="outside the corpus"):
        load_questions(write(tmp_path, "q.json", json.dumps(q).encode()), passages)
