"""GRIEVER end to end on the small real KB (real embedder, real SQLite)."""
import pytest

from retrieval.methods import make_method

Q = "Who was the first president of the association which published Journal of Psychotherapy Integration?"


@pytest.fixture(scope="module")
def run(ctx):
    return make_method("griever", ctx).run(Q, k=5)


def test_every_paper_step_is_a_stage(run):
    assert run.status == "ok", run.error
    names = [s.name for s in run.stages]
    for expected in ["encode", "clause_split", "retrieve_1", "shortlist_1", "same_as_1", "match_1", "score_1",
                     "rewrite_1", "filter_1", "encode_2", "retrieve_2", "shortlist_2", "match_2", "score_2",
                     "paths", "ranking"]:
        assert expected in names, expected
    split = next(s for s in run.stages if s.name == "clause_split")
    assert [x["connector"] for x in split.payload["sub_queries"]] == ["", "which"]


def test_trace_shows_matches_with_their_ngrams_and_scores(run):
    match = next(s for s in run.stages if s.name == "match_1")
    ents = match.payload["entities"]
    assert ents and all({"entity", "score", "ngram"} <= set(e) for e in ents)
    top = ents[0]
    assert top["entity"] == "Journal of Psychotherapy Integration" and top["score"] > 0.8
    score = next(s for s in run.stages if s.name == "score_1")
    t = score.payload["triples"][0]
    assert set(t["partials"]) == {"subject", "object"} and t["score"] > 0
    assert score.subgraph and {n.type for n in score.subgraph.nodes} >= {"entity", "triple", "passage"}


def test_rewrite_puts_the_join_entity_into_the_query(run):
    rw = next(s for s in run.stages if s.name == "rewrite_1").payload
    best = next(s for s in run.stages if s.name == "score_1").payload["triples"][0]
    # the journal is "published by" the APA and "published on behalf of" a society; both
    # triples score within 0.01, and either is a right first hop
    assert best["triple"].startswith("(Journal of Psychotherapy Integration) -[published")
    assert rw["inserted"] == best["join_entity"] and rw["inserted"] in rw["after"]
    assert "Journal of Psychotherapy Integration" not in rw["after"]
    assert rw["after"].startswith("Who was the first president of")


def test_subgraph_filter_excludes_seen_passages_and_requires_a_join_entity(run, small_store):
    first = {c["passage_id"] for c in next(s for s in run.stages if s.name == "retrieve_1").payload["combined"]}
    filt = next(s for s in run.stages if s.name == "filter_1").payload
    joins = set(filt["join_entities"])
    second = [c["passage_id"] for c in next(s for s in run.stages if s.name == "retrieve_2").payload["top"]]
    assert second and not (set(second) & first)
    for pid in second:
        ents = {e for t in small_store.triples_of_passages([pid]) for e in (t.subject, t.object)}
        assert ents & joins, pid


def test_finds_both_gold_passages(run, small_store):
    gold = next(q for q in small_store.questions() if q.text == Q).gold_passage_ids
    assert set(gold) <= set(run.ranked_ids())


def _stage(run, name):
    return next((s for s in run.stages if s.name == name), None)


# Each ablation, and what in the trace shows it took effect against the full method's run.
ABLATIONS = [
    ({"shortlist_index": "triples"},   # whole triples matched, not partial ones
     lambda run: "via triples" in _stage(run, "shortlist_1").title and not _stage(run, "shortlist_1")
     .payload["partial_triples"]),
    ({"shortlist": False},   # every triple of R_1 goes to the scorer: no partial triple, none left out
     lambda run: (lambda p: not p["partial_triples"] and p["shortlisted"] == p["triples_in_passages"])(
         _stage(run, "shortlist_1").payload)),
    ({"first_retriever": "rrf_hybrid"},
     lambda run: _stage(run, "retrieve_1").title.startswith("rrf_hybrid")),
    ({"n_iterations": 1},
     lambda run: _stage(run, "retrieve_2") is None and _stage(run, "rewrite_1") is None),
]


@pytest.mark.parametrize("overrides,shows", ABLATIONS, ids=lambda x: str(x) if isinstance(x, dict) else "")
def test_each_ablation_runs_and_changes_its_stage(ctx, run, overrides, shows):
    ablated = make_method("griever", ctx, **overrides).run(Q, k=5)
    assert ablated.status == "ok", ablated.error
    assert len(ablated.ranked) == 5
    assert not shows(run), f"the full run already looks ablated: {overrides}"
    assert shows(ablated), f"{overrides} left its stage as the full method's"


def test_long_titles_are_one_ngram(embedder):
    from retrieval.methods.griever.config import GrieverConfig
    from retrieval.methods.griever.matcher import query_ngrams
    title = "Alexander and the Terrible, Horrible, No Good, Very Bad Day"
    enc = embedder.encode_query(f"What kind of university did the author of {title} attend?")
    assert title in query_ngrams(enc, GrieverConfig().max_ngram).texts
