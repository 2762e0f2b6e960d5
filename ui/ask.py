"""Running several methods on one question concurrently and streaming their stages."""
from __future__ import annotations

import concurrent.futures
import os
import queue
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Iterator, Optional

from retrieval.core.envvars import positive_number
from retrieval.core.errors import HopTraceError
from retrieval.core.validate import check_question
from retrieval.encoders.embedder import SharedQueries
from retrieval.llm.prices import attach_cost
from retrieval.methods import make_method, uses_llm
from retrieval.methods.plugins import user_methods
from retrieval.trace.model import RunResult, Stage, count_reused

from . import llm_order
from .state import AppState

MAX_METHODS = 8
# Stages that finish closer together than this go out in one update. An LLM-free run's ~20
# stages used to be ~20 updates, each re-sending every column's HTML (~100 KB): most of a
# request's time, and the cause of the queue under load. An LLM stage takes seconds, so each
# one still shows on its own.
MIN_UPDATE_GAP_S = 0.2
# Under load a request's stages spread out (they wait for a CPU lane) and a fixed gap gave
# 7-10 updates a request, each one re-sent through Gradio whole: the gap grows with the
# requests in flight, up to MAX_UPDATE_GAP_S, so the server does no more update work under
# load than alone. A visitor still sees a column move at least every MAX_UPDATE_GAP_S.
MAX_UPDATE_GAP_S = 2.0
# No update goes out while the request's LLM-free methods run (they take ~1-50 ms each): an
# update renders every column in this thread, and rendering beside a method takes the GIL its
# native calls (ONNX, SQLite) must get back. Measured with `bench-app --users 1 --solo 30`
# (issue 17 item 9): dense showed 9.8 ms before, 7.8-8.4 after, against its `bench` p50 of 3.3;
# the rest is the encoder after an idle spell (docs/measurements/app-latency.md). A lane queued behind other
# requests holds updates back at most this long.
MAX_FAST_HOLD_S = 0.5
# A user's own method (methods/plugins/) runs in a thread of its own, never on a CPU lane, and
# its column is cut off past this many seconds: a slow plugin must not hold the page. Python
# cannot stop the thread, so its late result is dropped, not stored twice.
PLUGIN_LIMIT_S = 60.0   # HOPTRACE_PLUGIN_TIMEOUT_S overrides it (plugin_limit_s)


def plugin_limit_s() -> float:
    """A user method's time on the Ask page: HOPTRACE_PLUGIN_TIMEOUT_S, read at each ask (a bad
    value is named then), else PLUGIN_LIMIT_S."""
    return positive_number("HOPTRACE_PLUGIN_TIMEOUT_S") or PLUGIN_LIMIT_S
_in_flight = [0]
_in_flight_lock = threading.Lock()


def update_gap() -> float:
    """The least time between two updates of one request, for the load right now."""
    with _in_flight_lock:
        n = _in_flight[0]
    return max(MIN_UPDATE_GAP_S, min(MAX_UPDATE_GAP_S, MIN_UPDATE_GAP_S * n))


@dataclass
class Progress:
    """A snapshot of a side-by-side run, yielded after every finished stage."""
    session_id: str
    methods: list[str]
    gold: set[str]
    stages: dict[str, list[Stage]] = field(default_factory=dict)
    runs: dict[str, RunResult] = field(default_factory=dict)
    run_ids: dict[str, str] = field(default_factory=dict)
    latest: Optional[tuple[str, Stage]] = None  # the last stage that arrived
    html: dict = field(default_factory=dict)  # a finished stage's HTML, rendered once (render.column_html)
    live: dict[str, Stage] = field(default_factory=dict)  # each method's running stage, with its progress
    done: bool = False


@dataclass
class _Live:
    """A stage that started or reported progress (as opposed to one that finished)."""
    stage: Stage


# The LLM-free lanes: one long-lived thread per core. A new thread a request made each
# method's first native call set up its thread-local buffers again (~1 ms of dense's ~6).
CPU_LANES = concurrent.futures.ThreadPoolExecutor(max(1, os.cpu_count() or 1), thread_name_prefix="cpu-lane")


def _one_call_at_a_time(llm) -> bool:
    """A model that serves its calls one at a time (the embedded one, an endpoint set to 1)."""
    settings = getattr(llm, "settings", None)
    return settings is not None and settings.backend != "none" and settings.max_concurrency == 1


def _take_turns(state: AppState, llm: list[str], work, events: "queue.Queue") -> None:
    """The request's LLM methods, one after another, shortest expected first, once the requests
    that arrived earlier are through (ui/llm_order.py). Each waiting column says after whom it
    starts, about when, and how much work it is, with what the estimate rests on."""
    order = llm_order.plan(llm, state.estimates)
    ticket, n_before, before_s = state.model_turns.take(sum(e.seconds for _, e in order))

    def announce(first: int, others: int, others_s: float) -> None:
        """Each method from `first` on, not started: after the methods ahead of it in this request
        (the one running, order[first - 1], among them) and the `others` requests ahead."""
        for j in range(first, len(order)):
            m, own = order[j]
            ahead = order[max(0, first - 1):j]
            start_in = others_s + sum(e.seconds for _, e in ahead)
            st = Stage("queued", "Waiting for its turn at the model", time.time())
            st.report(llm="queued", text=llm_order.waiting_text([x for x, _ in ahead], start_in, own, others))
            events.put((m, _Live(st)))

    def chain() -> None:
        announce(0, n_before, before_s)
        with state.model_turns.turn(ticket):
            for i, (m, _) in enumerate(order):
                announce(i + 1, 0, 0.0)
                work(m)

    threading.Thread(target=chain, daemon=True, name="run-llm-turns").start()


def run_side_by_side(state: AppState, kb: str, question: str, methods: list[str], k: int,
                     griever_settings: Optional[dict] = None, answer: bool = False,
                     owner: str = "") -> Iterator[Progress]:
    """One thread per method; a method's failure ends only its own column. Each finished run
    is stored in the trace database, under the visitor `owner`, before the final snapshot is yielded."""
    question = check_question(question)
    if not methods:
        raise HopTraceError("pick at least one method")
    if len(methods) > MAX_METHODS:
        raise HopTraceError(f"at most {MAX_METHODS} methods at once")
    state.public.check_methods(methods, uses_llm)
    state.check_kb(kb, owner)
    open_kb = state.kb(kb)
    # Methods of one request share the question's encoding (issue 17 item 9: three encodes of
    # one question were a tenth of the app's CPU under load); the encode stage says so.
    ctx = replace(open_kb.ctx, embedder=SharedQueries(open_kb.ctx.embedder))
    gold = set(open_kb.gold_by_text.get(question, []))
    sid = state.traces.new_session(kb, question, owner=owner)
    prog = Progress(sid, list(methods), gold, {m: [] for m in methods})
    events: "queue.Queue[tuple[str, object]]" = queue.Queue()
    cut: set[str] = set()   # user methods cut off at PLUGIN_LIMIT_S

    def work(name: str) -> None:
        t0 = time.perf_counter()
        try:
            settings = griever_settings if name.startswith("griever") else {}
            method = make_method(name, ctx, **(settings or {}))
            # Charged what it reused of another method's work (the shared encoding): the column
            # says what this method takes alone.
            run = count_reused(method.run(question, k=k, on_stage=lambda st: events.put((name, st)), answer=answer,
                                          on_progress=lambda st: events.put((name, _Live(st)))))
            attach_cost(run, ctx.llm)
        except HopTraceError as e:
            run = RunResult(name, question, status="error", error=str(e))
        except Exception as e:  # a bug in one method must not take the others down
            run = RunResult(name, question, status="error", error=f"{type(e).__name__}: {e}")
        if name in cut:
            return   # its column already says it was cut off, and that run is stored
        calls = [c for st in run.stages for c in st.llm_calls]
        if run.status == "ok" and calls and not any(c.cached for c in calls):
            state.estimates.observe(name, time.perf_counter() - t0)
        try:
            rid = state.traces.save_run(sid, kb, run, gold, k)
        except Exception as e:
            rid = ""
            run.error = (run.error or "") + f" (trace not saved: {e})"
        events.put((name, (run, rid)))

    # LLM-free methods run one after another in one thread, and at most one per core across
    # all requests (CPU_LANES): run side by side they contended for the 2 cores and showed
    # 3-8x their `bench` latency (dense 145 ms vs 18 ms). LLM methods get a thread each, as
    # they mostly wait for the model server. The latency a column shows is measured inside
    # the run, so the wait for a lane is not charged to the method.
    yours = set(user_methods())
    fast = [m for m in methods if not uses_llm(m) and m not in yours]
    limit_s = plugin_limit_s()
    cutoff = {m: time.time() + limit_s for m in methods if m in yours}
    if fast:
        CPU_LANES.submit(lambda: [work(n) for n in fast])
    llm = [m for m in methods if m not in fast and m not in yours]
    taking_turns = bool(llm) and _one_call_at_a_time(ctx.llm)
    if taking_turns:
        _take_turns(state, llm, work, events)
    for m in methods:
        if m not in fast and not (taking_turns and m in llm):
            threading.Thread(target=work, args=(m,), daemon=True, name=f"run-{m}").start()
    with _in_flight_lock:
        _in_flight[0] += 1
    try:
        remaining = set(methods)
        fast_left = set(fast)  # while any runs (up to hold_until), updates wait
        hold_until = time.time() + MAX_FAST_HOLD_S if fast else 0.0
        deadline = time.time() + 900  # GEAR with a 1.5B model on 2 cores: up to ~3 min a question
        pending, last_yield = False, 0.0  # an update not yet sent, and when the last one went
        gap = update_gap()

        def holding() -> bool:
            return bool(fast_left) and time.time() < hold_until

        while remaining:
            for m in [m for m in remaining if m in cutoff and time.time() > cutoff[m]]:
                cut.add(m)
                run = RunResult(m, question, status="error", error=f"cut off after {limit_s:g} s: this app "
                                f"stops waiting for a method of yours past that (HOPTRACE_PLUGIN_TIMEOUT_S)",
                                stages=list(prog.stages[m]))
                prog.runs[m], prog.run_ids[m] = run, state.traces.save_run(sid, kb, run, gold, k)
                prog.live.pop(m, None)
                remaining.discard(m)
                pending = True
            if not remaining:
                break
            if not pending:
                wait = 1.0
            elif holding():
                wait = max(0.0, hold_until - time.time())
            else:
                wait = max(0.0, last_yield + gap - time.time())
            try:
                name, item = events.get(timeout=wait)
            except queue.Empty:
                if pending and not holding():
                    pending, last_yield = False, time.time()
                    yield prog
                    continue
                if pending:
                    continue
                if time.time() < deadline:
                    if prog.live:  # a long LLM read sends no event for seconds: refresh its clock
                        yield prog
                    continue
                for name in remaining:
                    prog.runs[name] = RunResult(name, question, status="error", error="timed out after 900 s")
                break
            batch = [(name, item)]
            while True:  # stages that finished together go out in one update
                try:
                    batch.append(events.get_nowait())
                except queue.Empty:
                    break
            fast_were_running = bool(fast_left)
            for name, item in batch:
                if name in cut:
                    continue
                if isinstance(item, _Live):
                    prog.live[name] = item.stage
                elif isinstance(item, Stage):
                    prog.stages[name].append(item)
                    prog.live.pop(name, None)
                    prog.latest = (name, item)
                else:
                    run, rid = item
                    prog.runs[name] = run
                    prog.run_ids[name] = rid
                    prog.stages[name] = run.stages or prog.stages[name]
                    prog.live.pop(name, None)
                    remaining.discard(name)
                    fast_left.discard(name)
            if remaining:
                pending, gap = True, update_gap()
                if holding():
                    continue
                # The LLM-free lane just finished: show its columns now, not a gap later.
                if time.time() - last_yield >= gap or (fast_were_running and not fast_left):
                    pending, last_yield = False, time.time()
                    yield prog
    finally:
        with _in_flight_lock:
            _in_flight[0] -= 1
    prog.done = True
    yield prog
