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
