"""GRASP: eq. 1–2 and RankVote on hand-made numbers, #N resolution, and the agent's control
flow with a scripted test double of the LLM interface (real KB, real embedder)."""
import dataclasses
import json
import math

import pytest
from llm_double import scripted_llm

from retrieval.methods import make_method
from retrieval.methods.grasp.plan import parse_plan, placeholders, resolve
from retrieval.methods.grasp.prompts import parse_evaluation
from retrieval.methods.grasp.scoring import entity_scores, rank_vote, sigma


def test_sigma_is_cosine_plus_damped_bm25():
    assert sigma(0.5, 0.0, 0.2) == 0.5
    assert math.isclose(sigma(0.5, math.e - 1, 0.2), 0.7)      # log(1 + (e − 1)) = 1
    assert sigma(0.5, -3.0, 0.2) == 0.5                         # a negative BM25 never lowers σ


def test_entity_scores_damp_hubs_by_degree():
    prop_sigma = {"p1": 1.0, "p2": 0.5, "p3": 0.25}
    links = {"p1": ["hub", "rare"], "p2": ["hub"], "p3": ["rare"]}
    scores = entity_scores(prop_sigma, links, {"hub": 99, "rare": 3})
    assert math.isclose(scores["hub"], 1.5 / 10)               # (1 + 0.5) / sqrt(1 + 99)
    assert math.isclose(scores["rare"], 1.25 / 2)              # (1 + 0.25) / sqrt(1 + 3)
    assert scores["rare"] > scores["hub"]


def test_rank_vote_sums_reciprocal_rank_votes_per_passage():
    ranked = ["a1", "b1", "a2", "c1", "b2"]                    # best first
    passage = {"a1": "A", "a2": "A", "b1": "B", "b2": "B", "c1": "C"}
    votes = dict(rank_vote(ranked, passage))
    assert math.isclose(votes["A"], 1 / 2 + 1 / 4)              # ranks 1 and 3
    assert math.isclose(votes["B"], 1 / 3 + 1 / 6)              # ranks 2 and 5
    assert math.isclose(votes["C"], 1 / 5)
    assert [p for p, _ in rank_vote(ranked, passage)] == ["A", "B", "C"]
    # uniform weighting (A.1.7): A and B tie on 2 votes
    assert dict(rank_vote(ranked, passage, uniform=True)) == {"A": 2.0, "B": 2.0, "C": 1.0}


def test_placeholders_resolve_from_earlier_answers():
    assert placeholders("Where was #1 born and when did #2 die?") == [1, 2]
    assert resolve("Where was #1 born?", ["Ada Mireles"]) == "Where was Ada Mireles born?"
    assert resolve("Compare #1 and #3", ["X", "Y"]) == "Compare X and #3"      # unknown stays visible
    assert resolve("Who is #1?", [""]) == "Who is #1?"
    parse = parse_plan(5)
    assert parse({"plan": "p", "sub_questions": ["Who?", "Where was #1 born?"]})["sub_questions"][1] == \
        "Where was #1 born?"
    # a reference to itself or a later sub-question is kept, with a warning
    assert parse({"plan": "p", "sub_questions": ["Where was #1 born?"]})["warnings"] == [
        "sub-question 1 refers to #1, which is not an earlier sub-question"]
    for bad in ({"plan": "p", "sub_questions": []}, {"sub_questions": "x"}, [],
                {"plan": "p", "sub_questions": ["...", "..."]}):                      # an echoed format
        with pytest.raises(ValueError):
            parse(bad)


def test_evaluation_parser():
    v = parse_evaluation({"observations": "APA published it", "action": "query again", "answer": "",
                          "next_statement": "APA first president"})
    assert v["action"] == "QUERY_AGAIN" and v["observations"] == ["APA published it"]
    with pytest.raises(ValueError):
        parse_evaluation({"action": "MAYBE"})


Q = "Who was the first president of the association which published Journal of Psychotherapy Integration?"
PLAN = json.dumps({"plan": "find the publisher, then its first president",
                   "sub_questions": ["Which association published Journal of Psychotherapy Integration?",
                                     "Who was the first president of #1?"]})


def rewrite(statement, *kws):
    return json.dumps({"statement": statement, "keywords": list(kws)})


def evaluate(action, answer="", nxt="", obs=("noted",)):
    return json.dumps({"observations": list(obs), "action": action, "answer": answer, "next_statement": nxt})


def test_grasp_control_flow_with_a_scripted_llm(ctx):
    script = {
        "plan": [PLAN],
        "rewrite": [rewrite("Journal of Psychotherapy Integration is published by", "Journal of Psychotherapy "
                                                                                    "Integration"),
                    rewrite("The first president of the American Psychological Association was",
                            "American Psychological Association", "president")],
        "select entities": [json.dumps({"selected": [1, 2]}), json.dumps({"selected": [1]}),
                            json.dumps({"selected": [1]})],
        "evaluate": [evaluate("DONE", "American Psychological Association"),
                     evaluate("QUERY_AGAIN", nxt="G. Stanley Hall president American Psychological Association"),
                     evaluate("DONE", "G. Stanley Hall")],
        "synthesis": [json.dumps({"answer": "G. Stanley Hall"})],
    }
    llm, backend = scripted_llm(script)
    run = make_method("grasp", dataclasses.replace(ctx, llm=llm)).run(Q, k=5)
    assert run.status == "ok", run.error
    names = [s.name for s in run.stages]
    assert names == ["profile", "plan", "sub1_rewrite", "sub1_search_1", "sub1_select_1", "sub1_vote_1",
                     "sub1_evaluate_1",
                     "sub2_rewrite", "sub2_search_1", "sub2_select_1", "sub2_vote_1", "sub2_evaluate_1",
                     "sub2_search_2", "sub2_select_2", "sub2_vote_2", "sub2_evaluate_2", "synthesis", "ranking"]
    st = {s.name: s for s in run.stages}
    assert st["plan"].payload["depends_on"] == {1: [], 2: [1]}
    assert st["plan"].payload["propositions_in_this_kb"].startswith("sentences")  # the small KB's rules layer
    assert any(e.type == "depends_on" for e in st["plan"].subgraph.edges)
    # #1 was resolved from the first sub-agent's answer before rewriting
    assert st["sub2_rewrite"].payload["resolved"] == ("Who was the first president of American Psychological "
                                                      "Association?")
    # eq. 1 / eq. 2 in the trace
    search = st["sub1_search_1"].payload
    assert search["propositions"] and all({"sigma", "cos", "bm25"} <= set(p) for p in search["propositions"])
    assert 1 <= len(search["candidates"]) <= 5
    # QUERY_AGAIN searched with the new statement and skipped what was visited
    assert st["sub2_search_2"].payload["statement"].startswith("G. Stanley Hall")
    first = {c["entity"] for c in st["sub2_search_1"].payload["candidates"]}
    chosen = set(st["sub2_select_1"].payload["selected"])
    assert not (chosen & {c["entity"] for c in st["sub2_search_2"].payload["candidates"]})
    assert first
    # the observation state grows instead of a chat history
    assert st["sub2_evaluate_2"].payload["observation_state"] == ["noted", "noted"]
    assert run.answer == "G. Stanley Hall"
    assert len(run.ranked) <= 5 and run.ranked
    assert backend.purposes()[0] == "plan" and backend.purposes()[-1] == "synthesis"


def test_no_entity_selection_ablation_skips_the_llm_choice(ctx):
    script = {"plan": [json.dumps({"plan": "p",
                                   "sub_questions": ["Who published Journal of Psychotherapy Integration?"]})],
              "rewrite": [rewrite("Journal of Psychotherapy Integration is published by", "Psychotherapy")],
              "evaluate": [evaluate("DONE", "APA")], "synthesis": [json.dumps({"answer": "APA"})]}
    llm, backend = scripted_llm(script)
    run = make_method("grasp_no_selection", dataclasses.replace(ctx, llm=llm)).run(Q, k=5)
    assert run.status == "ok", run.error
    assert "select entities" not in backend.purposes()
    sel = next(s for s in run.stages if s.name == "sub1_select_1").payload
    assert sel["how"].startswith("all candidates") and sel["selected"]


def test_without_an_llm_grasp_says_it_needs_one(ctx):
    run = make_method("grasp", ctx).run(Q, k=5)
    assert run.stages[0].name == "needs_llm" and "needs an LLM" in run.stages[0].title
    assert run.status == "ok" and run.ranked == []


def test_broken_planner_output_fails_the_stage_cleanly(ctx):
    llm, _ = scripted_llm({"plan": ["no", '{"plan": "x", "sub_questions": []}']})
    run = make_method("grasp", dataclasses.replace(ctx, llm=llm)).run(Q, k=5)
    assert run.status == "error" and "plan" in run.error and run.stages[-1].status == "error"


def test_bench_reports_em_c_w_and_planner_hop_accuracy(ctx, small_store):
    """C_w (eq. 3) and hop accuracy from a scripted LLM whose closed-book answers are known."""
    from retrieval.bench.difficulty import weight
    from retrieval.bench.runner import run_bench

    q = small_store.questions()[0]          # 2-hop, answer "G. Stanley Hall"
    script = {
        "difficulty": [json.dumps({"answer": "G. Stanley Hall"}), json.dumps({"answer": "Freud"}),
                       json.dumps({"answer": "Freud"}), json.dumps({"answer": "Freud"})],   # r = 1/4
        "plan": [PLAN],
        "rewrite": [rewrite("Journal of Psychotherapy Integration is published by", "Psychotherapy"),
                    rewrite("The first president of the American Psychological Association was", "president")],
        "select entities": [json.dumps({"selected": [1]})] * 4,
        "evaluate": [evaluate("DONE", "American Psychological Association"), evaluate("DONE", "G. Stanley Hall")],
        "synthesis": [json.dumps({"answer": "G. Stanley Hall"})],
    }
    llm, _ = scripted_llm(script)
    res = run_bench(dataclasses.replace(ctx, llm=llm), "small", [q], ["grasp"], progress=False, difficulty_samples=4)
    m = res.methods["grasp"]
    assert m["em"] == 1.0 and m["plan_hop_accuracy"] == 1.0
    row = res.per_question[0]
    assert row.weight == weight(0.25, 4) == 2.0
    assert m["C_w"] == round((row.tokens_in + row.tokens_out) / 2.0, 1)


def test_single_pass_searches_with_the_question_and_votes_without_an_llm(ctx):
    """Table 2's standard single-pass setting: no planner, every candidate traversed, k passages."""
    run = make_method("grasp_single_pass", ctx).run(Q, k=5)   # ctx has no LLM
    assert run.status == "ok", run.error
    assert [s.name for s in run.stages] == ["single_pass", "sub1_search_1", "sub1_select_1", "sub1_vote_1", "ranking"]
    st = {s.name: s for s in run.stages}
    assert st["sub1_search_1"].payload["statement"] == Q
    assert st["single_pass"].payload["propositions_in_this_kb"].startswith("sentences")
    assert st["sub1_select_1"].payload["selected"] == [c["entity"] for c in st["sub1_search_1"].payload["candidates"]]
    assert 1 <= len(run.ranked) <= 5 and run.tokens_in == 0
    # the ranking is the vote order, best first
    votes = {p["passage_id"]: p["votes"] for p in st["sub1_vote_1"].payload["passages"]}
    assert [r.passage_id for r in run.ranked] == sorted(votes, key=lambda p: -votes[p])[:len(run.ranked)]


def test_single_pass_uniform_weights_every_proposition_one(ctx):
    run = make_method("grasp_single_pass_uniform", ctx).run(Q, k=5)
    assert run.status == "ok", run.error
    ranked = next(s for s in run.stages if s.name == "sub1_vote_1").payload["ranked_propositions"]
    assert ranked and {p["w"] for p in ranked} == {1.0}


def test_evaluate_schema_caps_every_free_text_field():
    # An uncapped observation once ran the evaluate reply past its token limit mid-string.
    from retrieval.methods.grasp.prompts import evaluate_schema
    props = evaluate_schema(3)["properties"]
    assert props["observations"]["maxItems"] == 3
    for name in ("answer", "next_statement"):
        assert props[name]["maxLength"] > 0, name
    for name in ("observations", "next_keywords"):
        assert props[name]["items"]["maxLength"] > 0, name


def test_evaluate_token_limit_holds_a_reply_with_every_field_at_its_cap():
    """The limit the agent sends fits the longest reply the grammar allows, counted with the
    embedded model's own tokenizer on ordinary English filler."""
    from retrieval.llm.errors import LLMUnavailable
    from retrieval.llm.models import gguf_token_counter, model_file
    from retrieval.methods.grasp.prompts import evaluate_max_tokens, evaluate_schema
    try:
        count = gguf_token_counter(model_file())
    except LLMUnavailable as e:
        pytest.skip(str(e))
    props = evaluate_schema(4)["properties"]
    filler = "the river town of Ostrava was founded in 1267 by a bishop, "

    def text(n):
        return (filler * (n // len(filler) + 1))[:n]
    reply = {"observations": [text(props["observations"]["items"]["maxLength"])] * 4, "action": "QUERY_AGAIN",
             "answer": text(props["answer"]["maxLength"]), "next_statement": text(props["next_statement"]["maxLength"]),
             "next_keywords": [text(props["next_keywords"]["items"]["maxLength"])] * props["next_keywords"]["maxItems"]}
    assert count(json.dumps(reply)) <= evaluate_max_tokens(4)
