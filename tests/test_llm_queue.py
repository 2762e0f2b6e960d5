"""The bounded wait for the embedded model: who is admitted, who is refused with what message,
and that LLM-free requests never pass through it."""
from __future__ import annotations

from contextlib import ExitStack

import pytest

from ui.llm_queue import BusyError, LLMQueue, expected_s


def test_requests_are_admitted_while_the_work_ahead_fits_the_bound():
    q = LLMQueue(max_wait_s=120)
    waits = []
    with ExitStack() as held:
        for _ in range(3):
            waits.append(held.enter_context(q.admit(["grasp"], now=0.0)))
        assert waits == [0.0, expected_s("grasp"), 2 * expected_s("grasp")]   # 57 s each, the slow sitting
        with pytest.raises(BusyError) as busy:
            with q.admit(["grasp"], now=0.0):
                pass
    msg = str(busy.value)
    assert "3 requests with LLM work ahead, about 171 s" in msg and "at most 120 s" in msg
    assert "recorded run of grasp from the Showcase" in msg
    assert len(q) == 0                                   # every ticket released


def test_work_ahead_shrinks_as_it_runs():
    q = LLMQueue(max_wait_s=60)
    with q.admit(["grasp"], now=0.0), q.admit(["sag"], now=0.0):
        with pytest.raises(BusyError):
            with q.admit(["sag"], now=0.0):
                pass
        # 50 s later the GRASP request has ~7 s left and SAG's 20 s: 27 s ahead
        with q.admit(["sag"], now=50.0) as ahead:
            assert ahead == pytest.approx(27.0)


def test_llm_free_requests_never_wait_in_the_queue():
    q = LLMQueue(max_wait_s=60)
    with q.admit(["grasp"], now=0.0), q.admit(["grasp"], now=0.0):
        with pytest.raises(BusyError):
            with q.admit(["grasp"], now=0.0):
                pass
        with q.admit(["bm25", "dense", "griever"], now=0.0) as ahead:
            assert ahead == 0.0 and len(q) == 2


def test_the_public_app_state_holds_an_address_and_the_queue(small_kb, tmp_path):
    from types import SimpleNamespace

    from retrieval.llm.settings import LLMSettings
    from ui.public import LimitError, PublicLimits
    from ui.state import AppState

    state = AppState(trace_path=tmp_path / "t.sqlite", llm_settings=LLMSettings.parse("none"),
                     public=PublicLimits(enabled=True, show_paths=False))
    ann = SimpleNamespace(client=SimpleNamespace(host="198.51.100.1"), headers={})
    bob = SimpleNamespace(client=SimpleNamespace(host="198.51.100.2"), headers={})
    with state.llm_slot(ann, ["sag"]):
        with pytest.raises(LimitError, match="from one address"):
            with state.llm_slot(ann, ["gear"]):
                pass
        with state.llm_slot(bob, ["gear"]):
            assert len(state.llm_queue) == 2
        with state.llm_slot(ann, ["bm25"]):           # LLM-free: no slot, no queue
            assert len(state.llm_queue) == 1
    assert len(state.llm_queue) == 0
