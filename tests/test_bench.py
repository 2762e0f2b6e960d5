import json
import math

from retrieval.bench.metrics import allhit_at, anyhit_at, recall_at
from retrieval.bench.report import write_csv, write_html, write_json
from retrieval.bench.runner import run_bench


def test_metrics_on_hand_made_rankings():
    ranked, gold = ["a", "b", "c", "d"], ["b", "d"]
    assert recall_at(ranked, gold, 2) == 0.5 and recall_at(ranked, gold, 4) == 1.0
    assert anyhit_at(ranked, gold, 1) == 0.0 and anyhit_at(ranked, gold, 2) == 1.0
    assert allhit_at(ranked, gold, 3) == 0.0 and allhit_at(ranked, gold, 4) == 1.0
    assert math.isnan(recall_at(ranked, [], 2))


def test_bench_runs_methods_and_writes_reports(ctx, small_store, tmp_path):
    res = run_bench(ctx, "small", small_store.questions(), ["bm25", "composed"], progress=False)
    assert res.n_questions == 4
    for name in ("bm25", "composed"):
        row = res.methods[name]
        for key in ("recall@2", "recall@5", "recall@10", "recall@15", "anyhit@5", "allhit@5",
                    "latency_ms_p50", "latency_ms_p95", "tokens_in", "tokens_out"):
            assert key in row
        assert 0 < row["recall@15"] <= 1 and row["recall@2"] <= row["recall@15"]
        assert row["errors"] == 0
    out = tmp_path / "b.json"
    write_json(res, out)
    write_csv(res, tmp_path / "b.csv")
    write_html(res, tmp_path / "b.html")
    data = json.loads(out.read_text())
    assert data["n_questions"] == 4 and set(data["methods"]) == {"bm25", "composed"}
    # composed depends on k (k·c BM25 candidates): one run per k; bm25 is sliced from one run
    runs = {(r["method"], r["k"]) for r in data["per_question"]}
    assert {k for m, k in runs if m == "composed"} == {2, 5, 10, 15}
    assert {k for m, k in runs if m == "bm25"} == {15}
    assert (tmp_path / "b.csv").read_text().startswith("method,recall@2")
    assert "plotly" in (tmp_path / "b.html").read_text()[:5000].lower()


def test_em_and_f1_normalise_and_count_aliases():
    from retrieval.bench.metrics import exact_match, f1_score, normalize_answer
    assert normalize_answer("  The Anglican  Communion. ") == "anglican communion"
    assert exact_match("G. Stanley Hall", ["G. Stanley Hall", "Stanley Hall"]) == 1.0
    assert exact_match("stanley hall", ["G. Stanley Hall", "Stanley Hall"]) == 1.0   # the alias counts
    assert exact_match("Hall", ["G. Stanley Hall"]) == 0.0
    assert math.isclose(f1_score("Hall", ["G. Stanley Hall"]), 2 * (1 * 1 / 3) / (1 + 1 / 3))
    assert f1_score("Hall", ["G. Stanley Hall", "Hall"]) == 1.0                       # best alias wins
    assert f1_score("", ["x"]) == 0.0 and math.isnan(exact_match("x", []))


def test_bench_with_answer_reports_em_f1_from_a_scripted_llm(ctx, small_store):
    import dataclasses

    from llm_double import scripted_llm

    qs = small_store.questions()[:2]
    llm, backend = scripted_llm({"answer": [json.dumps({"answer": qs[0].answers[0]}),
                                            json.dumps({"answer": "wrong"})]})
    res = run_bench(dataclasses.replace(ctx, llm=llm), "small", qs, ["bm25"], progress=False, answer=True)
    assert res.methods["bm25"]["em"] == 0.5 and backend.purposes() == ["answer", "answer"]
    rows = [r for r in res.per_question if r.answer is not None]
    assert [r.em for r in rows] == [1.0, 0.0]


def test_cli_ask_names_the_llm_and_gear_falls_back_without_one(small_kb, capsys):
    from retrieval.cli import main
    assert main(["ask", "--kb", str(small_kb), "--llm", "none", "--method", "gear", "--k", "3",
                 "Who published Journal of Mathematical Physics?"]) == 0
    out = capsys.readouterr().out
    assert "LLM: none" in out and "fallback" in out and "NaiveGE" in out
    assert main(["ask", "--kb", str(small_kb), "--llm", "ftp://nowhere", "x"]) == 2
    assert "unknown LLM spec" in capsys.readouterr().err


def test_bench_pause_idles_before_each_question_untimed(ctx, small_store, monkeypatch, tmp_path):
    """--pause-ms: a pause before every question (a visitor's click comes after one), not
    counted in any latency; the result records it, and a negative pause is refused by name."""
    import pytest

    import retrieval.bench.runner as runner
    from retrieval.core.errors import ConfigError

    slept = []
    monkeypatch.setattr(runner.time, "sleep", lambda s: slept.append(s))
    res = run_bench(ctx, "small", small_store.questions(), ["bm25"], ks=[5], progress=False, pause_ms=250)
    assert slept == [0.25] * 4 and res.pause_ms == 250 and res.to_json()["pause_ms"] == 250
    assert res.methods["bm25"]["latency_ms_p50"] < 250
    write_html(res, tmp_path / "p.html")
    assert "250 ms idle before each (untimed)" in (tmp_path / "p.html").read_text()
    with pytest.raises(ConfigError, match="pause_ms"):
        run_bench(ctx, "small", small_store.questions(), ["bm25"], ks=[5], progress=False, pause_ms=-1)


def test_bench_app_sets_each_column_beside_bench_alone_and_paused(small_kb):
    """`bench-app --compare-bench` (issue 17 item 9): each LLM-free column's latency over the
    method's `bench` p50, back to back and after a pause; LLM methods are left out."""
    from appbench.load import compare_with_bench

    shown = {"bm25": {"alone_p50_ms": 2.0}, "dense": {"alone_p50_ms": 9.0}, "gear": {"alone_p50_ms": 9e4}}
    res = compare_with_bench(shown, ("bm25", "dense", "gear"), limit=2, pause_ms=20, kb=small_kb)
    assert res["questions"] == 2 and res["pause_ms"] == 20 and set(res["methods"]) == {"bm25", "dense"}
    dense = res["methods"]["dense"]
    assert dense["bench_p50_ms"] > 0 and dense["bench_pause_20ms_p50_ms"] > 0
    assert dense["column_over_bench"] == round(9.0 / dense["bench_p50_ms"], 2)
    assert dense["column_over_paused_bench"] == round(9.0 / dense["bench_pause_20ms_p50_ms"], 2)
