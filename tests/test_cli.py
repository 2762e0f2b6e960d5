import json
import subprocess
import sys

import pytest

from retrieval.cli import main
from retrieval.kb.extract.rules import RulesExtractor


def test_ask_prints_stages_and_json(small_kb, capsys):
    assert main(["ask", "--kb", str(small_kb), "--method", "composed", "--k", "3", "Who published Journal of "
                                                                                   "Mathematical Physics?"]) == 0
    out = capsys.readouterr().out
    assert "bm25_candidates" in out and "dense_rerank" in out and "Journal of Mathematical Physics" in out
    assert main(["ask", "--kb", str(small_kb), "--json", "--method", "bm25", "Who published Journal of Mathematical "
                                                                             "Physics?"]) == 0
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


def test_bench_cli_writes_json_csv_html_prints_json_and_names_the_protocol(small_kb, tmp_path):
    out = tmp_path / "r.json"
    proc = subprocess.run([sys.executable, "-m", "retrieval.cli", "bench", "--kb", str(small_kb), "--methods",
                           "bm25,griever", "--ks", "2,5", "--set", "griever.path_weight=0.25", "--out", str(out),
                           "--json", "--quiet"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    printed = json.loads(proc.stdout)   # --json: standard output is the JSON alone
    data = json.loads(out.read_text())
    assert set(data["methods"]) == set(printed["methods"]) == {"bm25", "griever"} and data["n_questions"] == 4
    assert out.with_suffix(".csv").exists() and out.with_suffix(".html").exists()
    # the table went to standard error, each recall saying how it was asked
    assert "recall@5 (asked at k=5)" in proc.stderr and "protocol per-k" in proc.stderr
    assert "settings griever.path_weight=0.25" in proc.stderr


def test_an_old_flag_spelling_fails_naming_the_new_one_before_anything_runs(capsys, tmp_path):
    from retrieval.cli import main

    cases = [(["bench", "--kb", "nowhere", "--methods", "bm25", "--json", str(tmp_path / "r.json")],
              f"write the file with --out {tmp_path / 'r.json'}"),
             (["compare", "latest", "--json=cmp.json"], "write the file with --out cmp.json"),
             (["reproduce", "sag", "--questions-limit", "5"], "--limit N"),
             (["record-experiment", "--questions", "10"], "--question-count N"),
             (["record-experiment", "--llm-questions", "10"], "--llm-question-count N"),
             (["experiments", "--limit", "5"], "--last N"),
             (["questions", "review", "--kb", "k", "gen", "q1", "edit", "--question", "new?"], "--question-text"),
             (["questions", "review", "--kb", "k", "gen", "q1", "edit", "--answer", "Paris"], "--answer-text"),
             (["bench-app", "--runs", "3"], "--run-count N")]
    for argv, new in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert err.startswith("hoptrace: error:") and new in err and "\n" not in err, (argv, err)
    assert not (tmp_path / "r.json").exists()
    # the switch itself still works where it always printed JSON
    assert main(["experiments", "--json", "--last", "1"]) == 0
    json.loads(capsys.readouterr().out)


def test_no_flag_takes_two_kinds_of_value_across_the_commands():
    """A flag is a switch, a count, a path or a text in every command that has it; only `--out` is a
    path or a KB name (build), both where the command's output goes."""
    import argparse

    from retrieval.cli import _parser, commands

    kinds: dict[str, set] = {}
    for _, parser in commands(_parser()):
        for a in parser._actions:
            if a.option_strings and not isinstance(a, argparse._HelpAction):
                kind = ("switch" if a.nargs == 0 else "count" if a.type is int else
                        "path" if getattr(a.type, "__name__", "") == "Path" else "text")
                kinds.setdefault(a.option_strings[-1], set()).add(kind)
    two = {f: k for f, k in kinds.items() if len(k) > 1 and f != "--out"}
    assert not two, two
    assert kinds["--json"] == {"switch"} and kinds["--questions"] == {"path"} and kinds["--limit"] == {"count"}


def test_set_names_its_method_and_a_wrong_one_is_refused():
    from retrieval.cli.flags import method_settings
    from retrieval.core.errors import ConfigError

    assert method_settings(["griever.path_weight=0.25", "sag.k_event=2", "sag.reranker=none"],
                           ["griever", "sag"]) == {"griever": {"path_weight": 0.25},
                                                   "sag": {"k_event": 2, "reranker": "none"}}
    assert method_settings(["t_max=30"], ["griever"]) == {"griever": {"t_max": 30}}
    for pairs, said in ((["t_max=30"], "say whose setting it is"), (["gear.beam=2"], "not among the methods run"),
                        (["griever.t_max"], "METHOD.KEY=VALUE")):
        with pytest.raises(ConfigError, match=said):
            method_settings(pairs, ["griever", "sag"])


def test_kb_info(small_kb, capsys):
    assert main(["kb", "info", str(small_kb), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["counts"]["passages"] == 80 and info["embed_model"] == "all-MiniLM-L6-v2"
    assert {(r["layer"], r["status"]) for r in info["extraction"]} >= {("triples", "done"), ("events", "done")}
    assert main(["kb", "info", str(small_kb)]) == 0
    text = capsys.readouterr().out
    assert "extraction (passages per layer):" in text and f"rules@{RulesExtractor.version}" in text
    assert "passages 80" in text
    from retrieval.kb.embed import default_precision  # the fixture KB is built with this machine's default

    assert f"vectors from the {default_precision()} encoder" in text
    assert f"{default_precision()} ×" in text.split("last build:")[1]  # "encoder torch bf16 ×2"


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


def test_questions_without_gold_bench_judge_qrels_and_compare_from_the_cli(small_kb, small_store, tmp_path, capsys):
    import re

    from traces.judging.qrels import Qrels
    from traces.storage.store import TraceStore, default_path

    kb = str(small_kb)
    mine = [{"id": f"c{i}", "question": q.text, "answer": q.answers[0]} for i, q in enumerate(small_store.questions())]
    (tmp_path / "mine.json").write_text(json.dumps(mine))
    assert main(["questions", "add", "--kb", kb, str(tmp_path / "mine.json"), "--name", "cli-set"]) == 0
    assert "cli-set · 4 questions · no gold, 4 with answers" in capsys.readouterr().out
    # bad files: each names its problem, and the KB's sets stay as they were
    (tmp_path / "empty.txt").write_text("\n")
    (tmp_path / "dup.json").write_text(json.dumps([{"id": "a", "question": "x?"}, {"id": "a", "question": "y?"}]))
    (tmp_path / "blank.csv").write_text("question\n   \n")
    for f, problem in [("empty.txt", "no questions in the file"), ("dup.json", "duplicate id 'a'"),
                       ("blank.csv", "line 2: the question is empty")]:
        assert main(["questions", "add", "--kb", kb, str(tmp_path / f), "--name", "bad"]) == 2
        assert problem in capsys.readouterr().err
    assert main(["questions", "add", "--kb", kb, str(tmp_path / "mine.json"), "--name", "cli-set"]) == 2
    assert "already has a question set named 'cli-set'" in capsys.readouterr().err
    assert main(["questions", "list", "--kb", kb]) == 0
    listed = capsys.readouterr().out
    assert "built-in · 4 questions · with gold" in listed and listed.count("cli-set") == 1 and "bad" not in listed

    assert main(["bench", "--kb", kb, "--question-set", "cli-set", "--methods", "bm25,dense", "--ks", "5",
                 "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "recall@5" not in out and "no gold passages" in out
    exp = re.search(r"experiment ([0-9a-f]{32}):", out).group(1)
    assert main(["compare", exp, "--metric", "recall@5"]) == 2
    assert "have no gold passages" in capsys.readouterr().err

    assert main(["judge", exp, "--depth", "5"]) == 0
    got = capsys.readouterr()
    assert "judge: answer (the default." in got.err and "pool: depth 5 of bm25, dense · 4 questions" in got.out
    qrels = Qrels(TraceStore(default_path()))
    before = qrels.counts(exp)
    # an endpoint that does not answer: named, nothing judged or stored
    assert main(["judge", exp, "--depth", "5", "--judge", "llm", "--llm", "http://127.0.0.1:9/v1",
                 "--llm-model", "m"]) == 2
    assert "does not answer" in capsys.readouterr().err
    assert qrels.counts(exp) == before

    assert main(["qrels", "export", exp, str(tmp_path / "out.qrels")]) == 0
    lines = (tmp_path / "out.qrels").read_text().splitlines()
    assert lines and all(len(x.split()) == 4 for x in lines)
    q, _, p, _ = lines[0].split()
    for text, problem in [(f"nope 0 {p} 2\n", "unknown question 'nope'"), (f"{q} 0 nope 2\n", "unknown passage"),
                          (f"{q} 0 {p} 9\n", "grade 9 is outside 0–3")]:
        (tmp_path / "bad.qrels").write_text(text)
        assert main(["qrels", "import", exp, str(tmp_path / "bad.qrels")]) == 2
        assert problem in capsys.readouterr().err
    assert qrels.counts(exp) == before
    (tmp_path / "mine.qrels").write_text(f"{q} 0 {p} 3\n")
    assert main(["qrels", "import", exp, str(tmp_path / "mine.qrels")]) == 0
    assert qrels.counts(exp)["person"] == {"ok": 1, "failed": 0}
    assert main(["compare", exp, "--metric", "ndcg@5"]) == 0
    out = capsys.readouterr().out
    assert "ndcg@5 (asked at k=5) on" in out and "judged: 1 pairs by a person (the reference)" in out
    assert "answer rule" in out
