"""LLM extraction (issue 8) with the scripted test double of the chat backend: parsing,
batch fallback, failure records, --retry-failed, resume after a crash, appends, estimate."""
import dataclasses
import json
import re
import sqlite3
import threading
import time

import pytest
from llm_double import scripted_llm as _scripted_llm

from retrieval.cli import main
from retrieval.core.records import Passage, Question
from retrieval.kb.build import build_kb, extracted_passage_ids
from retrieval.kb.extract.llm import TASKS, LLMExtractor, estimate, llm_extractors
from retrieval.kb.extract.llm.tasks import JOINT
from retrieval.kb.presets import sample_corpus
from retrieval.llm import LLM, LLMSettings
from retrieval.llm.backends import RawReply


def scripted_llm(script):
    """The scripted double, one request at a time (its queues are consumed in request order)."""
    llm, backend = _scripted_llm(script)
    llm.settings = dataclasses.replace(llm.settings, concurrency=1)
    return llm, backend

P = [Passage(f"p{i}", f"Title {i}", f"Title {i} was founded in {1900 + i} in City {i}. It makes boats.")
     for i in range(1, 6)]


def triples_answer(i: int) -> str:
    return json.dumps({"named_entities": [f"Title {i}", f"City {i}"],
                       "triples": [[f"Title {i}", "founded in", f"City {i}"], [f"Title {i}", "makes", "boats"],
                                   [f"Title {i}", "broken"]]})


def event_answer(i: int) -> str:
    return json.dumps({"event": f"Title {i} was founded in City {i} in {1900 + i} and makes boats.",
                       "entities": [{"name": f"Title {i}", "type": "organization"},
                                    {"name": f"City {i}", "type": "location"}]})


def props_item(i: int, n: int) -> dict:
    return {"passage": n, "propositions": [f"Title {i} was founded in City {i}.", f"Title {i} makes boats."],
            "entities": [{"name": f"Title {i}", "type": "organization", "propositions": [0, 1]},
                         {"name": f"City {i}", "type": "location", "propositions": [0, 7]}]}


def rows(path, sql):
    con = sqlite3.connect(path)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


# --- tasks ------------------------------------------------------------------------------------------
def test_triples_task_keeps_good_triples_and_counts_bad_ones():
    value = TASKS["triples"].check(json.loads(triples_answer(1)), P[:1])
    (ex,) = TASKS["triples"].parse(value, P[:1])
    assert [(t.subject, t.predicate, t.object) for t in ex.triples] == [
        ("Title 1", "founded in", "City 1"), ("Title 1", "makes", "boats")]
    assert ex.malformed == 1 and [e.name for e in ex.entities] == ["Title 1", "City 1"]
    with pytest.raises(ValueError, match="no usable"):
        TASKS["triples"].check({"named_entities": ["x"], "triples": [["only two", "parts"]]}, P[:1])


def test_event_task_rejects_an_empty_event():
    with pytest.raises(ValueError, match="event"):
        TASKS["events"].check({"event": "", "entities": [{"name": "A", "type": "person"}]}, P[:1])
    (ex,) = TASKS["events"].parse(json.loads(event_answer(2)), P[1:2])
    assert ex.events[0].summary.startswith("Title 2 was founded")
    assert [(e.name, e.type) for e in ex.events[0].entities] == [("Title 2", "organization"), ("City 2", "location")]


def test_propositions_task_links_entities_by_index_and_reports_missing_passages():
    value = {"passages": [props_item(1, 1), props_item(3, 3)]}
    out = TASKS["propositions"].parse(TASKS["propositions"].check(value, P[:3]), P[:3])
    assert out[1] is None  # passage 2 left out: the extractor asks for it alone
    ex = out[0]
    assert [p.text for p in ex.propositions] == ["Title 1 was founded in City 1.", "Title 1 makes boats."]
    assert [e.name for e in ex.propositions[0].entities] == ["Title 1", "City 1"]
    assert [e.name for e in ex.propositions[1].entities] == ["Title 1"]
    assert ex.malformed == 1  # index 7 points at no proposition


def joint_answer(i: int) -> str:
    return json.dumps({"entities": {"location": [f"City {i}"], "organization": [f"Title {i}"]},
                       "triples": [[f"Title {i}", "was founded in", f"City {i}"], [f"Title {i}", "makes", "boats"],
                                   ["half a triple"]],
                       "event": f"Title {i} was founded in City {i} in {1900 + i} and makes boats."})


def test_one_read_fills_triples_events_and_propositions_from_one_answer():
    value = JOINT.check(json.loads(joint_answer(1)), P[:1])
    (ex,) = JOINT.parse(value, P[:1])
    assert [(t.subject, t.predicate, t.object) for t in ex.triples] == [
        ("Title 1", "was founded in", "City 1"), ("Title 1", "makes", "boats")]
    assert ex.malformed == 1
    # propositions are the triples verbalised, linked to the typed entities they name
    assert [p.text for p in ex.propositions] == ["Title 1 was founded in City 1.", "Title 1 makes boats."]
    assert [(e.name, e.type) for e in ex.propositions[0].entities] == [("Title 1", "organization"),
                                                                       ("City 1", "location")]
    assert [(e.name, e.type) for e in ex.propositions[1].entities] == [("Title 1", "organization"), ("boats", None)]
    (event,) = ex.events
    assert event.summary.startswith("Title 1 was founded")
    assert {(e.name, e.type) for e in event.entities} == {("Title 1", "organization"), ("City 1", "location")}
    assert {e.name for e in ex.entities} == {"Title 1", "City 1", "boats"}
    with pytest.raises(ValueError, match="event"):
        JOINT.check({"entities": {}, "triples": [["a", "b", "c"]], "event": ""}, P[:1])
    with pytest.raises(ValueError, match="no usable"):
        JOINT.check({"entities": {}, "triples": [["a", "b"]], "event": "a b c d"}, P[:1])
    assert JOINT.layers == ("triples", "events", "propositions") and TASKS["events"].layers == ("events",)


def test_one_read_build_sends_one_request_a_passage_and_fills_every_layer(tmp_path, embedder):
    kb = tmp_path / "joint.sqlite"
    llm, backend = scripted_llm({"extract joint": [joint_answer(i) for i in (1, 2, 3)]})
    (ex,) = llm_extractors(llm, TASKS, reads="one")
    report = build_kb(kb, P[:3], [ex], embedder, progress=False)
    assert backend.purposes() == ["extract joint"] * 3
    assert report.extracted == {"triples": 3, "events": 3, "propositions": 3}
    assert rows(kb, "SELECT count(*) FROM triples")[0][0] == 6
    assert rows(kb, "SELECT count(*) FROM events")[0][0] == 3
    assert rows(kb, "SELECT count(*) FROM propositions")[0][0] == 6
    assert rows(kb, "SELECT type FROM entities WHERE name='City 2'") == [("location",)]
    assert {r[0] for r in rows(kb,
                               "SELECT extractor FROM extraction_state")} == {"llm@1/one-read2:scripted-test-double"}
    # a single layer asked of the LLM keeps its paper's own prompt
    assert [e.task.layer for e in llm_extractors(llm, ["triples"], reads="one")] == ["triples"]


# --- the extractor --------------------------------------------------------------------------------
def test_batch_leaving_a_passage_out_retries_it_alone_and_a_hopeless_one_fails_with_its_reason():
    llm, backend = scripted_llm({"extract propositions": [
        json.dumps({"passages": [props_item(1, 1), props_item(2, 2)]}),   # passage 3 missing
        json.dumps({"passages": [props_item(3, 1)]}),                      # asked alone: fine
        json.dumps({"passages": [props_item(4, 1)]}),                      # second batch of 1: passage 4
    ]})
    ex = LLMExtractor(llm, "propositions", batch_size=3)
    out = list(ex.extract(P[:4]))
    assert [o.passage_id for o in out] == ["p1", "p2", "p3", "p4"]
    assert all(o.failed is None and len(o.propositions) == 2 for o in out)
    assert out[2].propositions[0].text == "Title 3 was founded in City 3."
    assert backend.purposes() == ["extract propositions"] * 3

    llm, backend = scripted_llm({"extract events": ['{"event": "", "entities": []}', "not json at all"]})
    (res,) = LLMExtractor(llm, "events").extract(P[:1])
    assert res.failed and "after one repair" in res.failed and not res.events
    assert backend.purposes() == ["extract events", "extract events (repair)"]


def full_script(ids, fail_event=()):
    return {"extract triples": [triples_answer(i) for i in ids],
            "extract events": [("{}" if i in fail_event else event_answer(i)) for i in ids for _ in
                               ((0, 1) if i in fail_event else (0,))],
            "extract propositions": [json.dumps({"passages": [props_item(i, 1)]}) for i in ids]}


def test_build_records_failures_and_retry_failed_redoes_only_them(tmp_path, embedder):
    kb = tmp_path / "llm.sqlite"
    llm, backend = scripted_llm(full_script([1, 2, 3], fail_event={2}))
    report = build_kb(kb, P[:3], llm_extractors(llm, TASKS, batch_size=1), embedder, progress=False)
    assert report.failed == {"events": 1} and report.failed_total == {"events": 1}
    assert rows(kb, "SELECT count(*) FROM triples")[0][0] == 6
    assert rows(kb, "SELECT count(*) FROM events")[0][0] == 2
    assert rows(kb, "SELECT count(*) FROM propositions")[0][0] == 6
    (reason,) = rows(kb, "SELECT reason FROM extraction_state WHERE status='failed'")
    assert "not usable JSON" in reason[0]
    meta = json.loads(rows(kb, "SELECT value FROM meta WHERE key='llm_extraction'")[0][0])
    assert [m["layer"] for m in meta] == ["triples", "events", "propositions"]
    assert meta[1]["failed"] == 1 and meta[0]["tokens_in"] > 0 and meta[0]["model"] == "scripted-test-double"

    llm, backend = scripted_llm({"extract events": [event_answer(2)]})
    report = build_kb(kb, P[:3], llm_extractors(llm, TASKS, batch_size=1), embedder, progress=False,
                      retry_failed=True)
    assert backend.purposes() == ["extract events"]  # one request: the failed passage's event
    assert report.retried == {"events": 1} and report.failed_total == {}
    assert rows(kb, "SELECT count(*) FROM events")[0][0] == 3
    assert rows(kb, "SELECT count(*) FROM vectors WHERE layer='events'")[0][0] == 3


def test_a_crashed_build_resumes_without_extracting_anything_twice(tmp_path, embedder):
    kb = tmp_path / "resume.sqlite"
    script = full_script([1, 2, 3])
    script["extract triples"] = script["extract triples"][:2]  # the third triples request "crashes"
    llm, _ = scripted_llm(script)
    with pytest.raises(AssertionError, match="no more answers"):
        build_kb(kb, P[:3], llm_extractors(llm, TASKS, batch_size=1), embedder, progress=False)
    assert not kb.exists() and (tmp_path / "resume.sqlite.building").exists()
    llm, backend = scripted_llm(full_script([3]) | {
        "extract events": [event_answer(i) for i in (1, 2, 3)],
        "extract propositions": [json.dumps({"passages": [props_item(i, 1)]}) for i in (1, 2, 3)]})
    build_kb(kb, P[:3], llm_extractors(llm, TASKS, batch_size=1), embedder, progress=False)
    assert backend.purposes().count("extract triples") == 1  # only passage 3's triples were asked again
    assert rows(kb, "SELECT count(*), count(DISTINCT passage_rowid) FROM triples")[0] == (6, 3)


def test_appending_passages_extracts_only_the_new_ones(tmp_path, embedder):
    kb = tmp_path / "append.sqlite"
    llm, _ = scripted_llm(full_script([1, 2, 3]))
    build_kb(kb, P[:3], llm_extractors(llm, TASKS, batch_size=5), embedder, progress=False)
    llm, backend = scripted_llm(full_script([4, 5]) | {"extract propositions": [
        json.dumps({"passages": [props_item(4, 1), props_item(5, 2)]})]})
    report = build_kb(kb, P, llm_extractors(llm, TASKS, batch_size=5), embedder, progress=False)
    assert report.passages_added == 2 and report.extracted == {"triples": 2, "events": 2, "propositions": 2}
    assert sorted(backend.purposes()) == ["extract events"] * 2 + ["extract propositions"] + ["extract triples"] * 2
    assert rows(kb, "SELECT count(*) FROM events")[0][0] == 5
    assert all(len(v) == 5 for v in extracted_passage_ids(kb, TASKS).values())


def test_estimate_counts_requests_and_skips_what_the_kb_has():
    settings = LLMSettings(backend="openai", model="m", base_url="http://x")
    counter = (lambda text: len(text.split()), "words")
    est = estimate(P, list(TASKS), settings, batch_size=2, already_done={"events": {"p1", "p2"}},
                   price_in=1.0, price_out=2.0, counter=counter)
    by = {r.layer: r for r in est.rows}
    assert (by["triples"].requests, by["events"].requests, by["propositions"].requests) == (5, 3, 3)
    assert est.already_done["events"] == 2 and by["events"].passages == 3
    assert est.tokens_in > 0 and est.cost() == pytest.approx((est.tokens_in + 2 * est.tokens_out) / 1e6)
    assert "cost at $1 / $2" in est.render()


def test_estimate_of_one_read_counts_one_request_a_passage_and_the_cached_prefix_once():
    settings = LLMSettings(backend="openai", model="m", base_url="http://x")
    counter = (lambda text: len(text.split()), "words")
    # the build tests a joint run against its first layer by name (build._extract), so does the estimate
    est = estimate(P, list(TASKS), settings, already_done={"events": {"p1"}}, counter=counter, reads="one")
    (row,) = est.rows
    assert (row.layer, row.requests, row.passages) == ("joint", 4, 4)
    prefix = sum(5 + counter[0](m["content"]) for m in JOINT.messages(P[:1])[:-1])
    # the first request reads the whole prompt, the three others only their passage
    assert row.tokens_in - row.tokens_processed == 3 * prefix
    per_layer = estimate(P, list(TASKS), settings, counter=counter)
    assert est.tokens_out < per_layer.tokens_out and len(per_layer.rows) == 3


def test_a_build_calibrates_speed_and_output_size_and_later_estimates_use_both(tmp_path, monkeypatch):
    from retrieval.kb.extract.llm.estimate import LOCAL_GEN_TOK_S, calibrate

    monkeypatch.setenv("HOPTRACE_HOME", str(tmp_path))
    settings = LLMSettings(backend="local", model="m")
    counter = (lambda text: len(text.split()), "words")
    before = estimate(P, list(TASKS), settings, counter=counter, reads="one")
    (row,) = before.rows
    assert row.out_factor == 1.0 and before.calibration is None
    # the model wrote 1.5x what the size model forecast, at half the default speed
    written = round(1.5 * row.tokens_out)
    seconds = 2 * (row.tokens_processed / before.prompt_tok_s + written / before.gen_tok_s)
    calibrate("m", before, [{"layer": "joint", "passages": 5, "tokens_in": row.tokens_in,
                             "tokens_out": written, "seconds": seconds, "cached_calls": 0}])
    after = estimate(P, list(TASKS), settings, counter=counter, reads="one")
    assert after.rows[0].out_factor == pytest.approx(1.5, abs=0.01)
    assert after.tokens_out == pytest.approx(written, abs=2)
    assert after.gen_tok_s == pytest.approx(LOCAL_GEN_TOK_S / 2, rel=0.01)
    assert after.local_hours() * 3600 == pytest.approx(seconds, rel=0.01)
    assert "joint x1.5" in after.render()
    # a second build measures against the unscaled size model: the factor does not compound
    calibrate("m", after, [{"layer": "joint", "passages": 5, "tokens_in": row.tokens_in,
                            "tokens_out": written, "seconds": seconds, "cached_calls": 0}])
    assert estimate(P, list(TASKS), settings, counter=counter, reads="one").rows[0].out_factor == pytest.approx(1.5,
                                                                                                                abs=0.01)


def test_sample_keeps_only_answerable_questions():
    passages = [Passage(f"x{i}", f"T{i}", "text") for i in range(20)]
    qs = [Question(f"q{i}", "?", ["a"], [f"x{2 * i + 5}", f"x{2 * i + 6}"]) for i in range(5)]
    sub, kept = sample_corpus(passages, qs, 10)
    assert len(sub) == 10 and [q.id for q in kept] == ["q0", "q1"]
    assert all(g in {p.id for p in sub} for q in kept for g in q.gold_passage_ids)


@pytest.mark.parametrize("argv, message", [
    (["build", "--demo", "--estimate"], "--estimate prices LLM extraction"),
    (["build", "--demo", "--extractor", "llm", "--layers", "triples,bogus"], "--layers takes"),
    (["build", "--demo", "--extractor", "llm", "--llm", "none"], "needs an LLM"),
    (["build", "--demo", "--extractor", "llm", "--batch-size", "0"], "--batch-size must be at least 1"),
    (["build", "--demo", "--store", "es+ftp://x/demo"], "bad Elasticsearch URL"),
])
def test_bad_build_options_name_the_problem(argv, message, capsys):
    assert main(argv) == 2
    assert message in capsys.readouterr().err


class TitleEchoBackend:
    """A test double that answers a triples request for whichever passage it was sent, slowly,
    and records how many requests were in flight at once."""
    model = "echo-test-double"

    def __init__(self):
        self.lock = threading.Lock()
        self.in_flight = self.max_in_flight = 0

    def describe(self):
        return "echo test double"

    def complete(self, messages, *, max_tokens, temperature, seed, schema=None, name=""):
        with self.lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        time.sleep(0.2)
        i = int(re.search(r"Title: Title (\d+)", messages[-1]["content"]).group(1))
        with self.lock:
            self.in_flight -= 1
        return RawReply(triples_answer(i), 10, 10)

    def count_tokens(self, text):
        return 1


def test_http_requests_run_in_parallel_under_the_limit_and_come_back_in_order():
    backend = TitleEchoBackend()
    llm = LLM(LLMSettings(backend="openai", model=backend.model, cache=False, concurrency=3), backend=backend)
    many = [Passage(f"p{i}", f"Title {i}", "text") for i in range(1, 13)]
    out = list(LLMExtractor(llm, "triples").extract(many))
    assert [o.passage_id for o in out] == [p.id for p in many]
    assert all(o.triples[0].subject == f"Title {i}" for i, o in enumerate(out, 1))
    assert backend.max_in_flight == 3
