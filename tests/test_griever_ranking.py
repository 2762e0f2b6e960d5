"""GRIEVER's final ranking: the §4.4 passage score alone ("paths", the paper) or added to the
retrieval cosine ("retrieval+paths", the default), on hand-made numbers and on the small real KB."""
import pytest

from retrieval.core.errors import ConfigError
from retrieval.methods import make_method
from retrieval.methods.griever.scoring import final_ranking

# a: first hop, no path reaches it, but its cosine is high; b: first hop with a path;
# c: second hop, reached by a strong path, weak cosine.
COSINE = {"a": 0.80, "b": 0.60, "c": 0.35}
PATH = {"b": 0.30, "c": 0.50}


def test_paths_mode_ranks_by_passage_score_then_cosine():
    ranked = final_ranking(COSINE, PATH, "paths", 0.5)
    assert [p for p, _ in ranked] == ["c", "b", "a"]          # a has no path: last, whatever its cosine
    assert dict(ranked)["a"] == pytest.approx(1e-3 * 0.80)


def test_retrieval_plus_paths_adds_the_weighted_passage_score_to_the_cosine():
    ranked = final_ranking(COSINE, PATH, "retrieval+paths", 0.5)
    # a 0.80; b 0.60 + 0.5 · 0.30 = 0.75; c 0.35 + 0.5 · 0.50 = 0.60
    assert ranked == [("a", pytest.approx(0.80)), ("b", pytest.approx(0.75)), ("c", pytest.approx(0.60))]
    assert [p for p, _ in final_ranking(COSINE, PATH, "retrieval+paths", 0.0)] == ["a", "b", "c"]


def test_a_bad_setting_is_named(ctx):
    with pytest.raises(ConfigError, match="final_ranking"):
        make_method("griever", ctx, final_ranking="best").run("Who?", k=2)
    with pytest.raises(ConfigError, match="path_weight"):
        make_method("griever", ctx, path_weight=-1.0).run("Who?", k=2)


@pytest.mark.parametrize("k", [2, 5])
def test_with_no_second_hop_griever_keeps_every_gold_passage_composed_finds(ctx, small_store, k):
    """The second hop absent and the question unsplit, GRIEVER's candidates are Composed's k
    passages, so re-ranking them cannot lose one."""
    griever = make_method("griever", ctx, n_iterations=1, split_clauses=False)
    composed = make_method("composed", ctx)
    for q in small_store.questions():
        gold = set(q.gold_passage_ids)
        g, c = griever.run(q.text, k=k), composed.run(q.text, k=k)
        assert g.status == "ok", g.error
        assert set(g.ranked_ids()) == set(c.ranked_ids())
        assert len(gold & set(g.ranked_ids())) >= len(gold & set(c.ranked_ids()))


def test_the_trace_shows_each_candidates_hop_and_both_scores(ctx, small_store):
    q = small_store.questions()[0]
    run = make_method("griever", ctx).run(q.text, k=5)
    cands = next(s for s in run.stages if s.name == "paths").payload["candidates"]
    assert {c["hop"] for c in cands} == {1, 2}
    assert all({"passage_id", "passage_score", "cosine"} <= set(c) for c in cands)
    how = next(s for s in run.stages if s.name == "ranking").payload["how"]
    assert "retrieval cosine + 0.25" in how   # the local profile, GRIEVER's default
