"""The Ask tab's stream: stages that finish together go out as one update, every stage arrives,
a finished stage is rendered once however many updates follow, and nothing is rendered while
LLM-free methods run."""
from __future__ import annotations

import shutil
import time

import ui.ask as ask
from retrieval.core.paths import kb_dir
from ui.public import PublicLimits
from ui.state import AppState


def _state(small_kb, tmp_path) -> AppState:
    shutil.copyfile(small_kb, kb_dir() / "streamkb.sqlite")
    from retrieval.llm.settings import LLMSettings

    return AppState(trace_path=tmp_path / "traces.sqlite", llm_settings=LLMSettings.parse("none"),
                    public=PublicLimits())


def test_stages_closer_than_the_gap_go_out_together(small_kb, small_corpus, tmp_path, monkeypatch):
    state = _state(small_kb, tmp_path)
    question = small_corpus[1][0].text
    monkeypatch.setattr(ask, "MAX_FAST_HOLD_S", 0.0)  # as for stages of LLM methods, which are never held
    monkeypatch.setattr(ask, "MIN_UPDATE_GAP_S", 60.0)  # nothing is that far apart here
    updates = list(ask.run_side_by_side(state, "streamkb", question, ["bm25", "griever"], 5))
    final = updates[-1]
    assert final.done and set(final.runs) == {"bm25", "griever"}
    assert len(final.stages["griever"]) > 10
    # the first batch goes out at once (the first stage shows right after the click), the
    # rest wait for the gap or the end: 2 or 3 updates for ~20 stages, not one per stage
    assert 2 <= len(updates) <= 3, len(updates)

    monkeypatch.setattr(ask, "MIN_UPDATE_GAP_S", 0.0)
    # GRIEVER's stages spaced 0.1 s apart, as an LLM method's are: on two cores shared with other
    # work, stages a few ms apart reached the reader together (4 updates in CI, not one a stage).
    real = ask.make_method

    def spaced(name, ctx, **kw):
        method = real(name, ctx, **kw)
        run = method.run
        method.run = lambda *a, on_stage, **kw2: run(*a, on_stage=lambda st: (on_stage(st), time.sleep(0.1)), **kw2)
        return method

    monkeypatch.setattr(ask, "make_method", spaced)
    each = list(ask.run_side_by_side(state, "streamkb", question, ["griever"], 5))
    assert len(each) > 5  # with no gap, updates follow the stages


def test_no_update_is_rendered_while_llm_free_methods_run(small_kb, small_corpus, tmp_path, monkeypatch):
    """Rendering beside a timed method slowed it (issue 17 item 9): their columns go out
    together once the lane is done, well within the hold."""
    state = _state(small_kb, tmp_path)
    monkeypatch.setattr(ask, "MIN_UPDATE_GAP_S", 0.0)
    monkeypatch.setattr(ask, "MAX_FAST_HOLD_S", 30.0)
    updates = list(ask.run_side_by_side(state, "streamkb", small_corpus[1][0].text,
                                        ["bm25", "dense", "composed", "griever"], 5))
    assert len(updates) == 1 and updates[0].done, [u.done for u in updates]
    assert all(r.status == "ok" for r in updates[0].runs.values())
    assert len(updates[0].stages["griever"]) > 10


def test_a_finished_stage_is_rendered_once(small_kb, small_corpus, tmp_path, monkeypatch):
    state = _state(small_kb, tmp_path)
    calls = []
    from retrieval.trace import html as render_html  # where column_html finds stage_html
    real = render_html.stage_html
    monkeypatch.setattr(render_html, "stage_html", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    monkeypatch.setattr(ask, "MIN_UPDATE_GAP_S", 0.0)
    monkeypatch.setattr(ask, "MAX_FAST_HOLD_S", 0.0)
    from ui.tabs.ask import _columns

    html = ""
    for prog in ask.run_side_by_side(state, "streamkb", small_corpus[1][0].text, ["griever"], 5):
        html = _columns(prog)
    n = len(prog.stages["griever"])
    assert len(calls) == n  # once each, though every update re-sends the column
    assert html.count("class='ht-stage") >= n


def test_methods_of_one_request_share_the_question_encoding(small_kb, small_corpus, tmp_path):
    state = _state(small_kb, tmp_path)
    *_, final = ask.run_side_by_side(state, "streamkb", small_corpus[1][0].text, ["dense", "composed", "griever"], 5)
    encodes = {m: next(s for s in final.runs[m].stages if s.name == "encode") for m in final.methods}
    shared = [m for m, s in encodes.items() if "shared" in s.payload]
    # the three run one after another in one lane: the first encodes, the other two reuse it
    assert len(shared) == 2, {m: s.payload for m, s in encodes.items()}
    assert all(final.runs[m].status == "ok" for m in final.methods)


def test_the_update_gap_grows_with_the_requests_in_flight(monkeypatch):
    monkeypatch.setattr(ask, "_in_flight", [1])
    assert ask.update_gap() == ask.MIN_UPDATE_GAP_S
    monkeypatch.setattr(ask, "_in_flight", [4])
    assert ask.update_gap() == 4 * ask.MIN_UPDATE_GAP_S
    monkeypatch.setattr(ask, "_in_flight", [100])
    assert ask.update_gap() == ask.MAX_UPDATE_GAP_S


def test_a_live_runs_chart_is_drawn_at_its_first_stage_each_end_and_otherwise_at_most_every_refresh(monkeypatch):
    from ui.tabs import ask as tab

    monkeypatch.setattr(tab.time, "time", lambda: 1000.0)
    assert tab._chart_due(None, 0)                       # the first stage: no empty frame
    assert not tab._chart_due((990.0, 0), 0)              # another stage 10 s later
    assert tab._chart_due((990.0, 0), 1)                  # a method ended
    assert tab._chart_due((1000.0 - tab.CHART_REFRESH_S, 1), 1)
