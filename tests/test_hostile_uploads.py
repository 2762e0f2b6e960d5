"""Uploads a script on the open internet would send: each is a clear error naming the problem
and the file by the name the visitor gave it, never a server path, and nothing is stored."""
from __future__ import annotations

import json

import pytest

from retrieval.core.errors import HopTraceError
from retrieval.kb.presets import build_from_files
from ui.public import visitor_message

GOOD = [{"title": "Victoria Falls", "text": "Victoria Falls is a waterfall on the Zambezi River."},
        {"title": "Zambezi", "text": "The Zambezi is the fourth-longest river in Africa."}]


def _write(folder, name: str, content) -> str:
    path = folder / name
    path.write_bytes(content if isinstance(content, bytes) else json.dumps(content).encode())
    return str(path)


HOSTILE = {
    "nested.json": (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    "huge.json": ([{"title": "Big", "text": "x" * 20_000_000}], "characters of text"),
    "types.json": ([{"title": 42, "text": ["not", "a", "string"]}], "field 'title' should be str, got int"),
    "dupes.json": (GOOD + [GOOD[0]], "duplicate passage"),
    "latin1.json": ('[{"title": "Caf\xe9", "text": "na\xefve"}]'.encode("latin-1"), "invalid UTF-8"),
    "notgzip.json.gz": (b"plain bytes, not gzip", "not a readable gzip file"),
    "shape.json": ({"just": "an object"}, "unknown corpus format"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_corpus_is_refused_with_its_name_and_nothing_is_stored(name, tmp_path):
    content, problem = HOSTILE[name]
    upload = tmp_path / "gradio" / "0f3a9c"          # where the server keeps the visitor's upload
    upload.mkdir(parents=True)
    path = _write(upload, name, content)
    out = tmp_path / "kbs" / "visitor.sqlite"
    with pytest.raises(HopTraceError) as err:
        build_from_files(out, path, progress=False, max_passages=2000)
    shown = visitor_message(str(err.value), {path: name})
    assert problem in shown and name in shown
    assert str(tmp_path) not in shown and "/gradio/" not in shown
    assert not out.exists() and not out.with_name(out.name + ".building").exists()


def test_questions_naming_passages_not_in_the_corpus_are_refused(tmp_path):
    corpus = _write(tmp_path, "corpus.json", GOOD)
    q = [{"id": "q1", "question": "Where?", "answer": "Zambia", "paragraphs": [
        {"idx": 0, "title": "Nowhere", "paragraph_text": "A passage nobody uploaded.", "is_supporting": True}]}]
    questions = _write(tmp_path, "questions.json", q)
    with pytest.raises(HopTraceError) as err:
        build_from_files(tmp_path / "kb.sqlite", corpus, questions, progress=False)
    shown = visitor_message(str(err.value), {questions: "questions.json", corpus: "corpus.json"})
    assert "gold passage(s) not in the corpus" in shown and "questions.json" in shown
    assert str(tmp_path) not in shown
    assert not (tmp_path / "kb.sqlite").exists()


def test_visitor_message_cuts_any_other_server_path_to_its_name():
    msg = "KB /home/user/.cache/hoptrace/kbs/x.sqlite is locked; see /tmp/gradio/abc/def/c.json[3]: bad"
    assert visitor_message(msg, {}) == "KB x.sqlite is locked; see c.json[3]: bad"
    assert visitor_message("c.json[0]: missing field 'text'", {}) == "c.json[0]: missing field 'text'"
