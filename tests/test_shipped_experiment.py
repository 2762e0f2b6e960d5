"""The shipped experiment (traces/storage/recording.py, shipped.py): recorded one sitting at a
time, a unit disturbed by other work recorded again, written to a file, installed once per
version, never pruned, and shown as a leaderboard whose stale rows are labelled. The answers come
from the scripted test double of the LLM interface (tests/llm_double.py): what is tested here is
the recorder's control flow and the file, not the model's answers."""
from __future__ import annotations

import dataclasses
import json
import os
import signal

import pytest
from llm_double import scripted_llm

from retrieval.cli import main
from retrieval.core import cpu, idle
from retrieval.core.errors import ConfigError
from retrieval.showcase import write_recording
from traces.stats.leaderboard import build
from traces.storage import recording, shipped
from traces.storage.experiments import Experiments
from traces.storage.retention import Retention, prune
from traces.storage.store import TraceStore

HOSTILE = "<img src=x onerror=alert(1)>"


def _answering(ctx, n: int = 40):
    llm, backend = scripted_llm({"answer": [json.dumps({"answer": "Nobody"})] * n})
    return dataclasses.replace(ctx, llm=llm), backend


def _recorded(ctx, tmp_path, monkeypatch, busy=None):
    """bm25 (a main method) and composed (an ablation row) on 4 questions in chunks of 2: the
    first sitting records one unit only, disturbed once by `busy` when given. Without `busy` the
    idle watch is a test double (_Quiet): those tests are not about the machine's load, and beside
    the suite's other worker a real watch would call their unit disturbed."""
    monkeypatch.setattr(recording, "CHUNK", 2)
    monkeypatch.setattr(recording, "WATCH_INTERVAL_S", 0.2)
    monkeypatch.setattr(idle, "SETTLE_S", 0.0)
    # Retakes without their pause: in the suite a calibration beside the busy process's end read
    # slow and waited 9 s for nothing (retakes are tested in test_idle).
    monkeypatch.setattr(idle, "RETAKE_PAUSE_S", 0.0)
    actx, _ = _answering(ctx)
    experiments = Experiments(TraceStore(tmp_path / "a.sqlite"))
    questions = ctx.store.questions()
    lead = questions[2].text
    qs = recording.order_questions(questions, [lead], 4)
    exp = recording.start(experiments, actx, "small", qs, ["composed", "bm25"], llm_questions=2)
    said = []

    def wait_idle():   # the other work stops: killed by its pid
        try:
            os.kill(busy, signal.SIGKILL)
        except ProcessLookupError:  # it spins 30 s, then ends by itself: on a slow host it already had
            pass

    fresh = []
    monkeypatch.setattr(recording, "fresh_model", lambda llm: fresh.append(llm))
    sitting = recording.record_sitting(experiments, exp, actx, qs, minutes=1e-6,
                                       on_unit=lambda u, n, label: said.append((u.method, u.chunk, n, label)),
                                       wait_idle=wait_idle if busy else lambda: None,
                                       watch=None if busy else _Quiet)
    sitting.fresh_models = len(fresh)
    return experiments, exp, actx, qs, sitting, said


@pytest.mark.alone
def test_a_disturbed_unit_is_recorded_again_and_a_sitting_resumes_from_the_file(ctx, small_kb, tmp_path, monkeypatch,
                                                                                   busy, capsys):
    experiments, exp, actx, qs, sitting, said = _recorded(ctx, tmp_path, monkeypatch, busy)
    assert qs[0].text == ctx.store.questions()[2].text    # the showcase's questions lead
    # The main method first, chunk by chunk, then the ablation row.
    assert [(u.method, u.chunk) for u in recording.plan(exp, qs)] == [("bm25", 0), ("bm25", 1), ("composed", 0),
                                                                     ("composed", 1)]
    # Disturbed: discarded and recorded again once the machine was quiet; one unit in this sitting.
    assert said[0][:3] == ("bm25", 0, 0) and "under load" in said[0][3] and "discarded" in said[0][3]
    assert said[1][:3] == ("bm25", 0, 2) and said[1][3].endswith("idle")
    assert (sitting.units, sitting.redone, sitting.runs) == (1, 1, 2)
    # The model's server starts anew before each attempt: a unit recorded again would otherwise
    # answer from the disturbed attempt's cached prompts.
    assert sitting.fresh_models == 2
    entries = experiments.entries(exp)
    assert sorted((e["question_id"], e["method"]) for e in entries) == sorted((q.id, "bm25") for q in qs[:2])
    assert all(e["row"]["em"] is not None for e in entries)   # every run ended with an answer
    assert not recording.close_sitting(experiments, exp, sitting, qs)
    assert exp.status == "paused" and exp.summary["methods"]["bm25"]["questions"] == 2
    assert exp.spec["sittings"][0]["verdict"] == "idle" and exp.spec["sittings"][0]["redone"] == 1

    out = tmp_path / "small.json.gz"
    shipped.write(experiments, exp, out)
    other = Experiments(TraceStore(tmp_path / "b.sqlite"))
    copy = shipped.install(other.traces, out)
    assert copy.id == exp.id and len(other.entries(copy)) == 2 and copy.status == "paused"
    run, _ = other.traces.load_run(other.entries(copy)[0]["run_id"])
    assert run.stages[-1].name == "answer" and run.machine == cpu.describe()
    shipped.install(other.traces, out)   # the same version again: nothing doubles
    assert other.traces.db.execute("SELECT count(*) FROM sessions WHERE kind = 'shipped'").fetchone()[0] == 1

    # The next sitting, on the installed copy, records the rest and completes it. Its watch is the
    # quiet double: load is the first sitting's subject, and on CI's noisy host a real calibration
    # once read 55 ms against this file's 33-ms reference and a unit was discarded three times.
    said2 = []
    sitting2 = recording.record_sitting(other, copy, actx, qs, minutes=10, watch=_Quiet,
                                        on_unit=lambda u, n, label: said2.append((u.method, n, label)))
    assert sitting2.units == 3, said2
    assert recording.close_sitting(other, copy, sitting2, qs) and copy.status == "done"
    shipped.write(other, copy, out)
    newer = shipped.install(experiments.traces, out)   # the older version is replaced whole
    assert len(experiments.entries(newer)) == 8 and newer.status == "done"
    assert experiments.traces.db.execute("SELECT count(*) FROM runs WHERE session_id = ?",
                                         [newer.session_id]).fetchone()[0] == 8
    assert len(newer.spec["sittings"]) == 2

    # A sitting on a host slower than this machine's reference (the median of its earlier sittings'
    # calibrations, here made 1 ms) is refused by the one look taken before the model loads, and
    # nothing is stored.
    doc = shipped.read(out)
    for s in doc["experiment"]["spec"]["sittings"]:
        s["calibration_ms"] = [[1.0, 1.0]]
    write_recording(doc, out)
    monkeypatch.setenv("HOPTRACE_TRACES", str(tmp_path / "cli.sqlite"))
    argv = ["record-experiment", "--kb", str(small_kb), "--out", str(out), "--llm", "local", "--minutes", "1"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "reference of 1.0 ms: a slower host under the same name" in err and "--allow-load" in err, err
    assert not (tmp_path / "cli.sqlite").exists()


def test_an_llm_method_is_recorded_twice_after_the_main_figures_and_stable_reads_both(ctx, tmp_path, monkeypatch):
    """composed stands in for an LLM method here (the plan asks `uses_llm`): what is tested is the
    second repetition's place in the plan, what it records, and what the leaderboard reads."""
    monkeypatch.setattr(recording, "CHUNK", 2)
    monkeypatch.setattr(recording, "uses_llm", lambda m: m == "composed")
    actx, _ = _answering(ctx)
    experiments = Experiments(TraceStore(tmp_path / "a.sqlite"))
    qs = recording.order_questions(ctx.store.questions(), [], 4)
    exp = recording.start(experiments, actx, "small", qs, ["bm25", "composed"], llm_questions=2)
    assert [(u.method, u.chunk, u.rep) for u in recording.plan(exp, qs)] == [
        ("bm25", 0, 1), ("bm25", 1, 1), ("composed", 0, 1), ("composed", 0, 2)]
    sitting = recording.record_sitting(experiments, exp, actx, qs, minutes=10, watch=lambda: _Quiet())
    assert (sitting.units, sitting.runs) == (4, 8)
    assert recording.close_sitting(experiments, exp, sitting, qs)
    reps = sorted((e["method"], e["rep"]) for e in experiments.entries(exp, repetitions=True))
    assert reps == [("bm25", 1)] * 4 + [("composed", 1)] * 2 + [("composed", 2)] * 2
    composed, bm25 = exp.summary["methods"]["composed"], exp.summary["methods"]["bm25"]
    assert composed["questions"] == 2 and composed["stable_questions"] == 2
    assert composed["stable@5"] == 1.0    # the same retrieval twice (no LLM in it, in truth)
    assert "stable@5" not in bm25 and bm25["questions"] == 4
    assert "questions recorded twice on one machine (composed 2)" in build(exp).text()
    # The file keeps the first repetition's trace whole and a later one's ranking and stage timeline.
    shipped.write(experiments, exp, tmp_path / "x.json.gz")
    by_rep = {e["rep"]: e["run"] for e in shipped.read(tmp_path / "x.json.gz")["entries"] if e["method"] == "composed"}
    assert any(s.get("subgraph") and s.get("payload") for s in by_rep[1]["stages"])
    assert all(set(s) <= set(shipped.STAGE_SKELETON) and s["message"] for s in by_rep[2]["stages"])
    assert by_rep[2]["ranked"] and [s["name"] for s in by_rep[2]["stages"]] == [s["name"] for s in by_rep[1]["stages"]]
    # A question whose repetitions ran on two machines leaves stable@5, and the leaderboard names it.
    experiments.traces.db.execute(
        "UPDATE experiment_runs SET row = json_set(row, '$.machine', 'Another CPU · 2 cores · avx2') "
        "WHERE experiment_id = ? AND method = 'composed' AND rep = 2 AND question_id = ?", [exp.id, qs[0].id])
    exp.summary = recording.summary(experiments, exp)
    composed = exp.summary["methods"]["composed"]
    assert composed["stable_questions"] == 1 and composed["stable@5"] == 1.0
    assert composed["stable_across_machines"] == {"questions": 1, "stable@5": 1.0, "stable@10": 1.0}
    text = build(exp).text()
    assert "twice on one machine (composed 1)" in text and "different machines" in text, text
    assert "composed 1 (stable@5 there 1.00)" in text
    # A disturbed second repetition is discarded alone: the first stays.
    assert recording.discard(experiments, exp, "composed", [q.id for q in qs[:2]], rep=2) == 2
    assert [u.rep for u in recording.plan(exp, qs) if recording.missing(experiments, exp, u)] == [2]


class _Quiet:
    """A test double of the idle watch: every unit reads idle."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.conditions = idle.judge(None, 20.0, 20.0, [0.0])


def _stored_rows(traces: TraceStore, exp_id: str) -> dict:
    """Each experiment run's stored rows, by (question, method, k, rep): its run row, stages and LLM
    calls (ids and times of storing left out) and the run as read back."""
    out = {}
    for qid, method, k, rep, rid in traces.db.execute(
            "SELECT question_id, method, k, rep, run_id FROM experiment_runs WHERE experiment_id = ?", [exp_id]):
        run = traces.db.execute("SELECT kb, method, question, status, error, latency_ms, tokens_in, tokens_out, "
                                "gold, recall, k FROM runs WHERE id = ?", [rid]).fetchone()
        stages = traces.db.execute("SELECT seq, name, title, status, latency_ms, tokens_in, tokens_out, started_at "
                                   "FROM stages WHERE run_id = ? ORDER BY seq", [rid]).fetchall()
        calls = traces.db.execute("SELECT stage_seq, seq, model, prompt, completion, tokens_in, tokens_out, "
                                  "latency_ms, cached, error FROM llm_calls WHERE run_id = ? ORDER BY stage_seq, seq",
                                  [rid]).fetchall()
        out[(qid, method, k, rep)] = (run, traces.load_run(rid)[0], stages, calls)
    return out


def test_retention_never_prunes_it_and_the_leaderboard_labels_a_stale_method(ctx, tmp_path, monkeypatch):
    experiments, exp, _, qs, sitting, _ = _recorded(ctx, tmp_path, monkeypatch)
    recording.close_sitting(experiments, exp, sitting, qs)
    out = tmp_path / "small.json.gz"
    shipped.write(experiments, exp, out)
    traces = TraceStore(tmp_path / "public.sqlite")
    installed = shipped.install(traces, out)
    assert shipped.shipped_ids(traces) == [installed.id] and shipped.reserved_bytes(traces) > 0
    # Installed straight from the file's dicts (insert_run_dict): the rows and runs the recording stored.
    recorded, copied = _stored_rows(experiments.traces, exp.id), _stored_rows(traces, installed.id)
    assert recorded == copied and len(recorded) == 2 and any(calls for *_, calls in recorded.values())
    # An app started again on this file knows the file's bytes: it does not read the recording again.
    with monkeypatch.context() as m:
        m.setattr(shipped, "read", lambda path: pytest.fail("read again: " + str(path)))
        assert shipped.install(traces, out).id == installed.id
    # A version whose spec alone changed (its fingerprints taken again, its runs the same) replaces
    # the copy: one kept would show the methods stale, and a sitting resumed on it wrote it back.
    doc = shipped.read(out)
    doc["experiment"]["spec"]["methods"]["bm25"]["fingerprint"] = "2.retaken"
    write_recording(doc, out)
    installed = shipped.install(traces, out)
    assert installed.spec["methods"]["bm25"]["fingerprint"] == "2.retaken"
    assert len(Experiments(traces).entries(installed)) == 2
    # Rows stored before rows named their machine, named the experiment's before it moves (--time-here).
    with traces.transaction() as con:
        con.execute("UPDATE experiment_runs SET row = json_set(row, '$.machine', '') WHERE experiment_id = ?",
                    [installed.id])
    assert Experiments(traces).name_row_machines(installed, "the first machine") == 2
    named = {e["row"]["machine"] for e in Experiments(traces).entries(installed, repetitions=True)}
    assert named == {"the first machine"}
    visitor = traces.new_session("small", "a visitor's question")
    report = prune(traces, Retention(max_age_days=0.0, max_mb=0.001), now=installed.created_at + 10 ** 9)
    assert report.sessions == 1 and not traces.session(visitor)
    assert Experiments(traces).get(installed.id).id == installed.id

    board = build(installed, {"bm25": installed.spec["methods"]["bm25"]["fingerprint"], "composed": "changed"})
    assert [r.method for r in board.rows] == ["bm25"]       # composed has no runs yet: not a row
    assert not board.rows[0].stale
    board = build(installed, {"bm25": "changed"})
    assert board.rows[0].stale and "(stale)" in board.text()
    assert f"times on {cpu.describe()}, idle" in board.setting
    assert "4 questions (2 for the LLM methods)" in board.setting
    assert board.rows[0].cells["questions"] == 2



def test_the_leaderboard_bolds_the_best_among_rows_on_the_same_questions(monkeypatch):
    """A recording under way scores methods on 100, 50 or 20 questions: an ablation's 0.9 over 20 is
    bold among the 20s only, and a method alone on its question count is the best of nothing."""
    from types import SimpleNamespace

    from traces.stats import leaderboard
    from ui import evidence

    def row(m, n, r5):
        return leaderboard.Row(m, {"questions": n, "recall@5": r5}, "$0")

    board = leaderboard.Leaderboard([row("bm25", 100, 0.5), row("dense", 100, 0.6), row("gear", 50, 0.7),
                                     row("abl_a", 20, 0.9), row("abl_b", 20, 0.4)], "KB demo")
    assert [(n, [r.method for r in rs]) for n, rs in board.groups()] == [
        (100, ["bm25", "dense"]), (50, ["gear"]), (20, ["abl_a", "abl_b"])]
    assert board.best("recall@5", board.groups()[1][1]) is None
    monkeypatch.setattr(leaderboard, "build", lambda exp, fps: board)
    html = evidence.leaderboard_html(SimpleNamespace(methods=[], spec={}, status="done"))
    assert "<b>0.600</b>" in html and "<b>0.900</b>" in html
    assert "<td>0.700</td>" in html and "<td>0.500</td>" in html and "<td>0.400</td>" in html
    assert html.index("on 100 questions each") < html.index("on 50 questions<") < html.index("on 20 questions")
    assert "among the rows on the same questions" in html

def test_runs_resumed_on_another_machine_are_scored_and_their_times_kept_apart():
    """A sitting resumed on another machine adds its questions to the scores; the time columns read
    the experiment's own machine only, and the row says where its other runs were and what they took."""
    from types import SimpleNamespace

    from retrieval.bench.runner import QuestionResult, summarise
    from traces.stats import leaderboard
    from traces.storage import recording
    from ui import evidence

    a, b = "AMD EPYC · 2 cores · avx2", "Intel Xeon · 2 cores · avx512"
    # Rows stored before rows named their machine ("") are the experiment's own machine's.
    rows = [QuestionResult(f"q{i}", "m", 10, ["g"], ["g"], 1000.0 if i < 3 else 300.0, 0, 0, "ok",
                           machine="" if i < 2 else a if i < 3 else b) for i in range(5)]
    exp = SimpleNamespace(machine=a, ks=[5, 10], kb="demo", n_questions=5, llm="embedded", code_version="abc",
                          methods=["m"], status="done",
                          spec={"sittings": [{"machine": a, "verdict": "idle"}, {"machine": b, "verdict": "idle"}]})
    s = {**summarise({k: rows for k in exp.ks}), "questions": 5}
    recording._time_on_one_machine(s, rows, exp)
    assert s["recall@5"] == 1.0 and s["latency_ms_p50"] == 1000.0 and s["timed_questions"] == 3
    assert s["timed_elsewhere"] == {b: {"questions": 2, "latency_ms_p50": 300.0, "cpu_s_per_question": None}}
    exp.summary = {"methods": {"m": s}}
    board = leaderboard.build(exp)
    assert board.rows[0].cells[leaderboard.RETRIEVAL_S] == 1.0 and "1.000*" in board.text()
    assert f"times on {a}, idle (runs also on {b}: scored, their times kept apart, marked *)" in board.setting
    assert f"* m: times over 3 of 5 questions, run on {a}; 2 on {b} are scored, their times not" in board.text()
    html = evidence.leaderboard_html(exp)
    assert f"1.000<sup class='ht-apart' title='m: times over 3 of 5 questions, run on {a}; 2 on {b} (p50 0.3 s)" in html
    # The lab's quality-against-cost chart: CPU seconds of the experiment's machine only.
    from traces.stats import tradeoff

    costed = [{**r.__dict__, "cpu_s": 0.5 if r.machine == b else 2.0, "em": 1.0} for r in rows]
    assert tradeoff.cost_per_question(costed, "m", a)["cpu_s"] == 2.0
    assert tradeoff.cost_per_question(costed, "m")["cpu_s"] == pytest.approx(1.4)


def test_time_here_moves_the_compared_times_to_this_machine_and_keeps_unnamed_rows_on_the_old_one(capsys):
    """`record-experiment --time-here`, after the main methods were re-recorded on this machine: its
    runs' times become the columns, the first machine's are kept apart. A row naming no machine is
    read as the experiment's own, so it is named the old machine first (Experiments.name_row_machines,
    on a real file in the retention test); with no machine to name it after, refused."""
    from types import SimpleNamespace

    from retrieval.bench.runner import QuestionResult, summarise
    from retrieval.cli.showcase import _time_here
    from traces.storage.experiments import Experiment

    a, here = "AMD EPYC · 2 cores · avx2", cpu.describe()
    rows = [QuestionResult(f"q{i}", "m", 10, ["g"], ["g"], 1000.0 if i < 2 else 400.0, 0, 0, "ok",
                           machine="" if i == 0 else a if i < 2 else here) for i in range(5)]

    def name(exp, machine):   # the stored rows' double: what name_row_machines does to them
        for r in rows:
            r.machine = r.machine or machine

    stored = SimpleNamespace(entries=lambda e, repetitions=False: [{"method": "m", "row": r.__dict__} for r in rows],
                             name_row_machines=name)
    exp = Experiment("e", 0.0, "bench", "demo", "kb", "llm", "abc", "done", spec={"ks": [5, 10]})
    with pytest.raises(ConfigError, match=r"--time-here: the experiment names no machine, nor do some of its runs"):
        _time_here(stored, exp)
    assert exp.machine == ""
    exp.spec["machine"] = a
    _time_here(stored, exp)
    assert exp.machine == here and f"compared on {here} from now on (they were on {a})" in capsys.readouterr().err
    s = {**summarise({k: rows for k in exp.ks}), "questions": 5}
    recording._time_on_one_machine(s, rows, exp)
    assert s["latency_ms_p50"] == 400.0 and s["timed_questions"] == 3
    assert s["timed_elsewhere"] == {a: {"questions": 2, "latency_ms_p50": 1000.0, "cpu_s_per_question": None}}


def test_each_row_names_the_llm_server_build_its_runs_were_on():
    """A run's row takes the server its LLM calls named; rows stored before llama-server name none and
    read as llama-cpp-python's. One build for every row is said once, in the setting line; a method
    re-recorded on another build names its own, in its row and in a note."""
    from types import SimpleNamespace

    from retrieval.bench.runner import QuestionResult, llm_server, summarise
    from retrieval.trace.model import LLMCall, RunResult, Stage
    from traces.stats import leaderboard
    from ui import evidence

    new = "llama-server b1-0c1e570"
    call = LLMCall("qwen", "p", "{}", 1, 1, 1.0, params={"server": new})
    run = RunResult("m", "q", stages=[Stage("plan", "Plan"), Stage("answer", "Answer", llm_calls=[call])])
    assert llm_server(run) == new and llm_server(RunResult("m", "q", stages=[Stage("a", "A")])) == ""

    def summary(server: str) -> dict:
        rows = [QuestionResult(f"q{i}", "m", 10, ["g"], ["g"], 100.0, 0, 0, "ok", llm_server=server) for i in range(2)]
        return {**summarise({5: rows, 10: rows}), "questions": 2, "llm_servers": {server: 2}}

    exp = SimpleNamespace(machine="A", ks=[5, 10], kb="demo", n_questions=2, llm="embedded llama.cpp · qwen2.5",
                          code_version="abc", methods=["sag", "gear"], status="done", spec={},
                          summary={"methods": {"sag": summary(""), "gear": summary("")}})
    board = leaderboard.build(exp)
    assert f"LLM embedded llama.cpp · qwen2.5 on {leaderboard.BEFORE_LLAMA_SERVER} · " in board.setting
    exp.summary["methods"]["gear"] = summary(new)
    board = leaderboard.build(exp)
    assert " on llama" not in board.setting
    assert (f"the embedded model's server: {leaderboard.BEFORE_LLAMA_SERVER} for sag; {new} for gear"
            in board.notes)
    html = evidence.leaderboard_html(exp)
    assert f"gear <span class='ht-meta ht-server-tag'>{new}</span>" in html
    exp.llm = "openai · gpt-4o-mini"   # an endpoint's rows name no server
    assert leaderboard.build(exp).rows[0].servers == () and not leaderboard.build(exp).notes[0].startswith("the")


def test_the_lab_views_keep_hostile_strings_as_text(ctx, tmp_path, monkeypatch):
    from ui import evidence

    experiments, exp, actx, qs, sitting, _ = _recorded(ctx, tmp_path, monkeypatch)
    recording.close_sitting(experiments, exp, sitting, qs)
    # A recording under way compares only the methods with the main methods' questions.
    assert evidence.compared_methods(experiments, exp) == ["bm25"]
    second = recording.start(experiments, actx, "small", qs[:2], ["bm25"], llm_questions=0)
    recording.record_sitting(experiments, second, actx, qs[:2], minutes=10, watch=_Quiet)
    recording.close_sitting(experiments, second, recording.Sitting(0, "", 0), qs[:2])
    for i, e in enumerate((exp, second)):   # each differs from the other, so "what differs" names them
        e.code_version, e.llm = f"{HOSTILE}{i}", f"{HOSTILE}{i} (model)"
        e.spec["machine"] = f"{HOSTILE}{i}"
    pages = [evidence.leaderboard_html(exp), evidence.across_html(experiments, exp, second, "recall@5")]
    rows = evidence.experiment_rows(experiments, None, [exp.id])
    assert [r[-1] for r in rows] == [second.id, exp.id] and rows[1][7] == "paused · shipped"
    for html in pages:
        assert "<img" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "id='exp-across'" in pages[1] and "<td>bm25</td><td>2</td>" in pages[1]


def test_the_shipped_experiment_is_current_idle_small_and_holds_the_showcase_questions(tmp_path, monkeypatch,
                                                                                          capsys):
    """The file in the repository, named here (a test may point SHIPPED_DIR elsewhere). A change to a
    method's code or prompts makes its runs stale: `hoptrace record-experiment --rerecord METHOD`.
    A fresh home's `hoptrace experiments` installs and lists it, marked shipped."""
    import gzip
    from pathlib import Path

    from retrieval.showcase import experiment_fingerprints

    root = Path(__file__).resolve().parents[1] / "data"
    path = root / "experiments" / "demo.json.xz"
    assert path.stat().st_size < 8e6
    doc = shipped.read(path)
    spec = doc["experiment"]["spec"]
    now = experiment_fingerprints(spec)
    stale = [m for m, s in spec["methods"].items() if s["fingerprint"] != now.get(m)]
    assert not stale, f"the shipped experiment is stale for {stale}: hoptrace record-experiment --rerecord ..."
    assert spec["sittings"] and all(s["verdict"] == "idle" for s in spec["sittings"])
    texts = [q["text"] for q in spec["questions"]]
    showcase_doc = json.loads(gzip.decompress((root / "showcase" / "demo.json.gz").read_bytes()))
    assert [it["question"] for it in showcase_doc["items"]] == texts[:len(showcase_doc["items"])]
    ran = {(e["question_id"], e["method"], e.get("rep", 1)) for e in doc["entries"]}   # no run twice
    assert all(e["row"]["answer"] is not None for e in doc["entries"])   # every run ended with an answer
    # Each method's entry names the profile its runs were made with (their profile stage says it).
    for e in doc["entries"]:
        stage = next((st for st in e["run"]["stages"] if st["name"] == "profile"), None)
        assert stage is None or stage["title"] == f"Profile: {spec['methods'][e['method']]['profile']}", e["method"]
    assert ("bm25" in spec["methods"]) and len(ran) == len(doc["entries"])
    # One recording serves both views: where the experiment has a showcase method on every showcase
    # question, the Ask page shows those very runs.
    ids = {q["text"]: q["id"] for q in spec["questions"]}
    latency = {(e["question_id"], e["method"]): e["run"]["latency_ms"] for e in doc["entries"]
               if e.get("rep", 1) == 1}   # the showcase shows the first repetition, as the means read it
    shared = [m for m in showcase_doc["methods"]
              if all((ids[it["question"]], m) in latency for it in showcase_doc["items"])]
    assert {"griever", "gear", "sag", "grasp"} <= set(shared), shared
    for it in showcase_doc["items"]:
        for m in shared:
            assert it["runs"][m]["latency_ms"] == latency[(ids[it["question"]], m)], (m, it["question"])
    # The CLI sees it on a fresh home without the app having run (the file already parsed above is
    # handed to the install, which otherwise reads it again).
    monkeypatch.setenv("HOPTRACE_HOME", str(tmp_path))
    monkeypatch.delenv("HOPTRACE_TRACES", raising=False)
    monkeypatch.setattr(shipped, "SHIPPED_DIR", path.parent)
    monkeypatch.setattr(shipped, "read", lambda p: doc)
    capsys.readouterr()
    assert main(["experiments"]) == 0
    out, err = capsys.readouterr()
    exp_id = doc["experiment"]["id"]
    assert f"hoptrace: installed the shipped experiment {exp_id[:12]} (KB demo, 24 methods) into " in err
    assert err.count("installed the shipped experiment") == 1
    assert out.startswith(exp_id[:12]) and out.strip().endswith("· shipped (data/experiments)")
    assert main(["experiments"]) == 0 and "installed" not in capsys.readouterr().err   # once per version


def test_the_leaderboard_times_the_retrieval_apart_from_the_shared_answer_step():
    """BM25 retrieves in milliseconds and the shared answer step takes ~13 s: one "s / question"
    column read the answer's seconds as the retriever's. GRASP writes its answer itself: its
    retrieval seconds include it, its answer column is empty, and a note says why."""
    from types import SimpleNamespace

    from retrieval.bench.runner import QuestionResult, summarise
    from traces.stats import leaderboard

    def rows(method, retrieval_ms, answer_ms, em=1.0):
        out = []
        for i, (r, a) in enumerate(zip(retrieval_ms, answer_ms)):
            row = QuestionResult(f"q{i}", method, 5, ["g"], ["g"], r + a, 10, 2, "ok", em=em, f1=em)
            row.answer_ms = a
            out.append(row)
        return out

    summaries = {"bm25": summarise({5: rows("bm25", [2.0, 3.0, 4.0], [13000.0, 12000.0, 14000.0])}),
                 "grasp": summarise({5: rows("grasp", [50000.0, 60000.0, 58000.0], [0.0, 0.0, 0.0])})}
    exp = SimpleNamespace(machine="m", ks=[5], kb="demo", n_questions=3, llm="embedded", code_version="abc",
                          methods=["bm25", "grasp"], status="done", spec={"args": {"answer": True}},
                          summary={"methods": summaries})
    board = leaderboard.build(exp)
    cells = {r.method: r.cells for r in board.rows}
    assert cells["bm25"][leaderboard.RETRIEVAL_S] == pytest.approx(0.003)
    assert cells["bm25"][leaderboard.ANSWER_S] == pytest.approx(13.0)
    assert cells["grasp"][leaderboard.RETRIEVAL_S] == pytest.approx(58.0)
    assert cells["grasp"][leaderboard.ANSWER_S] is None
    assert "retrieval s of grasp: their agent writes the answer itself" in board.text()
    assert board.best(leaderboard.ANSWER_S) is None   # the shared step is no method's merit: never bold
