"""Shortest first at a model that serves one call at a time (ui/llm_order.py, ui/ask.py `_take_turns`).

The model here is a scripted test double: a lock held for a known time per call, as the embedded
model serves one call at a time. Each method makes a known number of calls.
"""
from __future__ import annotations

import queue
import re
import threading
import time
from types import SimpleNamespace

from retrieval.trace.html import QUEUED_STEP_S, live_html
from ui import ask
from ui.llm_order import Estimates, ModelTurns, plan, waiting_text

CALL_S = 0.05
CALLS = {"sag": 2, "gear": 5, "grasp": 9}


class TimedModel:
    """A scripted test double of a one-call-at-a-time model: each call holds it CALL_S seconds."""

    def __init__(self):
        self.lock = threading.Lock()
        self.served: list[str] = []

    def call(self, who: str) -> None:
        with self.lock:
            time.sleep(CALL_S)
            self.served.append(who)


def _state() -> SimpleNamespace:
    est = Estimates()
    for m, n in CALLS.items():   # what this machine measured: each method's alone time
        est.observe(m, n * CALL_S)
    return SimpleNamespace(estimates=est, model_turns=ModelTurns())


def test_a_request_of_three_llm_methods_finishes_them_shortest_first_and_a_second_visitor_is_served_next():
    state, model = _state(), TimedModel()
    done: dict[str, float] = {}
    t0 = time.perf_counter()

    def worker(request: str):
        def work(m: str) -> None:
            for _ in range(CALLS[m]):
                model.call(f"{request}:{m}")
            done[f"{request}:{m}"] = time.perf_counter() - t0
        return work

    ev_a, ev_b = queue.Queue(), queue.Queue()
    ask._take_turns(state, ["grasp", "gear", "sag"], worker("a"), ev_a)   # asked in the worst order
    time.sleep(CALL_S / 2)
    ask._take_turns(state, ["sag"], worker("b"), ev_b)                   # a second visitor, just after
    deadline = time.time() + 10
    while len(done) < 4 and time.time() < deadline:
        time.sleep(0.01)
    assert sorted(done, key=done.get) == ["a:sag", "a:gear", "a:grasp", "b:sag"]
    total = sum(CALLS.values()) * CALL_S
    # The first arrives at about its alone time; the last of the request at the sum of the work.
    assert done["a:sag"] < 2 * CALLS["sag"] * CALL_S + 0.1
    assert done["a:grasp"] < total * 1.1 + 0.1
    # The second request is not starved: it is served as soon as the first is through.
    assert done["b:sag"] < total + CALLS["sag"] * CALL_S * 2 + 0.1
    assert [s.split(":")[0] for s in model.served] == ["a"] * 16 + ["b"] * 2   # first come, first served

    # Every waiting column said after whom and when, with the estimate's basis.
    said: dict[str, list[str]] = {}
    while not ev_a.empty():
        m, live = ev_a.get()
        said.setdefault(m, []).append(live.stage.progress["text"])
    assert said["grasp"][0] == ("starts after sag and gear, in about 1 s · about 1 s of work "
                                "(estimate: its last run here)")
    assert said["gear"][0].startswith("starts after sag, in about 1 s")
    queued = ev_b.get()[1].stage
    html = live_html(queued)
    assert "starts after 1 earlier request, in about 1 s" in html and "estimate: its last run here" in html
    # Its time waited moves in steps of QUEUED_STEP_S, so the page re-lays the line out that seldom.
    waited = []
    for s in (0.0, 9.0, 9.9, 10.0, 25.0):
        queued.started_at = time.time() - s
        waited.append(re.search(r"waiting (\d+) s so far", live_html(queued))[1])
    assert QUEUED_STEP_S == 10 and waited == ["0", "0", "0", "10", "20"]


def test_the_estimate_names_its_basis_and_scales_the_shipped_p50_by_calibration_then_by_runs_here():
    exp = SimpleNamespace(machine="AMD EPYC · 2 cores · avx2",
                          summary={"methods": {"sag": {"retrieval_ms_p50": 17453.0, "latency_ms_p50": 31843.0},
                                               "grasp": {"retrieval_ms_p50": None, "latency_ms_p50": 58050.0}}},
                          spec={"sittings": [{"machine": "AMD EPYC · 2 cores · avx2",
                                              "calibration_ms": [[30.0, 31.0], [40.0, 33.0]]},
                                             {"machine": "AMD EPYC · 2 cores · avx512_bf16",
                                              "calibration_ms": [[19.0, 19.0]] * 3}]})
    # This machine's workload takes 1.5x the median (35 ms) of the sittings on the experiment's
    # machine, whose p50s these are; a sitting resumed on another machine is not their reference.
    est = Estimates(exp, lambda: 52.5)
    sag = est.of("sag")
    assert abs(sag.seconds - 17.453 * 1.5) < 1e-6
    assert sag.basis == ("the shipped experiment's p50 (17 s on AMD EPYC · 2 cores · avx2), ×1.50 for this "
                         "machine's calibration")
    assert abs(est.of("grasp").seconds - 58.05 * 1.5) < 1e-6    # answers itself: its whole latency
    assert "ui/picker.py" in est.of("gear").basis               # not in the experiment: the measured range
    # Once LLM methods have run here, every shipped p50 scales by how those runs compared with theirs.
    est.observe("sag", 20.0)
    est.observe("sag", 24.0)
    assert abs(est.of("grasp").seconds - 58.05 * 22.0 / 17.453) < 1e-6
    assert est.of("grasp").basis.endswith("×1.26 as the 2 runs of LLM methods here compared with their p50")
    assert abs(est.of("sag").seconds - 22.0) < 1e-6 and "shipped" in est.of("sag").basis
    est.observe("sag", 26.0)   # from three runs of its own, their median
    assert est.of("sag").seconds == 24.0 and est.of("sag").basis == "the median of its last 3 runs here"
    assert [m for m, _ in plan(["grasp", "sag", "gear"], est)] == ["sag", "gear", "grasp"]
    assert waiting_text([], 0, est.of("sag")) == ("starts next · about 24 s of work "
                                                  "(estimate: the median of its last 3 runs here)")
