"""GEAR pieces on hand-made inputs: Algorithm 1 on a small graph, and the agent's control
flow driven by a scripted test double of the LLM interface (real KB, real embedder)."""
import dataclasses
import json
import math

import pytest
from llm_double import scripted_llm

from retrieval.methods import make_method
from retrieval.methods.gear.beam import diverse_triple_beam_search, diversity_weight, flatten_breadth_first
from retrieval.methods.gear.prompts import parse_read, parse_reason, parse_rewrite

# A hand-built triple graph. score(sequence) = relevance of its last triple, so every beam
# score below can be worked out by hand.
REL = {1: 0.9, 2: 0.8, 3: 0.1, 4: 0.7, 5: 0.6, 6: 0.95, 7: 0.45, 8: 0.9}
NEIGHBOURS = {1: [2, 4, 5], 2: [1, 6, 7], 3: [8], 4: [1], 5: [1], 6: [2], 7: [2], 8: [3]}


def search(diversity, width=3, gamma=1.0):
    return diverse_triple_beam_search([1, 2, 3], NEIGHBOURS.__getitem__, lambda seqs: [REL[s[-1]] for s in seqs],
                                      width=width, length=2, gamma=gamma, diversity=diversity)


def test_beam_search_with_diversity_keeps_a_beam_from_every_start():
    b0, b1 = search(diversity=True)
    assert [b.triples for b in b0] == [(1,), (2,), (3,)]
    # beam (1,): 2 is on a beam already (no revisits); 4 → 0.9+0.7, 5 → (0.9+0.6)·e^-1
    # beam (2,): 1 excluded; 6 → 0.8+0.95, 7 → (0.8+0.45)·e^-1;  beam (3,): 8 → 0.1+0.9
    assert [b.triples for b in b1] == [(2, 6), (1, 4), (3, 8)]
    assert [round(b.score, 4) for b in b1] == [1.75, 1.6, 1.0]
    assert [b.rank_in_parent for b in b1] == [0, 0, 0]
    assert flatten_breadth_first(b1) == [2, 1, 3, 6, 4, 8]


def test_without_diversity_the_best_start_takes_two_beams():
    _, b1 = search(diversity=False)
    assert [b.triples for b in b1] == [(2, 6), (1, 4), (1, 5)]
    assert round(b1[2].score, 4) == 1.5 and b1[2].weight == 1.0


def test_diversity_weight_is_capped_at_gamma():
    assert diversity_weight(0, 20) == 1.0
    assert math.isclose(diversity_weight(5, 20), math.exp(-0.25))
    assert diversity_weight(50, 20) == diversity_weight(20, 20) == math.exp(-1)


def test_beam_search_edge_cases():
    assert diverse_triple_beam_search([], NEIGHBOURS.__getitem__, lambda s: [0.0] * len(s), 2, 2, 4.0) == []
    # no beam can grow: the seeds stand
    steps = diverse_triple_beam_search([3], {3: []}.__getitem__, lambda s: [1.0] * len(s), 2, 3, 4.0)
    assert len(steps) == 1 and steps[0][0].triples == (3,)


@pytest.mark.parametrize("value, expected", [
    ({"triples": [["A", "b", "C"], ["A", "b", "C"], ["", "x", "y"]]}, [("A", "b", "C")]),
    ({"triples": [{"subject": "A", "predicate": "b", "object": 1990}]}, [("A", "b", "1990")]),
    ([["A", "b", "C"]], [("A", "b", "C")]),
    ({"triples": []}, []),
])
def test_read_output_is_cleaned(value, expected):
    assert parse_read(value) == expected


@pytest.mark.parametrize("value", [{"facts": 1}, {"triples": [["only", "two"]]}, "text"])
def test_broken_read_output_is_rejected(value):
    with pytest.raises(ValueError):
        parse_read(value)


def test_reason_and_rewrite_parsers():
    assert parse_reason({"answerable": "Yes", "answer": "Hall", "reason": "r"})["answerable"] is True
    assert parse_reason({"answerable": False, "reason": "missing"}) == {"answerable": False, "answer": "",
                                                                        "reason": "missing"}
    for bad in ({"answer": "x"}, {"answerable": "maybe"}, []):
        with pytest.raises(ValueError):
            parse_reason(bad)
    assert parse_rewrite({"next_question": " Who founded X? "}) == "Who founded X?"
    with pytest.raises(ValueError):
        parse_rewrite({"next_question": ""})


Q = "Who was the first president of the association which published Journal of Psychotherapy Integration?"
READ = json.dumps({"triples": [["Journal of Psychotherapy Integration", "published by",
                                "American Psychological Association"]]})
NOTHING = json.dumps({"triples": []})
YES = json.dumps({"answerable": True, "answer": "G. Stanley Hall", "reason": "the facts name him"})
NO = json.dumps({"answerable": False, "answer": "", "reason": "the president of the APA is not known"})
REWRITE = json.dumps({"next_question": "Who was the first president of the American Psychological Association?"})


def run_gear(ctx, script, **cfg):
    llm, backend = scripted_llm(script)
    run = make_method("gear", dataclasses.replace(ctx, llm=llm), **cfg).run(Q, k=5)
    return run, backend


def test_agent_stops_when_the_memory_answers_the_question(ctx):
    run, backend = run_gear(ctx, {"read": [READ, NOTHING], "reason": [YES]}, max_iterations=4)
    assert run.status == "ok", run.error
    names = [s.name for s in run.stages]
    assert "reason_1" in names and "rewrite_1" not in names and "base_2" not in names
    assert backend.purposes()[-1] == "reason"
    memory = next(s for s in run.stages if s.name == "gist_memory_1").payload["memory"]
    assert memory == [json.loads(READ)["triples"][0]]
    link = next(s for s in run.stages if s.name == "triple_link_1").payload["links"][0]
    assert link["linked"] and link["similarity"] > 0.8
    assert next(s for s in run.stages if s.name == "final_rrf").payload["eq"] == "9"
    assert run.tokens_in > 0 and run.ranked


def test_agent_rewrites_and_retrieves_again_when_not_answerable(ctx):
    run, backend = run_gear(ctx, {"read": [READ, NOTHING, NOTHING, NOTHING], "reason": [NO, YES],
                                  "rewrite": [REWRITE]}, max_iterations=4)
    assert run.status == "ok", run.error
    names = [s.name for s in run.stages]
    assert names.index("rewrite_1") < names.index("base_2") < names.index("reason_2")
    assert "base_3" not in names
    base2 = next(s for s in run.stages if s.name == "base_2")
    assert base2.payload["query"] == json.loads(REWRITE)["next_question"]
    # every round's passages and the linked memory triples go into the final RRF (eq. 9)
    inputs = next(s for s in run.stages if s.name == "final_rrf").payload["inputs"]
    assert "C_q(1)" in inputs and "C_q(2)" in inputs and any(k.startswith("passageLink(") for k in inputs)


def test_agent_stops_at_max_iterations_and_on_a_repeated_query(ctx):
    run, _ = run_gear(ctx, {"read": [READ] + [NOTHING] * 5, "reason": [NO, NO], "rewrite": [REWRITE]},
                      max_iterations=2)
    names = [s.name for s in run.stages]
    assert "reason_2" in names and "rewrite_2" not in names and "base_3" not in names
    same = json.dumps({"next_question": Q})
    run, _ = run_gear(ctx, {"read": [READ] + [NOTHING] * 5, "reason": [NO, NO], "rewrite": [same]},
                      max_iterations=4)
    stop = next(s for s in run.stages if s.name == "stop_1")
    assert stop.status == "skipped" and "repeats an earlier" in stop.message and run.status == "ok"


def test_broken_model_output_fails_the_stage_not_the_app(ctx):
    run, backend = run_gear(ctx, {"read": ["no json", "still none"]})
    assert run.status == "error" and "read" in run.error and "repair" in run.error
    failed = run.stages[-1]
    assert failed.name == "read_1" and failed.status == "error" and len(failed.llm_calls) == 2


def test_without_an_llm_gear_says_so_and_runs_naivege(ctx):
    for name in ("gear", "syncge"):
        run = make_method(name, ctx).run(Q, k=5)
        assert run.status == "ok", run.error
        fb = run.stages[0]
        assert fb.name == "fallback" and fb.status == "skipped" and "NaiveGE" in fb.message
        assert [s.name for s in run.stages[1:]] == ["base", "seeds", "beam_search", "passage_map", "rrf", "ranking"]


def test_naivege_seeds_from_the_base_passages_triples(ctx):
    run = make_method("naivege", ctx).run(Q, k=5)
    seeds = next(s for s in run.stages if s.name == "seeds").payload
    beam = next(s for s in run.stages if s.name == "beam_search").payload
    assert seeds["n"] > 0 and beam["gamma"] == 20 and len(beam["steps"]) == 2
    assert all(len(b["triples"]) == 2 for b in beam["steps"][1]["beams"])
    assert len(beam["steps"][1]["beams"]) <= 10
    # recall: the two gold passages of this question
    gold = set(ctx.store.questions()[0].gold_passage_ids)
    assert gold <= set(run.ranked_ids())


def test_no_diversity_variant_turns_the_weight_off(ctx):
    run = make_method("syncge_no_diversity", ctx).run(Q, k=5)
    beam = next(s for s in run.stages if s.name == "beam_search").payload
    assert beam["diversity"] is False
    assert all(b["diversity_weight"] == 1.0 for b in beam["steps"][1]["beams"])


def test_local_profile_reads_less_and_asks_reason_and_rewrite_in_one_request(ctx):
    nxt = "Who was the first president of the American Psychological Association?"
    joint_no = json.dumps({"answerable": False, "answer": "", "reason": "president unknown", "next_question": nxt})
    joint_yes = json.dumps({"answerable": True, "answer": "G. Stanley Hall", "reason": "r", "next_question": ""})
    llm, backend = scripted_llm({"read": [READ] + [NOTHING] * 5, "reason + rewrite": [joint_no, joint_yes]})
    run = make_method("gear", dataclasses.replace(ctx, llm=llm, profile="local")).run(Q, k=5)
    assert run.status == "ok", run.error
    st = {s.name: s for s in run.stages}
    assert st["profile"].payload["differs_from_paper"]["reason_rewrite_joint"] == {"paper": False, "this_run": True}
    # eq. 7's query comes from the reason request: no rewrite request is made
    assert "rewrite" not in backend.purposes()
    assert st["rewrite_1"].payload["next_query"] == nxt and not st["rewrite_1"].llm_calls
    assert st["base_2"].payload["query"] == nxt
    # round 1 reads at most 5 passages, each cut to 60 words, asking for at most 4 triples
    read_prompt = next(m for p, m in backend.requests if p == "read")[1]["content"]
    assert read_prompt.count("\n[") <= 5 and "at most 4 triples" in read_prompt
    assert st["read_1"].payload["max_words"] == 60
    # round 2 does not read again what round 1 read (reread = False)
    read1 = set(st["read_1"].payload["passages_read"])
    skipped = set(st["read_2"].payload.get("skipped_read_before", []))
    assert not (set(st["read_2"].payload["passages_read"]) & read1)
    assert skipped <= read1
