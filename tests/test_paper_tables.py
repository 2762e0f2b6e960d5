"""`hoptrace reproduce` sets each paper's figures beside ours on the paper's own measure and
protocol, and the `paper` profile is what the papers state (retrieval/bench/paper_tables.py,
retrieval/methods/profiles.py). The tables below are read from the papers' text, each with the
section it comes from; the code must agree with them."""
from __future__ import annotations

import dataclasses

import pytest

from retrieval.bench.metrics import parse_metric
from retrieval.bench.paper_tables import EVALUATION, PAPERS
from retrieval.methods import METHODS, make_method, profiles, root_method

# paper → (the measure its "Recall@k" is, where the paper says so, how a run is asked)
DEFINITIONS = {
    "griever": ("recall", "§5", "per-k"),     # set beside GEAR's reported figures (§5.2); called with k (Table 4)
    "gear": ("recall", "Table 8", "per-k"),   # a question's recall takes intermediate values (Table 8, Figure 3)
    "sag": ("anyhit", "§4.3", "slice"),       # "any-hit criterion"; K_out = 10 returned (Table 7)
    "grasp": ("recall", "§5", "per-k"),       # passage-level recall, HippoRAG 2's setting; k = 5 single pass
}


@pytest.mark.parametrize("paper", sorted(PAPERS))
def test_each_paper_row_carries_the_measure_its_paper_defines(paper):
    measure, section, protocol = DEFINITIONS[paper]
    ev = EVALUATION[paper]
    assert (ev.measure, ev.protocol) == (measure, protocol) and section in ev.definition_from
    assert PAPERS[paper]["evaluation"] is ev
    for row in PAPERS[paper]["rows"]:
        for figures in row.paper.values():
            for metric in figures:
                name, _ = parse_metric(metric)
                assert name in (measure, "em"), f"{paper} {row.label}: {metric} is not the paper's {measure}@k"
    for claim in PAPERS[paper]["claims"]:
        assert parse_metric(claim.metric)[0] in (measure, "em"), claim.text


def test_sag_is_scored_on_its_any_hit_rate_and_sliced_from_its_ten_passages():
    sag = {r.label: r for r in PAPERS["sag"]["rows"]}
    full = sag["SAG (H=1, LLM rerank, K_event=5, K_direct=5)"]
    assert full.paper["musique"] == {"anyhit@1": 0.362, "anyhit@2": 0.641, "anyhit@5": 0.8, "anyhit@10": 0.834}
    assert EVALUATION["sag"].deepest_k == 10


# (method, setting, the paper's value, where the paper states it): the `paper` profile's values.
PAPER_STATES = [
    ("griever", "final_ranking", "paths", "§4.4: passages ranked by their passage score"),
    ("griever", "n_iterations", 2, "§5.2: two iterations, one rewrite"),
    ("griever", "split_clauses", True, "§4.2.1"),
    ("griever", "first_retriever", "composed", "§4.2.2: Composed for the first iteration"),
    ("griever", "shortlist_index", "partial_triples", "§4.2.4 / Algorithm 2"),
    ("griever", "shortlist", True, "§4.2.4 / Algorithm 2"),
    ("gear", "beam_length", 2, "App. C.2"),
    ("gear", "beam_width", 10, "App. C.2"),
    ("gear", "neighbours_per_beam", 100, "App. C.2"),
    ("gear", "agent_base_k", 10, "App. C.2: 10 passages a round, IRCoT's setting"),
    ("gear", "diversity", True, "§4 diverse triple beam search"),
    ("gear", "sequence_scoring", "encode", "§4: cosine between the query's and the candidate sequence's embeddings"),
    ("gear", "base", "hybrid", "§6.1: the best single-step base is BM25 + SBERT by RRF"),
    ("sag", "entity_threshold", 0.9, "§3.3 Path A"),
    ("sag", "event_threshold", 0.4, "§3.3 Path B"),
    ("sag", "k_seed", 50, "§4.4"),
    ("sag", "hops", 1, "§4.4"),
    ("sag", "frontier_budget", 50, "§4.4"),
    ("sag", "k_cand", 100, "§4.4 / Table 5"),
    ("sag", "k_event", 5, "Table 7"),
    ("sag", "k_direct", 5, "Table 7"),
    ("sag", "k_out", 10, "§4.4 / Table 7"),
    ("sag", "reranker", "llm", "§3.4"),
    ("grasp", "lam", 0.2, "A.1.5: λ = 0.2"),
    ("grasp", "m", 50, "A.1.5: m = 50"),
    ("grasp", "k_entities", 5, "A.1.5: k = 5"),
    ("grasp", "d", 2, "A.1.5: d = 2"),
    ("grasp", "max_iterations", 2, "A.1.5: at most 2 iterations"),
    ("grasp", "entity_selection", True, "§3.3"),
    ("grasp", "vote", "rankvote", "§5: RankVoting"),
    # HippoRAG 2: the reference code's BaseConfig (OSU-NLP-Group/HippoRAG, utils/config_utils.py)
    ("hipporag2", "linking_top_k", 5, "config_utils.py linking_top_k"),
    ("hipporag2", "passage_node_weight", 0.05, "config_utils.py passage_node_weight"),
    ("hipporag2", "damping", 0.5, "config_utils.py damping; §3 online retrieval"),
    ("hipporag2", "recognition_memory", True, "§3 Recognition Memory"),
]


@pytest.mark.parametrize("method,setting,value,source", PAPER_STATES,
                         ids=[f"{m}.{s}" for m, s, _, _ in PAPER_STATES])
def test_the_paper_profile_holds_what_the_paper_states(ctx, method, setting, value, source):
    assert getattr(METHODS[method].Config(), setting) == value, source
    run_config = make_method(method, dataclasses.replace(ctx, profile="paper")).config
    assert getattr(run_config, setting) == value, f"{method} on the paper profile: {setting} ({source})"


def test_griever_runs_our_ranking_on_local_by_default_and_names_its_profile_in_the_trace(ctx, monkeypatch):
    monkeypatch.delenv("HOPTRACE_PROFILE", raising=False)
    local = make_method("griever", dataclasses.replace(ctx, llm=None, profile=None))
    assert local.profile == "local" and local.config.final_ranking == "retrieval+paths"
    paper = make_method("griever", dataclasses.replace(ctx, profile="paper"))
    assert paper.profile == "paper" and paper.config.final_ranking == "paths"
    assert make_method("bm25", ctx).profile == "paper"   # no value of its own to choose: nothing local
    run = local.run("Who published Journal of Mathematical Physics?", k=5)
    first = run.stages[0]
    assert first.name == "profile" and first.payload["profile"] == "local"
    assert first.payload["differs_from_paper"]["final_ranking"] == {"paper": "paths", "this_run": "retrieval+paths"}
    # every local value is a real setting of its method
    for method, values in profiles.LOCAL.items():
        names = {f.name for f in dataclasses.fields(METHODS[root_method(method)].Config())}
        assert set(values) <= names, method
