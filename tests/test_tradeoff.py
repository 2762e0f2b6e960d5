"""The whole trade-off (issue 63): the answer split, prices, repetitions and the budget metric."""
import dataclasses
import json
import math
import statistics

import pytest

from retrieval.bench.budget import fit_count, fitter, passage_text
from retrieval.bench.runner import run_bench
from retrieval.core.errors import ConfigError
from retrieval.core.money import cost_text, usd_text
from retrieval.llm import LLM, LLMSettings
from retrieval.llm.cache import ResponseCache
from retrieval.llm.prices import cost_of, price_for, read_price_file
from traces.stats import tradeoff


def _row(q, method="m", ranked=("g1", "g2", "x"), gold=("g1", "g2"), em=1.0, rep=1, k=5, **kw):
    return {"question_id": q, "method": method, "k": k, "ranked": list(ranked), "gold": list(gold), "em": em,
            "f1": em, "rep": rep, **kw}


def test_the_four_way_answer_split_on_a_hand_made_case():
    rows = [_row("q1", em=1.0),                                     # gold in, right
            _row("q2", em=0.0),                                     # gold in, wrong: the reader lost it
            _row("q3", ranked=("g1", "x", "y"), em=1.0),            # one hop missed, right anyway
            _row("q4", ranked=("x", "y", "z"), em=0.0),             # missed, wrong: the retriever lost it
            _row("q5", ranked=("x", "y", "z", "w", "v", "g1", "g2"), em=0.0),  # below the reader's top 5
            _row("q6", em=None),                                    # not answered: in no cell
            _row("q1", em=0.0, rep=2)]                              # a repeat: the first repetition counts
    split = tradeoff.answer_split(rows, "m")
    assert split.questions == {"gold_in_right": ["q1"], "gold_in_wrong": ["q2"], "gold_missed_right": ["q3"],
                               "gold_missed_wrong": ["q4", "q5"]}
    assert split.n == 5 and split.to_json()["gold_in_wrong"] == {"count": 1, "questions": ["q2"]}
    assert tradeoff.answer_split(rows, "other") is None


def test_prices_known_unknown_embedded_and_a_price_file(tmp_path):
    known = price_for("gpt-4o-mini")                    # genai-prices' table, no network
    assert known is not None and known.input_per_mtok > 0 and known.source.startswith("genai-prices")
    assert price_for("a-model-nobody-prices-7b") is None
    assert price_for("qwen2.5-coder-1.5b", backend="local").usd(10_000, 1_000) == 0.0

    llm = LLM(LLMSettings(backend="openai", model="a-model-nobody-prices-7b", cache=False))
    unknown = cost_of(llm, 1000, 100)
    assert unknown.usd is None and cost_text(unknown.to_dict()).startswith("price unknown")
    assert usd_text(None) == "price unknown" and usd_text(0.0123) == "$0.0123"

    own = tmp_path / "prices.csv"
    own.write_text("model,input_usd_per_mtok,output_usd_per_mtok\n# our own vLLM at cost\n"
                   "a-model-nobody-prices-7b,0.5,2\ngpt-4o-mini,1,1\n")
    priced = cost_of(llm, 1_000_000, 500_000, own)
    assert priced.usd == pytest.approx(0.5 + 1.0) and priced.source == "prices.csv"
    assert price_for("gpt-4o-mini", price_file=own).input_per_mtok == 1.0   # the file overrides the table

    bad = tmp_path / "bad.csv"
    bad.write_text("model,input_usd_per_mtok,output_usd_per_mtok\nok-model,1,2\nbroken-model,one,2\n")
    with pytest.raises(ConfigError, match=r"bad.csv, line 3: prices must be numbers"):
        read_price_file(bad)
    bad.write_text("m,1\n")
    with pytest.raises(ConfigError, match=r"line 1: expected model,input"):
        read_price_file(bad)
    with pytest.raises(ConfigError, match="does not exist"):
        read_price_file(tmp_path / "missing.csv")


def test_a_deterministic_method_repeated_has_no_spread_and_one_top_k(ctx, small_store):
    res = run_bench(ctx, "small", small_store.questions(), ["bm25"], ks=[5], progress=False, repeat=3)
    row = res.methods["bm25"]
    assert row["recall@5_sd"] == 0.0 and row["stable@5"] == 1.0
    assert len(res.per_question) == 3 * len(small_store.questions())
    assert sorted({r.rep for r in res.per_question}) == [1, 2, 3]
    assert row["usd_per_question"] == 0.0   # LLM-free: no tokens, no money


def test_a_scripted_nondeterministic_llm_gives_the_expected_spread_and_bypasses_the_cache(ctx, small_store,
                                                                                          tmp_path):
    from llm_double import ScriptedBackend

    qs = small_store.questions()[:2]
    right, wrong = json.dumps({"answer": qs[0].answers[0]}), json.dumps({"answer": "wrong"})
    # Repetition 1 answers q1 right and q2 wrong; repetition 2 both wrong; repetition 3 as the first.
    backend = ScriptedBackend({"answer": [right, wrong, wrong, wrong, right, wrong]})
    cache = ResponseCache(tmp_path / "cache.sqlite")
    llm = LLM(LLMSettings(backend="openai", model=backend.model), backend=backend, cache=cache)
    res = run_bench(dataclasses.replace(ctx, llm=llm), "small", qs, ["bm25"], ks=[5], progress=False,
                    answer=True, repeat=3)
    row = res.methods["bm25"]
    means = [0.5, 0.0, 0.5]
    assert row["em"] == pytest.approx(statistics.fmean(means), abs=1e-4)
    assert row["em_sd"] == pytest.approx(statistics.stdev(means), abs=1e-4)
    # Every repetition asked the LLM again (nothing from the cache), each with its own seed.
    assert backend.purposes() == ["answer"] * 6
    assert [seed for _, seed in backend.sampling] == [0, 0, 1, 1, 2, 2]
    assert llm.repetition == 1   # restored: later requests read the cache again
    # An unknown model's cost is unknown, not $0.
    assert row["usd_per_question"] is None


def test_flagged_verdicts_and_the_spread_from_hand_made_repetitions():
    rows = []
    for i in range(12):
        rows.append(_row(f"q{i}", "a", em=1.0, rep=1))
        rows.append(_row(f"q{i}", "b", em=0.0, rep=1))
        rows.append(_row(f"q{i}", "a", em=1.0 if i % 2 else 0.0, rep=2))
        rows.append(_row(f"q{i}", "b", em=0.0 if i % 2 else 1.0, rep=2))
    words = tradeoff.verdicts_by_rep(rows, ["a", "b"], "em")
    assert words[("a", "b")] == ["a better", "inconclusive"]
    flags, compared = tradeoff.flags(rows, ["a", "b"], "em")
    assert [f.text() for f in flags] == ["a vs b: rep 1: a better · rep 2: inconclusive"] and compared == 1
    assert tradeoff.spread(rows, "a", "em") == pytest.approx(statistics.stdev([1.0, 0.5]))
    assert tradeoff.flags([r for r in rows if r["rep"] == 1], ["a", "b"], "em") == ([], 0)


def test_a_method_measured_once_is_no_change_of_verdict():
    # As in the shipped experiment: the LLM methods a and b repeat, the LLM-free c runs once. Only
    # a vs b had two measured repetitions; a–c and b–c read "not measured" in rep 2, which is no change.
    rows = []
    for i in range(12):
        rows += [_row(f"q{i}", "a", em=1.0, rep=1), _row(f"q{i}", "b", em=0.0, rep=1),
                 _row(f"q{i}", "c", em=0.0, rep=1),
                 _row(f"q{i}", "a", em=1.0 if i % 4 == 0 else 0.0, rep=2), _row(f"q{i}", "b", em=0.0, rep=2)]
    words = tradeoff.verdicts_by_rep(rows, ["a", "b", "c"], "em")
    assert words[("a", "c")] == ["a better", "not measured"] and words[("b", "c")][1] == "not measured"
    flags, compared = tradeoff.flags(rows, ["a", "b", "c"], "em")
    assert [f.text() for f in flags] == ["a vs b: rep 1: a better · rep 2: inconclusive"]
    assert compared == 1


def test_the_budget_metric_against_a_hand_count(small_store):
    words = lambda text: len(text.split())  # noqa: E731  (a tokenizer whose counts are easy to check by hand)
    texts = ["Title: A\none two three", "Title: B\nfour five", "Title: C\nsix seven eight nine"]
    # By hand: 5 + 4 words (the separator counts 0) = 9 fit in 9 tokens; the third (6) would make 15.
    assert fit_count(texts, 9, words) == 2 and fit_count(texts, 15, words) == 3
    assert fit_count(texts, 8, words) == 1 and fit_count(texts, 4, words) == 0

    ids = small_store.all_passage_ids()[:6]
    passages = {p.id: p for p in small_store.passages(ids)}
    budget = sum(words(passage_text(passages[i].title, passages[i].text)) for i in ids[:3])
    fit = fitter(small_store, budget, words)
    assert fit(ids) == 3 and fit(ids[3:]) <= 3
    row = _row("q", ranked=ids, gold=[ids[1], ids[4]], budget_fit=fit(ids))
    assert tradeoff.score(row, f"recall@{budget}tok") == 0.5       # ids[1] fits, ids[4] does not
    assert math.isnan(tradeoff.score(_row("q"), "recall@512tok"))  # a run benched without a budget


def test_repetitions_are_stored_numbered_and_compare_reads_their_mean(ctx, small_store, tmp_path):
    from llm_double import ScriptedBackend

    from traces.stats.compare import compare, render_text
    from traces.storage.experiments import Experiments, kb_fingerprint, question_record
    from traces.storage.store import TraceStore

    qs = small_store.questions()[:3]
    exps = Experiments(TraceStore(tmp_path / "traces.sqlite"))
    spec = {"methods": {"bm25": {"method": "bm25"}}, "ks": [5], "protocol": "per-k",
            "questions": [question_record(q) for q in qs], "args": {"answer": True, "repeat": 2, "budget": 300}}
    exp = exps.start("bench", "small", kb_fingerprint(ctx.store), "scripted", spec)
    answers = [json.dumps({"answer": q.answers[0]}) for q in qs] + [json.dumps({"answer": "no"})] * 3
    backend = ScriptedBackend({"answer": answers * 2})   # bm25's six answers, then dense's
    llm = LLM(LLMSettings(backend="openai", model=backend.model, cache=False), backend=backend)
    run_bench(dataclasses.replace(ctx, llm=llm), "small", qs, ["bm25", "dense"], ks=[5], progress=False,
              answer=True, repeat=2, budget=300, sink=exps.sink(exp))
    every = exps.entries(exp, repetitions=True)
    assert sorted({e["rep"] for e in every}) == [1, 2] and len(every) == 2 * 2 * 3
    assert {e["rep"] for e in exps.entries(exp)} == {1}            # pools and funnels read one run a question
    run, _ = exps.traces.load_run(next(e["run_id"] for e in every if e["rep"] == 2))
    assert run.repetition == 2 and run.cost["usd"] is None           # the scripted model has no price
    c = compare(exps, exp, "em")
    assert c.repeat == 2 and c.budget == 300
    assert c.means["bm25"].mean == pytest.approx(0.5)                # right in repetition 1, wrong in 2
    assert backend.purposes() == ["answer"] * 12
    text = render_text(c)
    assert "where the answers were lost" in text and "the reader lost it" in text and "recall@300tok" in text
    assert compare(exps, exp, "recall@300tok").means["dense"].mean >= 0


def test_a_trace_file_from_before_repetitions_gains_the_column_and_keeps_its_runs(tmp_path):
    import sqlite3

    from traces.storage.store import TraceStore

    path = tmp_path / "old.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE experiment_runs (experiment_id TEXT, question_id TEXT, method TEXT, k INTEGER, "
                "run_id TEXT, seq INTEGER, row TEXT, fates TEXT, PRIMARY KEY (experiment_id, question_id, method, k))")
    con.execute("INSERT INTO experiment_runs VALUES ('e', 'q1', 'bm25', 5, 'r1', 0, '{}', NULL)")
    con.commit()
    con.close()
    store = TraceStore(path)
    assert store.db.execute("SELECT rep, run_id FROM experiment_runs").fetchall() == [(1, "r1")]
    pk = [r[1] for r in store.db.execute("PRAGMA table_info(experiment_runs)").fetchall() if r[5]]
    assert "rep" in pk


def test_a_runs_cost_reaches_its_openinference_span():
    from openinference.semconv.trace import SpanAttributes

    from retrieval.trace.model import RunResult
    from traces.otel.spans import COST_SOURCE, CPU_SECONDS, REPETITION, RunContext, run_spans

    run = RunResult("gear", "q?", cost={"model": "team-qwen-7b", "usd": 0.0012, "source": "prices.csv",
                                        "cpu_s": 0.4}, repetition=2)
    root = run_spans(run, RunContext("r1"))[0].attributes
    assert root[SpanAttributes.LLM_COST_TOTAL] == 0.0012 and root[COST_SOURCE] == "prices.csv"
    assert root[CPU_SECONDS] == 0.4 and root[REPETITION] == 2
    unknown = RunResult("gear", "q?", cost={"model": "x", "usd": None, "source": "price unknown", "cpu_s": None})
    assert SpanAttributes.LLM_COST_TOTAL not in run_spans(unknown, RunContext("r2"))[0].attributes


def test_the_leaderboard_names_the_protocol_and_tells_a_self_answering_agent_from_runs_timed_elsewhere():
    """Hand-made summaries: GRASP answers itself (a latency, no answer step); GRIEVER's runs were all
    timed on another machine (no time here at all), which is not answering by itself."""
    from traces.stats.leaderboard import build
    from traces.storage.experiments import Experiment

    summary = {"methods": {
        "grasp": {"questions": 2, "recall@5": 0.5, "recall@10": 0.6, "em": 0.5, "f1": 0.5, "latency_ms_p50": 40_000.0},
        "griever": {"questions": 2, "recall@5": 0.7, "recall@10": 0.8, "em": 0.5, "f1": 0.6,
                    "timed_elsewhere": {"another CPU": {"questions": 2}}, "timed_questions": 0},
        "bm25": {"questions": 2, "recall@5": 0.4, "recall@10": 0.5, "em": 0.0, "f1": 0.1, "latency_ms_p50": 12_000.0,
                 "retrieval_ms_p50": 2.0, "answer_ms_p50": 11_998.0}}}
    exp = Experiment("e" * 32, 0.0, "record", "demo", "fp", "llm", "abc", "done", n_questions=2,
                     spec={"methods": {m: {} for m in summary["methods"]}, "ks": [5, 10], "protocol": "slice",
                           "machine": "this CPU"}, summary=summary)
    board = build(exp)
    assert {r.method: r.self_answered for r in board.rows} == {"grasp": True, "griever": False, "bm25": False}
    assert any(n.startswith("retrieval s of grasp:") for n in board.notes)
    assert board.header("recall@5") == "recall@5 (top 5 of k=10)" and board.header("EM") == "EM"
    head = board.text().splitlines()[1]
    assert "recall@5 (top 5 of k=10)" in head and "recall@10 (asked at k=10)" in head
