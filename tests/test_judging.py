"""Evidence without gold: question sets, TREC pools, qrels, judges and measures, on a real trace file."""
from __future__ import annotations

import json
import math

import pytest
from llm_double import scripted_llm

from retrieval.bench.runner import run_bench
from retrieval.core.errors import InputError
from retrieval.core.records import Passage, Question
from retrieval.corpus.plain import load_plain_questions
from traces.judging import answer_rule, llm_judge
from traces.judging.judged import judged_for
from traces.judging.pool import Pools, make_pool
from traces.judging.qrels import Judgment, Qrels, read_trec, write_trec
from traces.judging.service import judge_experiment
from traces.stats.compare import compare
from traces.stats.judged_measures import scores
from traces.storage.experiments import Experiments, kb_fingerprint, question_record
from traces.storage.questionsets import QuestionSets
from traces.storage.store import TraceStore


# --- question files ---------------------------------------------------------------------------------
def test_plain_question_files_in_three_shapes(tmp_path):
    (tmp_path / "q.txt").write_text("Who founded the company that made the Walkman?\n\n  Where was he born?  \n")
    (tmp_path / "q.json").write_text(json.dumps([{"id": "a", "question": "Who?", "answer": "Sony"},
                                                 {"id": "b", "question": "Where?", "answers": ["Tokyo", "Edo"]}]))
    (tmp_path / "s.json").write_text(json.dumps(["One?", "Two?"]))
    (tmp_path / "q.csv").write_text("id,question,answer\nx1,First question?,Ann\nx2,\"Second, with a comma?\",\n")
    txt = load_plain_questions(tmp_path / "q.txt")
    assert [(q.id, q.text) for q in txt] == [("q1", "Who founded the company that made the Walkman?"),
                                             ("q2", "Where was he born?")]
    js = load_plain_questions(tmp_path / "q.json")
    assert [(q.id, q.answers) for q in js] == [("a", ["Sony"]), ("b", ["Tokyo", "Edo"])]
    assert [q.id for q in load_plain_questions(tmp_path / "s.json")] == ["q1", "q2"]
    cs = load_plain_questions(tmp_path / "q.csv")
    assert [(q.id, q.text, q.answers) for q in cs] == [("x1", "First question?", ["Ann"]),
                                                      ("x2", "Second, with a comma?", [])]
    assert all(not q.gold_passage_ids for q in txt + js + cs)


@pytest.mark.parametrize("name,content,problem", [
    ("empty.txt", "\n  \n", "no questions in the file"),
    ("dup.json", json.dumps([{"id": "a", "question": "x?"}, {"id": "a", "question": "y?"}]), "duplicate id 'a'"),
    ("blank.json", json.dumps([{"id": "a", "question": "  "}]), "item 0: the question is empty"),
    ("blank.csv", "question\nfine?\n\"   \"\n", "line 3: the question is empty"),
    ("nocol.csv", "text\nhello?\n", "no 'question' column"),
    ("bad.json", json.dumps({"question": "x"}), "expected a JSON list"),
    ("q.xml", "<q/>", "unknown questions file type"),
])
def test_bad_question_files_name_the_problem(tmp_path, name, content, problem):
    (tmp_path / name).write_text(content)
    with pytest.raises(InputError, match=problem):
        load_plain_questions(tmp_path / name)


def test_question_sets_are_stored_listed_and_never_replaced(tmp_path):
    sets = QuestionSets(TraceStore(tmp_path / "t.sqlite"))
    qs = [Question("q1", "Who?", ["Ann"]), Question("q2", "Where?", [])]
    s = sets.add("mykb", "logs", qs, "logs.txt")
    assert (s.n, s.n_gold, s.n_answers) == (2, 0, 1)
    assert "logs · 2 questions · no gold, 1 with answers · file · from logs.txt" == s.describe()
    with pytest.raises(InputError, match="already has a question set named 'logs'"):
        sets.add("mykb", "logs", [Question("z", "Other?", [])], "other.txt")
    with pytest.raises(InputError, match="names the KB's own questions"):
        sets.add("mykb", "built-in", qs, "x.txt")
    got = sets.questions(sets.get("mykb", "logs"))
    assert [(q.id, q.text, q.answers) for q in got] == [("q1", "Who?", ["Ann"]), ("q2", "Where?", [])]
    assert [x.name for x in sets.list("mykb")] == ["logs"] and sets.list("other") == []
    with pytest.raises(InputError, match="no question set named 'nope'"):
        sets.get("mykb", "nope")
    # public mode: a visitor's sets are theirs
    sets.add("mykb", "logs", qs, "logs.txt", owner="visitor-a")
    assert [x.owner for x in sets.list("mykb", owner="visitor-a")] == ["visitor-a"]
    assert sets.list("mykb", owner="visitor-b") == []


# --- pooling -----------------------------------------------------------------------------------------

def _hand_experiment(tmp_path, runs: dict[str, dict[str, list[str]]], ks=(5, 10)):
    exps = Experiments(TraceStore(tmp_path / "t.sqlite"))
    qids = sorted({q for per in runs.values() for q in per})
    spec = {"methods": {m: {} for m in runs}, "ks": list(ks), "questions": [
        {"id": q, "text": f"question {q}?", "gold": [], "answers": []} for q in qids]}
    exp = exps.start("bench", "hand", "fp", "none", spec)
    from retrieval.bench.runner import QuestionResult
    from retrieval.trace.model import RankedPassage, RunResult

    for m, per in runs.items():
        for q, ranked in per.items():
            run = RunResult(m, f"question {q}?", ranked=[RankedPassage(p, 1.0 / (i + 1)) for i, p in enumerate(ranked)])
            row = QuestionResult(q, m, max(ks), ranked, [], 1.0, 0, 0, "ok")
            exps.record(exp, Question(q, f"question {q}?", []), m, max(ks), run, row)
    return exps, exp


def test_depth_k_pooling_of_hand_made_runs(tmp_path):
    exps, exp = _hand_experiment(tmp_path, {
        "a": {"q1": ["p1", "p2", "p3", "p4"], "q2": ["p9", "p8"]},
        "b": {"q1": ["p3", "p5", "p1", "p6"], "q2": ["p8", "p7"]}})
    pool = make_pool(exps, exp, depth=2)
    got = {(p.question_id, p.passage_id): (p.rank, p.ranks) for p in pool.pairs}
    assert got == {("q1", "p1"): (1, {"a": 1}), ("q1", "p2"): (2, {"a": 2}), ("q1", "p3"): (1, {"b": 1}),
                   ("q1", "p5"): (2, {"b": 2}), ("q2", "p9"): (1, {"a": 1}), ("q2", "p8"): (1, {"a": 2, "b": 1}),
                   ("q2", "p7"): (2, {"b": 2})}
    assert pool.methods == ["a", "b"] and len(pool.pairs) == 7        # p8 pooled once
    deeper = make_pool(exps, exp, depth=3)
    assert {p.passage_id for p in deeper.pairs if p.question_id == "q1"} == {"p1", "p2", "p3", "p5"}
    assert len(deeper.at(2)) == 7
    pools = Pools(exps)
    pools.save(pool)
    back = pools.get(exp.id)
    assert [(p.question_id, p.passage_id, p.rank, p.ranks) for p in back.pairs] == \
        [(p.question_id, p.passage_id, p.rank, p.ranks) for p in pool.pairs]
    with pytest.raises(InputError, match="--depth must be between 1 and 100"):
        make_pool(exps, exp, depth=0)
    with pytest.raises(InputError, match="method.s. zz not in experiment"):
        make_pool(exps, exp, depth=2, methods=["zz"])


# --- measures ----------------------------------------------------------------------------------------
def test_judged_measures_on_a_hand_computed_example():
    qrels = {"q1": {"p1": 3, "p2": 0, "p3": 2, "p4": 1}, "q2": {"x": 0}}
    ranked = {"q1": ["p2", "p1", "p5", "p3"], "q2": ["x", "y"]}
    # P@2 (grade ≥ 2): p2 no, p1 yes → 0.5; q2: none relevant → 0
    assert scores(ranked, qrels, "p@2") == {"q1": 0.5, "q2": 0.0}
    # jrecall@2: 1 of the 2 relevant (p1, p3); q2 has none → undefined
    r = scores(ranked, qrels, "jrecall@2")
    assert r["q1"] == 0.5 and math.isnan(r["q2"])
    # judged@4: p2, p1, p3 judged, p5 not → 0.75
    assert scores(ranked, qrels, "judged@4")["q1"] == 0.75
    # nDCG@4 with gains = grades: DCG = 0/log2(2) + 3/log2(3) + 0 + 2/log2(5); ideal 3, 2, 1, 0
    dcg = 3 / math.log2(3) + 2 / math.log2(5)
    ideal = 3 + 2 / math.log2(3) + 1 / math.log2(4)
    assert scores(ranked, qrels, "ndcg@4")["q1"] == pytest.approx(dcg / ideal, abs=1e-4)
    # a question nobody judged says nothing
    assert math.isnan(scores({"q3": ["a"]}, qrels, "p@1")["q3"])
    with pytest.raises(Exception, match="unknown judged metric"):
        scores(ranked, qrels, "map@5")


# --- qrels -------------------------------------------------------------------------------------------
def test_a_persons_grade_overrides_the_llms_and_the_rules(tmp_path):
    qrels = Qrels(TraceStore(tmp_path / "t.sqlite"))
    qrels.put("e1", [Judgment("q1", "p1", 0, "answer", "rule"), Judgment("q1", "p1", 1, "llm", "m", "v1"),
                     Judgment("q1", "p2", 2, "llm", "m", "v1"), Judgment("q1", "p3", None, "llm", "m", "v1",
                                                                         status="failed", reason="bad JSON")])
    eff = qrels.effective("e1")
    assert {k: (j.source, j.grade) for k, j in eff.items()} == {("q1", "p1"): ("llm", 1), ("q1", "p2"): ("llm", 2)}
    qrels.put("e1", [Judgment("q1", "p1", 3, "person", "person")])
    eff = qrels.effective("e1")
    assert (eff[("q1", "p1")].source, eff[("q1", "p1")].grade) == ("person", 3)
    assert ("q1", "p3") not in eff            # a failed judgment is no grade at all
    assert qrels.counts("e1") == {"answer": {"ok": 1, "failed": 0}, "llm": {"ok": 2, "failed": 1},
                                  "person": {"ok": 1, "failed": 0}}
    # only the rule's, when asked
    assert eff != qrels.effective("e1", sources=["answer"])
    # a visitor's judgments are theirs
    qrels.put("e1", [Judgment("q1", "p2", 0, "person", "person", owner="visitor-a")])
    assert qrels.effective("e1", owner="visitor-a")[("q1", "p2")].grade == 0
    assert qrels.effective("e1")[("q1", "p2")].grade == 2
    assert qrels.effective("e1", owner="visitor-b") == {}
    with pytest.raises(InputError, match="outside 0–3"):
        Judgment("q1", "p1", 4, "person")


def test_trec_qrels_round_trip_and_bad_files(tmp_path):
    qrels = Qrels(TraceStore(tmp_path / "t.sqlite"))
    qrels.put("e1", [Judgment("q1", "p1", 3, "person"), Judgment("q2", "p2", 0, "llm", "m")])
    n = write_trec(qrels.effective("e1"), tmp_path / "out.qrels")
    assert n == 2 and (tmp_path / "out.qrels").read_text() == "q1 0 p1 3\nq2 0 p2 0\n"
    rows = read_trec(tmp_path / "out.qrels", {"q1", "q2"}, {"p1", "p2"})
    assert rows == [("q1", "p1", 3), ("q2", "p2", 0)]
    for text, problem in [("q9 0 p1 2\n", "line 1: unknown question 'q9'"),
                          ("q1 0 p1 2\nq1 0 zz 1\n", "line 2: unknown passage 'zz'"),
                          ("q1 0 p1 5\n", "line 1: grade 5 is outside 0–3"),
                          ("q1 0 p1 two\n", "grade 'two' is not a whole number"),
                          ("q1 p1 2\n", "expected 'qid 0 docid grade'"),
                          ("", "no judgments in the file")]:
        (tmp_path / "bad.qrels").write_text(text)
        with pytest.raises(InputError, match=problem):
            read_trec(tmp_path / "bad.qrels", {"q1", "q2"}, {"p1", "p2"})


# --- judges ------------------------------------------------------------------------------------------
def test_the_answer_rule_grades_passages_that_hold_the_answer():
    q = Question("q1", "Where was the author of X born?", ["New York City", "NYC"])
    yes = Passage("a", "Ann Lee", "Ann Lee was born in New York City in 1950.")
    no = Passage("b", "X", "X is a novel by Ann Lee.")
    partial = Passage("c", "York", "York is a city in England; new yorkers ...")
    js, skipped = answer_rule.judge([(q, yes), (q, no), (q, partial)])
    assert [(j.passage_id, j.grade) for j in js] == [("a", 2), ("b", 0), ("c", 0)] and skipped == 0
    js, skipped = answer_rule.judge([(Question("q2", "Is it?", ["yes"]), yes), (Question("q3", "Who?", []), yes)])
    assert js == [] and skipped == 2


def test_a_malformed_judge_reply_is_retried_then_recorded_as_failed_never_as_zero():
    ps = [Passage("p1", "A", "Alpha text."), Passage("p2", "B", "Beta text.")]
    q = Question("q1", "Who wrote A?", [])
    # first request: broken, repaired; second: broken twice → failed
    llm, backend = scripted_llm({"judge": ['{"answer": "Bob", "evidence": [7]}', '{"answer": "Bob", "evidence": [2]}',
                                           'not json', '{"evidence": "x"}']})
    stored = []
    res = llm_judge.judge(llm, {"q1": q}, {"q1": ps}, "listwise", store_run=lambda r: stored.append(r) or "r1")
    assert [(j.passage_id, j.grade, j.status) for j in res.judgments] == [("p1", 0, "ok"), ("p2", 2, "ok")]
    assert backend.purposes() == ["judge", "judge (repair)"]
    res = llm_judge.judge(llm, {"q1": q}, {"q1": ps}, "listwise", store_run=lambda r: stored.append(r) or "r2")
    assert [(j.grade, j.status) for j in res.judgments] == [(None, "failed"), (None, "failed")]
    assert "not usable JSON" in res.judgments[0].reason and res.failed_requests == 1
    assert stored[-1].status == "error" and stored[-1].stages[0].llm_calls   # the failed call is traced
    assert all(j.run_id == "r2" for j in res.judgments)


def test_listwise_grades_cited_passages_and_the_one_holding_the_answer():
    ps = [Passage("p1", "Film X", "Film X was directed by Ann Lee."), Passage("p2", "Ann Lee", "Ann Lee was born in "
          "Oslo."), Passage("p3", "Other", "Unrelated text.")]
    llm, _ = scripted_llm({"judge": ['{"answer": "Oslo", "evidence": [1, 2]}']})
    res = llm_judge.judge(llm, {"q": Question("q", "Where was the director of Film X born?", [])}, {"q": ps})
    by = {j.passage_id: j for j in res.judgments}
    assert (by["p1"].grade, by["p2"].grade, by["p3"].grade) == (2, 3, 0)
    assert by["p2"].score > by["p1"].score > by["p3"].score


def test_listwise_windows_are_even():
    ps = [Passage(str(i), "t", "x") for i in range(16)]
    assert [len(w) for w in llm_judge.windows(ps)] == [8, 8]
    assert [len(w) for w in llm_judge.windows(ps[:15])] == [15]


# --- end to end on the small KB: a question set without gold, benched, pooled, judged, compared ----------
def test_a_set_without_gold_is_benched_pooled_judged_and_compared(ctx, tmp_path):
    traces = TraceStore(tmp_path / "t.sqlite")
    own = ctx.store.questions()
    plain = [Question(q.id, q.text, q.answers) for q in own]          # the same questions, gold dropped
    QuestionSets(traces).add("small", "no-gold", plain, "mine.txt")
    exps = Experiments(traces)
    methods = ["bm25", "dense", "composed"]
    spec = {"methods": {m: {} for m in methods}, "ks": [5, 10], "questions": [question_record(q) for q in plain]}
    exp = exps.start("bench", "small", kb_fingerprint(ctx.store), "none", spec)
    res = run_bench(ctx, "small", plain, methods, ks=(5, 10), progress=False, sink=exps.sink(exp))
    assert not any(k.startswith("recall@") for k in res.methods["bm25"])   # left out, not 0
    with pytest.raises(InputError, match="have no gold passages"):
        compare(exps, exp, "recall@5")
    with pytest.raises(InputError, match="has no judgments yet"):
        compare(exps, exp, "ndcg@5", qrels=judged_for(traces, exp))
    rep = judge_experiment(exps, exp, ctx.store, "answer", depth=5)
    assert rep.pooled == len(rep.pool.pairs) > 0 and rep.judged + rep.skipped == rep.pooled
    judged = judged_for(traces, exp)
    assert "by the answer rule" in judged.judges
    c = compare(exps, exp, "ndcg@5", qrels=judged)
    assert c.methods == methods and c.question_ids and c.judges
    # the funnel follows the judged-relevant passages
    assert all(f.n_gold > 0 for f in c.funnels)
    # against gold, where it exists: the rule's relevant passages are gold or hold the answer
    gold = {q.id: set(q.gold_passage_ids) for q in own}
    rel = [(q, p) for q, ps in judged.grades.items() for p, g in ps.items() if g >= 2]
    assert rel and sum(p in gold[q] for q, p in rel) / len(rel) > 0.5


def test_the_judge_desk_hides_methods_and_automatic_grades_until_graded_and_keeps_visitors_apart(tmp_path):
    from ui.judging import JudgeDesk

    exps, exp = _hand_experiment(tmp_path, {"a": {"q1": ["p1", "p2"]}, "b": {"q1": ["p2", "p3"]}})
    with pytest.raises(InputError, match="has no pool yet"):
        JudgeDesk(exps, exp)
    Pools(exps).save(make_pool(exps, exp, depth=2))
    Qrels(exps.traces).put(exp.id, [Judgment("q1", "p2", 1, "llm", "qwen", "listwise-1", owner="ann")])
    docs = {p: Passage(p, f"Title {p}", f"text of {p}") for p in ("p1", "p2", "p3")}
    ann = JudgeDesk(exps, exp, owner="ann")
    pos = next(i for i, p in enumerate(ann.pool.pairs) if p.passage_id == "p2")
    before = ann.pair_html(pos, docs)
    assert "Title p2" in before and "show once you grade it" in before
    assert "LLM qwen" not in before and "a #" not in before and "b #" not in before
    ann.grade(pos, 3)
    after = ann.pair_html(pos, docs)
    assert "your grade <b>3</b>" in after and "a #2" in after and "b #1" in after and "LLM qwen: grade 1" in after
    assert ann.progress() == "1 / 3 judged"
    # another visitor sees none of Ann's grades, and the measures of each use their own
    bob = JudgeDesk(exps, exp, owner="bob")
    assert bob.progress() == "0 / 3 judged" and "show once you grade it" in bob.pair_html(pos, docs)
    assert judged_for(exps.traces, exp, "ann").grades["q1"]["p2"] == 3
    assert judged_for(exps.traces, exp, "bob").grades == {}
    with pytest.raises(InputError, match="outside 0–3"):
        ann.grade(pos, 7)
    assert ann.first_unjudged(pos) != pos


def test_public_mode_bounds_llm_judging_as_llm_work():
    from ui.llm_queue import BusyError, LLMQueue
    from ui.public import LimitError, PublicLimits

    PublicLimits().check_judge_pairs(10_000)                 # local mode: no cap
    public = PublicLimits.from_env(True)
    public.check_judge_pairs(public.max_judge_pairs)
    with pytest.raises(LimitError, match="judges at most 60 pooled pairs"):
        public.check_judge_pairs(public.max_judge_pairs + 1)
    queue = LLMQueue(max_wait_s=100)
    with queue.admit([], extra_s=150, now=0.0) as ahead:     # judging counts as LLM work...
        assert ahead == 0.0 and queue.ahead_s(now=0.0) == (1, 150)
        with pytest.raises(BusyError, match="the LLM judge"):   # ...so a request behind it is refused at once
            with queue.admit([], extra_s=10, now=1.0):
                pass
    with queue.admit(["bm25"], now=2.0):                     # LLM-free work never queues
        assert len(queue) == 0


def test_questions_left_out_of_a_comparison_are_counted_and_named_with_their_reason(tmp_path):
    from traces.stats.compare import Judged, render_text

    exps, exp = _hand_experiment(tmp_path, {"a": {"q1": ["p1", "p2"], "q2": ["p3"], "q3": ["p5"], "q4": ["p7"]},
                                            "b": {"q1": ["p2", "p1"], "q2": ["p4"], "q3": ["p6"]}})
    # q1 has a relevant passage; q2 was judged but nothing in it is relevant; q3 nobody judged;
    # q4 was not run by b.
    grades = {"q1": {"p1": 3, "p2": 0}, "q2": {"p3": 0, "p4": 1}, "q4": {"p7": 2}}
    c = compare(exps, exp, "ndcg@5", qrels=Judged(grades, judges="by hand"))
    assert c.question_ids == ["q1"]
    assert c.left_out == {"no judged-relevant passage": ["q2"], "not judged": ["q3"],
                          "not run by every method": ["q4"]}
    assert c.left_out_count == 3
    line = c.questions_line()
    assert line == ("4 questions · 3 left out: 1 no judged-relevant passage (q2); 1 not judged (q3); "
                    "1 not run by every method (q4)")
    assert "ndcg@5 (asked at k=5) on 1 of 4 questions · 3 left out" in render_text(c)
    assert c.to_json()["left_out"] == 3 and c.to_json()["left_out_why"]["not judged"] == ["q3"]
    # P@k is defined without a relevant passage: q2 stays, and one reason reads as the issue asked.
    one = compare(exps, exp, "p@5", methods=["a", "b"], qrels=Judged({**grades, "q3": {"p5": 0, "p6": 0}}))
    assert one.question_ids == ["q1", "q2", "q3"]
    assert one.questions_line() == "4 questions · 1 left out: not run by every method (q4)"


def test_the_answer_rule_judging_again_counts_what_it_judged_before_as_before(ctx, tmp_path):
    traces = TraceStore(tmp_path / "t.sqlite")
    plain = [Question(q.id, q.text, q.answers) for q in ctx.store.questions()]
    exps = Experiments(traces)
    spec = {"methods": {"bm25": {}, "dense": {}}, "ks": [5, 10], "questions": [question_record(q) for q in plain]}
    exp = exps.start("bench", "small", kb_fingerprint(ctx.store), "none", spec)
    run_bench(ctx, "small", plain, ["bm25", "dense"], ks=(5, 10), progress=False, sink=exps.sink(exp))
    first = judge_experiment(exps, exp, ctx.store, "answer", depth=5)
    deeper = judge_experiment(exps, exp, ctx.store, "answer", depth=10)
    graded_first = first.judged
    assert first.already == 0 and graded_first > 0
    # the deeper pool holds the first; its pairs graded before are not judged "now" again
    assert deeper.already == graded_first
    assert deeper.judged + deeper.already + deeper.skipped == deeper.pooled
    assert f"judged before: {graded_first}" in deeper.lines()[-2 if deeper.grades else -1]


# --- the Judge queue and settled verdicts (traces/judging/queue.py) ------------------------------------
def _pool(pairs: list[tuple[str, str, dict]], methods=("a", "b", "c"), depth=10):
    from traces.judging.pool import Pool, PooledPair

    return Pool("e", depth, list(methods), [PooledPair(q, p, min(r.values()) if r else 99, r) for q, p, r in pairs])


def test_queue_weights_a_passage_in_every_top_k_at_zero_and_one_only_a_single_method_ranks_first_highest():
    from traces.judging.queue import weigh

    pool = _pool([("q1", "everywhere", {"a": 1, "b": 2, "c": 3}),
                  ("q1", "first_by_a", {"a": 1}),
                  ("q1", "fifth_by_a", {"a": 5}),
                  ("q1", "deep", {"a": 9, "b": 8}),          # below k = 5 for all: moves nothing
                  ("q1", "two_of_three", {"a": 2, "b": 2})])
    for metric in ("ndcg@5", "p@5"):
        w = {it.pair.passage_id: it.weight for it in weigh(pool, {}, set(), metric)}
        assert w["deep"] == 0
        assert w["first_by_a"] >= max(v for p, v in w.items() if p != "first_by_a")
    # In every top 5: P@5 cannot tell the methods apart by it; nDCG only by its rank within them.
    assert {it.pair.passage_id: it.weight for it in weigh(pool, {}, set(), "p@5")}["everywhere"] == 0
    nd = {it.pair.passage_id: it.weight for it in weigh(pool, {}, set(), "ndcg@5")}
    assert nd["first_by_a"] > nd["fifth_by_a"] > 0                 # rank matters to nDCG
    # the prior: the answer rule's 0 leaves more doubt than its 2; a person's grade leaves none
    w = weigh(pool, {"q1": {"first_by_a": 2, "fifth_by_a": 0}}, {("q1", "two_of_three")}, "ndcg@5")
    assert "two_of_three" not in {it.pair.passage_id for it in w}
    assert "the automatic judge gave 2" in next(it.why for it in w if it.pair.passage_id == "first_by_a")
    # settled method pairs stop adding weight
    assert {it.pair.passage_id: it.weight for it in weigh(pool, {}, set(), "p@5",
                                                          settled={("a", "b"), ("a", "c")})}["first_by_a"] == 0


def test_bounds_say_a_verdict_is_settled_or_still_open():
    from traces.judging.queue import bounds

    qs = [f"q{i}" for i in range(12)]
    # a ranks its own relevant passage first on every question; b ranks it nowhere.
    pairs = [(q, f"{q}-x", {"a": 1}) for q in qs] + [(q, f"{q}-y", {"b": 1}) for q in qs[:2]]
    pool = _pool(pairs, methods=("a", "b"))
    grades = {q: {f"{q}-x": 3} for q in qs}
    person = {(q, f"{q}-x") for q in qs}                           # a person graded a's passages
    b = bounds(pool, grades, person, "p@5")[0]
    assert b.now == "a" and b.settled and b.open == 2 and b.best == b.worst == "a"
    assert b.line() == "a vs b: settled, a better — no remaining grade can change it"
    # the same verdict on automatic grades alone is open: a's passages could all be irrelevant
    b = bounds(pool, grades, set(), "p@5")[0]
    assert b.now == "a" and not b.settled and b.open == 14
    assert b.line().startswith("a vs b: open — 14 grades could still change it (now: a better")
    with pytest.raises(InputError, match="cannot bound a verdict by 'ndcg@5'"):
        bounds(pool, grades, person, "ndcg@5")
    with pytest.raises(InputError, match="pool at depth ≥ 20"):
        bounds(pool, grades, person, "p@20")


def test_a_simulated_person_reaches_golds_verdicts_on_a_real_small_case(ctx, tmp_path):
    from traces.judging.simulate import simulate

    traces = TraceStore(tmp_path / "t.sqlite")
    exps = Experiments(traces)
    questions = ctx.store.questions()
    methods = ["bm25", "dense", "griever"]
    spec = {"methods": {m: {} for m in methods}, "ks": [5, 10], "questions": [question_record(q) for q in questions]}
    exp = exps.start("bench", "small", kb_fingerprint(ctx.store), "none", spec)
    run_bench(ctx, "small", questions, methods, ks=(5, 10), progress=False, sink=exps.sink(exp))
    sim = simulate(exps, exp, ctx.store, "p@5", 10, step=5)
    assert [c.order for c in sim.curves] == ["queue", "pool", "random"] and sim.pairs == 3
    for c in sim.curves:
        assert c.points[-1] == (sim.pool_size, 3)                   # the whole pool graded: gold's verdicts
        assert c.needed is not None and c.needed <= sim.pool_size
    assert "grades needed" in "\n".join(sim.lines())
    assert not traces.db.execute("SELECT count(*) FROM experiments WHERE id != ?", [exp.id]).fetchone()[0]
    with pytest.raises(InputError, match="--order 'best'"):
        simulate(exps, exp, ctx.store, orders=["best"])


def test_the_queue_refuses_an_unpooled_experiment_a_metric_it_cannot_use_and_grades_outside_the_pool(ctx, tmp_path,
                                                                                                     monkeypatch):
    from retrieval.cli import main
    from traces.judging.queue import state

    monkeypatch.setenv("HOPTRACE_TRACES", str(tmp_path / "t.sqlite"))
    traces = TraceStore(tmp_path / "t.sqlite")
    exps = Experiments(traces)
    questions = ctx.store.questions()
    spec = {"methods": {"bm25": {}, "dense": {}}, "ks": [5], "questions": [question_record(q) for q in questions]}
    exp = exps.start("bench", "small", kb_fingerprint(ctx.store), "none", spec)
    run_bench(ctx, "small", questions, ["bm25", "dense"], ks=(5,), progress=False, sink=exps.sink(exp))
    with pytest.raises(InputError, match="has no pool yet: pool it first"):
        state(exps, exp, "p@5")
    judge_experiment(exps, exp, ctx.store, "answer", depth=5)
    with pytest.raises(InputError, match="cannot order the queue by 'recall@5'"):
        state(exps, exp, "recall@5")
    pool, prior, grades, person = state(exps, exp, "p@5")
    assert pool.depth == 5 and not person and prior
    before = Qrels(traces).counts(exp.id)
    q = questions[0].id
    outside = next(p for p in ctx.store.all_passage_ids() if (q, p) not in
                   {(pp.question_id, pp.passage_id) for pp in pool.pairs})
    qrels = tmp_path / "grades.qrels"
    qrels.write_text(f"{q} 0 {pool.pairs[0].passage_id} 2\n{q} 0 {outside} 3\n")
    assert main(["qrels", "import", exp.id, str(qrels)]) == 2
    assert Qrels(traces).counts(exp.id) == before
