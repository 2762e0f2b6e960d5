import pytest

from retrieval.core.errors import ConfigError, InputError
from retrieval.methods import METHODS, make_method

QUESTION = "Who was the first president of the association which published Journal of Psychotherapy Integration?"


@pytest.mark.parametrize("name", ["bm25", "dense", "rrf_hybrid", "composed"])
def test_baselines_emit_stages_and_a_ranking(ctx, name):
    run = make_method(name, ctx).run(QUESTION, k=5)
    assert run.status == "ok", run.error
    assert len(run.ranked) == 5
    assert run.ranked[0].title == "Journal of Psychotherapy Integration"
    assert run.stages[-1].name == "ranking"
    assert all(s.latency_ms >= 0 and s.tokens_in == 0 for s in run.stages)
    g = run.stages[-1].subgraph
    assert {n.type for n in g.nodes} == {"question", "passage"} and len(g.edges) == 5
    d = run.to_dict()
    assert d["stages"][0]["payload"] and d["tokens_in"] == 0


def test_composed_only_rescores_bm25_candidates(ctx):
    run = make_method("composed", ctx, c=1).run(QUESTION, k=3)
    candidates = {c["passage_id"] for c in run.stages[0].payload["candidates"]}
    assert len(candidates) == 3 and set(run.ranked_ids()) <= candidates
    assert [s.name for s in run.stages] == ["bm25_candidates", "encode", "dense_rerank", "ranking"]


def test_bad_input_is_refused_before_running(ctx):
    m = make_method("bm25", ctx)
    with pytest.raises(InputError, match="empty"):
        m.run("  ")
    with pytest.raises(ConfigError, match="k must be at least 1"):
        m.run("x", k=0)
    with pytest.raises(ConfigError, match="unknown method 'nope'"):
        make_method("nope", ctx)
    with pytest.raises(ConfigError, match="unknown setting"):
        make_method("composed", ctx, cc=3)


def test_a_crashing_stage_becomes_a_failed_run_not_an_exception(ctx, monkeypatch):
    m = make_method("dense", ctx)
    monkeypatch.setattr(ctx.store, "knn", lambda *a, **k: 1 / 0)
    run = m.run(QUESTION)
    assert run.status == "error" and "ZeroDivisionError" in run.error
    assert run.stages[-1].status == "error" and "traceback" in run.stages[-1].payload


def test_trace_round_trips_through_json(ctx):
    from retrieval.trace.model import RunResult
    run = make_method("rrf_hybrid", ctx).run(QUESTION, k=3)
    again = RunResult.from_dict(run.to_dict())
    assert again.to_dict() == run.to_dict()


def test_registry_lists_baselines():
    assert {"bm25", "dense", "rrf_hybrid", "composed"} <= set(METHODS)
