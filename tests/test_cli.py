import json
import subprocess
import sys

from retrieval.cli import main
from retrieval.kb.extract.rules import RulesExtractor


def test_ask_prints_stages_and_json(small_kb, capsys):
    assert main(["ask", "--kb", str(small_kb), "--method", "composed", "--k", "3", "Who published Journal of Mathematical Physics?"]) == 0
    out = capsys.readouterr().out
    assert "bm25_candidates" in out and "dense_rerank" in out and "Journal of Mathematical Physics" in out
    assert main(["ask", "--kb", str(small_kb), "--json", "--method", "bm25", "Who published Journal of Mathematical Physics?"]) == 0
    trace = json.loads(capsys.readouterr().out)
    assert trace["method"] == "bm25" and trace["stages"][0]["name"] == "bm25"


def test_bad_input_exits_non_zero_with_a_named_problem(small_kb, capsys, tmp_path):
    assert main(["ask", "--kb", str(small_kb), "   "]) == 2
    assert "question is empty" in capsys.readouterr().err
    assert main(["ask", "--kb", str(small_kb), "x" * 10_000]) == 2
    assert "10,000 characters" in capsys.readouterr().err
    assert main(["ask", "--kb", str(small_kb), "--method", "nope", "x"]) == 2
    assert "unknown method 'nope'" in capsys.readouterr().err
    assert main(["ask", "--kb", str(tmp_path / "none.sqlite"), "x"]) == 2
    assert "no such KB" in capsys.readouterr().err


def test_bad_corpus_build_fails_and_leaves_no_kb(tmp_path, capsys):
    corpus = tmp_path / "c.json"
    corpus.write_bytes(b'[{"title": "A", "text": "ok"}, {"title": "B"}]')
    out = tmp_path / "x.sqlite"
    assert main(["build", "--corpus", str(corpus), "--out", str(out), "--quiet"]) == 2
    assert "missing field 'text'" in capsys.readouterr().err
    assert not out.exists() and not (tmp_path / "x.sqlite.building").exists()


def test_bench_cli_writes_json_csv_html(small_kb, tmp_path):
    out = tmp_path / "r.json"
    proc = subprocess.run([sys.executable, "-m", "retrieval.cli", "bench", "--kb", str(small_kb), "--methods",
                           "bm25,dense", "--json", str(out), "--quiet"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "recall@5" in proc.stdout
    data = json.loads(out.read_text())
    assert set(data["methods"]) == {"bm25", "dense"} and data["n_questions"] == 4
    assert out.with_suffix(".csv").exists() and out.with_suffix(".html").exists()


def test_kb_info(small_kb, capsys):
    assert main(["kb", "info", str(small_kb), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["counts"]["passages"] == 80 and info["embed_model"] == "all-MiniLM-L6-v2"
    assert {(r["layer"], r["status"]) for r in info["extraction"]} >= {("triples", "done"), ("events", "done")}
    assert main(["kb", "info", str(small_kb)]) == 0
    text = capsys.readouterr().out
    assert "extraction (passages per layer):" in text and f"rules@{RulesExtractor.version}" in text and "passages 80" in text


def test_serve_flags_reach_the_app(monkeypatch):
    """`serve --llm none --profile paper --public` is what the app starts with (not only parsed)."""
    import ui.app

    seen = {}
    monkeypatch.setattr(ui.app, "main", lambda **kw: seen.update(kw))
    assert main(["serve", "--llm", "none", "--profile", "paper", "--public", "--port", "7999"]) == 0
    assert seen["llm_settings"].backend == "none" and seen["profile"] == "paper"
    assert seen["public"] is True and seen["port"] == 7999
    seen.clear()
    assert main(["serve", "--llm", "none"]) == 0
    assert seen["public"] is None  # then HOPTRACE_PUBLIC decides (ui/public.py)
