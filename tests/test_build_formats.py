"""`hoptrace build` on a tiny corpus in every format the CLI reads, and for every method's layers:
a build that finished exits 0 and prints its whole report.

Eight one-sentence passages make the case that once crashed the report (issue 72): a passage's
only sentence is also its event and its proposition, so a later layer's vectors are all copied
from an earlier one and that layer encodes nothing.
"""
from __future__ import annotations

import json

import pytest

from retrieval.cli import main

PASSAGES = [
    ("Harbour Lights", "Harbour Lights is a 1963 album by the Irish singer Maura Keane."),
    ("Maura Keane", "Maura Keane was born in Galway in 1931."),
    ("Galway", "Galway is a city on the west coast of Ireland."),
    ("Tide Records", "Tide Records released Harbour Lights in 1963."),
    ("Tide Records founder", "Tide Records was founded by Colm Brady in Dublin."),
    ("Colm Brady", "Colm Brady was a Dublin record producer born in 1920."),
    ("Dublin", "Dublin is the capital of Ireland."),
    ("Ireland", "Ireland is an island in the North Atlantic."),
]


def _write(fmt: str, root):
    """The tiny corpus as `fmt`: the path `--corpus` takes."""
    if fmt == "json":
        path = root / "tiny.json"
        path.write_text(json.dumps([{"title": t, "text": x} for t, x in PASSAGES]))
    elif fmt in ("jsonl", "beir"):
        # JSONL as FlashRAG writes it ("contents" = "title\ntext"); BEIR's corpus.jsonl as BEIR does.
        rows = ([{"id": f"d{i}", "contents": f"{t}\n{x}"} for i, (t, x) in enumerate(PASSAGES)] if fmt == "jsonl"
                else [{"_id": f"d{i}", "title": t, "text": x} for i, (t, x) in enumerate(PASSAGES)])
        path = root / "tiny.jsonl" if fmt == "jsonl" else root / "beir"
        target = path if fmt == "jsonl" else path / "corpus.jsonl"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
        if fmt == "beir":
            (path / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "Who founded the label that "
                                                            "released Harbour Lights?"}) + "\n")
            (path / "qrels").mkdir()
            (path / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td3\t1\nq1\td4\t1\n")
    else:
        path = root / "tiny.tsv"
        path.write_text("id\ttext\ttitle\n" + "".join(f"d{i}\t{x}\t{t}\n" for i, (t, x) in enumerate(PASSAGES)))
    return path


def _build(tmp_path, capsys, fmt: str, *extra: str) -> tuple[int, str]:
    out = tmp_path / "kb.sqlite"
    rc = main(["build", "--corpus", str(_write(fmt, tmp_path)), "--out", str(out), "--quiet", *extra])
    return rc, capsys.readouterr().out


@pytest.mark.parametrize("fmt", ["json", "jsonl", "tsv", "beir"])
def test_a_tiny_corpus_in_each_format_builds_every_layer_and_exits_0(fmt, tmp_path, capsys):
    rc, out = _build(tmp_path, capsys, fmt)
    assert rc == 0, out
    assert "passages: 8 (8 new)" in out
    assert "ready:" in out and "griever" in out and "grasp" in out
    encoded = next(line for line in out.splitlines() if line.startswith("encoded:"))
    assert "distinct texts" in encoded
    per_layer = out.splitlines()[out.splitlines().index(encoded) + 1]
    # Every embedded layer is named with what it encoded or that its vectors were copied.
    for layer in ("passages", "triples", "events", "propositions", "entities"):
        assert layer in per_layer, per_layer
    assert out.rstrip().endswith("kb.sqlite")
    if fmt == "beir":
        assert "questions: 1" in out


@pytest.mark.parametrize("method", ["bm25", "dense", "griever", "gear", "sag", "grasp"])
def test_each_methods_layers_alone_build_and_exit_0(method, tmp_path, capsys):
    rc, out = _build(tmp_path, capsys, "json", "--methods", method)
    assert rc == 0, out
    assert "passages: 8 (8 new)" in out and out.rstrip().endswith("kb.sqlite")
    assert main(["kb", "info", str(tmp_path / "kb.sqlite")]) == 0
    serves = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("serves:"))
    assert method in serves.removeprefix("serves:").replace(",", " ").split(), serves
