"""Questions composed from a KB's graph: pairs found, each check dropping what it must, a person's
review, a generated set benched like a gold set, the public cap, and the embedded model once."""
from __future__ import annotations

import json
import sqlite3

import pytest
from llm_double import scripted_llm

from retrieval.core.errors import ConfigError, InputError
from retrieval.qgen import checks
from retrieval.qgen.generate import Generated, generate, one
from retrieval.qgen.pairs import mine
from traces.storage.generations import DROPPED_BY_PERSON, Generations, generate_set
from traces.storage.questionsets import QuestionSets
from traces.storage.store import TraceStore

PASSAGES = [
    ("pA", "Journal X", "Journal X is a quarterly journal published by Acme Press since 1990."),
    ("pB", "Acme Press", "Acme Press is a publisher founded in 1931. It is owned by Widget Co."),
    ("pC", "Widget Co", "Widget Co is a holding founded in 1950 and headquartered in Oslo."),
]
TRIPLES = [
    ("pA", "Journal X", "published by", "Acme Press"),
    ("pB", "Acme Press", "founded in", "1931"),
    ("pB", "Acme Press", "owned by", "Widget Co"),
    ("pC", "Widget Co", "founded in", "1950"),
    ("pC", "Widget Co", "headquartered in", "Oslo"),
]


def _hand_kb(path, passages, triples) -> sqlite3.Connection:
    """A hand-made KB: the two tables the pair miner reads."""
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE passages(rowid INTEGER PRIMARY KEY, id TEXT, title TEXT, text TEXT)")
    con.execute("CREATE TABLE triples(rowid INTEGER PRIMARY KEY, passage_rowid INTEGER, subject TEXT, predicate TEXT, "
                "object TEXT)")
    rowid = {}
    for i, (pid, title, text) in enumerate(passages, 1):
        con.execute("INSERT INTO passages VALUES (?,?,?,?)", (i, pid, title, text))
        rowid[pid] = i
    for pid, s, p, o in triples:
        con.execute("INSERT INTO triples(passage_rowid, subject, predicate, object) VALUES (?,?,?,?)",
                    (rowid[pid], s, p, o))
    con.commit()
    return con


@pytest.fixture
def kb(tmp_path):
    path = tmp_path / "hand.sqlite"
    con = _hand_kb(path, PASSAGES, TRIPLES)
    yield path, con
    con.close()


def _find(cands, kind, answer):
    return next(c for c in cands if c.kind == kind and c.answer == answer)


def test_bridge_chain_and_comparison_pairs_are_found_on_a_hand_made_kb(kb):
    cands = mine(kb[1])
    bridge = _find(cands, "bridge", "1931")
    assert bridge.gold == ["pA", "pB"] and bridge.bridges == ["Acme Press"] and bridge.hops == 2
    chain = _find(cands, "chain", "Oslo")
    assert chain.gold == ["pA", "pB", "pC"] and chain.bridges == ["Acme Press", "Widget Co"]
    comparison = _find(cands, "comparison", "Acme Press")  # founded 1931, before Widget Co's 1950
    assert sorted(comparison.gold) == ["pB", "pC"]
    # the answer of every bridge is written in its last passage
    text = {pid: t for pid, _, t in PASSAGES}
    assert all(c.answer in text[c.gold[-1]] for c in cands if c.kind != "comparison")


def test_a_kb_with_nothing_to_bridge_on_is_refused_before_any_request(tmp_path):
    path = tmp_path / "flat.sqlite"
    con = _hand_kb(path, [("p1", "Lone", "Lone is alone.")], [])
    llm, backend = scripted_llm({})
    with pytest.raises(ConfigError, match="nothing to bridge on"):
        generate(llm, con, 3)
    traces = TraceStore(tmp_path / "traces.sqlite")
    with pytest.raises(ConfigError, match="nothing to bridge on"):
        generate_set(traces, "flat", path, "g", 3, llm)
    assert backend.requests == [] and Generations(traces).rows("flat", "g") == []
    with pytest.raises(ConfigError, match="--n must be at least 1"):
        generate(llm, con, 0)


def _run(kb, script, answer="1931", kept=()):
    """One bridge candidate through every check, the LLM replaced by a scripted test double."""
    cands = mine(kb[1])
    c = _find(cands, "bridge", answer)
    llm, backend = scripted_llm(script)
    passages = {pid: (title, text) for pid, title, text in PASSAGES}
    return one(llm, c, passages, "template", list(kept)), backend


GOOD = {"rephrase": ['{"question": "When was the publisher of Journal X founded?"}'],
        "answerability probe": ['{"answer": "1931"}'],
        "shortcut probe": ['{"answer": "unknown"}', '{"answer": "unknown"}']}


def test_a_question_that_passes_every_check_is_kept_with_its_gold_in_hop_order(kb):
    g, backend = _run(kb, GOOD)
    assert g.kept and g.reason == "" and g.gold == ["pA", "pB"] and g.answer == "1931"
    assert backend.purposes() == ["rephrase", "answerability probe", "shortcut probe", "shortcut probe"]
    # the rephrasing never sees the bridge entity
    assert "Acme Press" not in json.dumps(backend.requests[0][1])
    names = [s.name for s in g.run.stages]
    assert names == ["hops", "compose", "checks", "answerable", "shortcut", "verdict"]


@pytest.mark.parametrize("question,reason", [
    ("When was Acme Press founded?", checks.NAMES_BRIDGE),
    ("Was the publisher of Journal X founded in 1931?", checks.ANSWER_IN_QUESTION),
])
def test_cheap_checks_drop_before_any_probe(kb, question, reason):
    g, backend = _run(kb, {"rephrase": [json.dumps({"question": question})]})
    assert not g.kept and g.reason.startswith(reason)
    assert backend.purposes() == ["rephrase"]


def test_a_duplicate_is_dropped(kb):
    g, _ = _run(kb, GOOD, kept=["When was the publisher of Journal X founded?"])
    assert not g.kept and g.reason.startswith(checks.DUPLICATE)


def test_an_answer_missing_from_the_last_passage_is_dropped():
    assert checks.answer_in_gold("1931", "bridge", ["Acme Press was founded in 1931."]) is None
    assert checks.answer_in_gold("1931", "bridge", ["Journal X mentions 1931.", "Acme Press."]).startswith(
        checks.ANSWER_NOT_IN_GOLD)
    assert checks.answer_in_gold("Acme Press", "comparison", ["Acme Press ...", "Widget Co ..."]) is None


def test_a_question_one_passage_answers_alone_is_dropped(kb):
    script = {**GOOD, "shortcut probe": ['{"answer": "unknown"}', '{"answer": "in 1931"}']}
    g, backend = _run(kb, script)
    assert not g.kept and g.reason.startswith(checks.SHORTCUT) and "pB" in g.reason
    assert [p["answers_it"] for p in g.probes] == [False, True]


def test_a_rephrasing_that_drifted_from_its_facts_is_dropped(kb):
    script = {**GOOD, "answerability probe": ['{"answer": "Oslo"}']}
    g, backend = _run(kb, script)
    assert not g.kept and g.reason.startswith(checks.NOT_ANSWERABLE)
    assert "shortcut probe" not in backend.purposes()


def _stored(tmp_path, kb):
    traces = TraceStore(tmp_path / "traces.sqlite")
    gens = Generations(traces)
    g1, _ = _run(kb, GOOD)
    g2, _ = _run(kb, {"rephrase": ['{"question": "Who owns Acme Press?"}']}, answer="Widget Co")
    g3, _ = _run(kb, {**GOOD, "rephrase": ['{"question": "Where is the owner of the publisher of Journal X based?"}'],
                      "answerability probe": ['{"answer": "Oslo"}']}, answer="Oslo")
    for g in (g1, g2, g3):
        gens.record("hand", "gen", "", g, "template", "scripted test double", "")
    gens.publish("hand", "gen", "", {"generated": True, "model": "scripted test double"})
    return traces, gens


def test_kept_questions_form_a_generated_set_with_gold_and_drops_keep_their_reason(tmp_path, kb):
    traces, gens = _stored(tmp_path, kb)
    qs = QuestionSets(traces).get("hand", "gen")
    assert qs.kind == "generated" and qs.n == 2 and qs.n_gold == 2 and qs.meta["dropped"] == {checks.NAMES_BRIDGE: 1}
    assert qs.meta["model"] == "scripted test double" and qs.meta["tried"] == 3
    qs_questions = QuestionSets(traces).questions(qs)
    assert qs_questions[0].gold_passage_ids == ["pA", "pB"] and qs_questions[0].answers == ["1931"]


def test_an_edit_is_kept_a_drop_is_recorded_and_an_empty_edit_changes_nothing(tmp_path, kb):
    traces, gens = _stored(tmp_path, kb)
    first, second = [r for r in gens.rows("hand", "gen") if r.kept]
    gens.review("hand", "gen", "", first.qid, "edit", "In which year was Journal X's publisher founded?")
    sets = QuestionSets(traces)
    texts = [q.text for q in sets.questions(sets.get("hand", "gen"))]
    assert texts[0] == "In which year was Journal X's publisher founded?"
    assert sets.questions(sets.get("hand", "gen"))[0].answers == ["1931"]  # answer unchanged
    with pytest.raises(InputError, match="must leave a question"):
        gens.review("hand", "gen", "", second.qid, "edit", "   ")
    assert [q.text for q in sets.questions(sets.get("hand", "gen"))] == texts
    row = gens.review("hand", "gen", "", second.qid, "drop")
    assert row.status == "dropped" and row.reason == DROPPED_BY_PERSON and row.reviewed
    after = sets.get("hand", "gen")
    assert after.n == 1 and after.meta["dropped"][DROPPED_BY_PERSON] == 1


def test_a_generated_set_is_benched_like_a_gold_set(tmp_path, small_kb, monkeypatch, capsys):
    """Questions with gold from the small KB's own passages, stored as a generation, then benched."""
    from retrieval.cli import main
    from retrieval.store.sqlite import SQLiteStore

    monkeypatch.setenv("HOPTRACE_TRACES", str(tmp_path / "traces.sqlite"))
    store = SQLiteStore(small_kb)
    traces = TraceStore(tmp_path / "traces.sqlite")
    gens = Generations(traces)
    for i, q in enumerate(store.questions()[:3]):
        gold = list(q.gold_passage_ids)
        g = Generated(f"k{i}", "bridge", len(gold), gold, ["x"], q.text, q.answers[0], "template", True)
        gens.record(str(small_kb), "gen", "", g, "template", "scripted test double", "")
    gens.publish(str(small_kb), "gen", "", {"generated": True})
    assert main(["bench", "--kb", str(small_kb), "--question-set", "gen", "--methods", "bm25,dense", "--ks", "5",
                 "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "recall@5" in out and "hoptrace compare" in out  # gold: recall is measured, not left out
    gen_exp = out.split("experiment ")[1].split(":")[0]
    assert main(["bench", "--kb", str(small_kb), "--methods", "bm25,dense", "--ks", "5", "--limit", "5",
                 "--quiet"]) == 0
    real_exp = capsys.readouterr().out.split("experiment ")[1].split(":")[0]
    assert main(["questions", "validity", real_exp, gen_exp, "--kb", str(small_kb)]) == 0
    out = capsys.readouterr().out
    assert "Kendall tau" in out and "bm25 vs dense" in out and "real:" in out and "generated:" in out


def test_public_mode_caps_generation():
    from ui.public import LimitError, PublicLimits

    limits = PublicLimits(enabled=True)
    limits.check_generate(limits.max_generate)
    with pytest.raises(LimitError, match="at most 20 questions"):
        limits.check_generate(limits.max_generate + 1)
    PublicLimits(enabled=False).check_generate(500)


def test_the_embedded_model_generates_and_checks_a_question(tmp_path, small_kb):
    """The real local LLM, once: one candidate of the small KB through compose and every probe."""
    from embedded import cached_calls, real_llm

    llm = real_llm()
    traces = TraceStore(tmp_path / "traces.sqlite")
    rep = generate_set(traces, "small", small_kb, "real", 1, llm, max_tries=2)
    assert 1 <= len(rep.rows) <= 2
    # A candidate whose question the model could not write (a placeholder left in, twice) is
    # dropped with that reason; at least one got through compose to the probes.
    assert any(r.question for r in rep.rows), rep.rows
    for r in rep.rows:
        assert r.kept or r.reason, r
        assert r.question or r.reason.startswith(checks.COMPOSE_FAILED), r
        assert r.run_id and traces.load_run(r.run_id)[0].method == "qgen"
        run = traces.load_run(r.run_id)[0]
        assert run.tokens_in > 0 and not cached_calls(run)
