"""`bench-app --together`'s split of a question over the sum (appbench/together.py): the seconds the
model spent on each method's calls, read back from a real trace file, and the rest, outside them."""
from __future__ import annotations

import pytest

from appbench.together import _mean_row, model_work, overhead, summarise, table
from retrieval.trace.model import LLMCall, RunResult, Stage
from traces.storage.store import TraceStore

METHODS = ("sag", "grasp")


def _run(method: str, calls: list[tuple[int, int, float]]) -> RunResult:
    st = Stage("read", "Read", 1.0)
    for tin, tout, ms in calls:
        st.add_llm_call(LLMCall("qwen", "p", "{}", tin, tout, ms))
    return RunResult(method, "q?", stages=[Stage("retrieve", "Retrieve", 0.5), st])


def test_the_same_calls_slower_together_are_the_model_s_and_more_time_outside_them_is_the_app_s(tmp_path):
    store = TraceStore(tmp_path / "traces.sqlite")
    together = store.new_session("demo", "q?")
    store.save_run(together, "demo", RunResult("griever", "q?"), [], 5)   # no LLM call: not counted
    store.save_run(together, "demo", _run("sag", [(300, 40, 20_000.0)]), [], 5)
    store.save_run(together, "demo", _run("grasp", [(500, 60, 60_000.0), (200, 9, 10_500.0)]), [], 5)
    alone = {}
    for m, calls in {"sag": [(300, 40, 19_000.0)], "grasp": [(500, 60, 55_000.0), (200, 9, 10_000.0)]}.items():
        sid = store.new_session("demo", "q?")
        store.save_run(sid, "demo", _run(m, calls), [], 5)
        alone[m] = sid

    work_t = model_work(together, store.path)
    assert work_t == {"sag": {"calls": 1, "tokens": [300, 40], "model_s": 20.0},
                      "grasp": {"calls": 2, "tokens": [700, 69], "model_s": 70.5}}
    work_a = {m: w for sid in alone.values() for m, w in model_work(sid, store.path).items()}

    # Over the sum by 4 s (96 against 92), all of it the model's: 90.5 s on the calls together
    # against 84 alone, and 5.5 s outside them against 8 for the two alone asks.
    slower_model = {"question": "q?", "together": {"sag": 21.5, "grasp": 96.0}, "alone": {"sag": 21.0, "grasp": 71.0},
                    "work_together": work_t, "work_alone": work_a}
    # Over the sum with the model's seconds alike and more time outside them: the app's.
    slower_app = slower_model | {"together": {"sag": 21.5, "grasp": 99.0}, "work_alone": work_t}
    # Different calls (another agent path): not split.
    other_path = slower_model | {"work_alone": work_a | {"grasp": work_a["grasp"] | {"tokens": [650, 60]}}}
    res = summarise([slower_model, slower_app, other_path], METHODS)
    assert res["questions_where_together_cost_more_than_the_sum"] == 3
    assert res["questions_with_the_same_calls_together_and_alone"] == 2
    assert res["questions_over_the_sum_with_more_overhead_together"] == 1
    lines = table(res | {"rows": [slower_model, slower_app, other_path]}, METHODS).splitlines()
    assert lines[2].endswith("| 96.0 | 92.0 | 90.5 / 84.0 | 5.5 / 8.0 |")
    assert lines[3].endswith("| 99.0 | 92.0 | 90.5 / 90.5 | 8.5 / 1.5 |")
    assert lines[4].endswith("| calls differ | - |")

    # --crossover: the same question in a second pair of apps, alone first, 5 s under the sum there
    # with the same calls; the question's row is the two rounds' means, no longer over the sum.
    second = slower_model | {"together": {"sag": 20.5, "grasp": 86.0}, "work_together": work_a,
                             "together_in_app": "d"}
    both = _mean_row([slower_model | {"together_in_app": "a"}, second], METHODS)
    assert both["together"] == {"sag": 21.0, "grasp": 91.0} and both["alone"] == {"sag": 21.0, "grasp": 71.0}
    assert both["together_in_app"] == "a+d"
    assert summarise([both], METHODS)["questions_where_together_cost_more_than_the_sum"] == 0
    split = overhead(both, METHODS)   # the rounds' splits averaged: 90.5 and 84 s on the calls, 5.5 and 2 outside
    assert split["model_s"] == pytest.approx([87.2, 84.0], abs=0.06)
    assert split["overhead_s"] == pytest.approx([3.8, 8.0], abs=0.06)
    assert overhead(_mean_row([slower_model, other_path], METHODS), METHODS) is None
