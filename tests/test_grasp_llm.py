"""GRASP with the real embedded model on one question (planner, sub-agents, synthesis)."""
import dataclasses

import pytest
from embedded import TEST_MODEL, cached_calls, real_llm

from retrieval.methods import make_method

pytestmark = pytest.mark.slow


def test_grasp_with_the_embedded_model(ctx):
    llm = real_llm()
    q = "Who was the first president of the association which published Journal of Psychotherapy Integration?"
    # One sub-agent of one round: every stage the paper names runs on the real model; several
    # sub-agents and rounds are the control flow tests/test_grasp.py drives with the scripted double.
    run = make_method("grasp", dataclasses.replace(ctx, llm=llm), max_iterations=1, max_sub_questions=1).run(q, k=5)
    assert run.status == "ok", run.error
    plan = next(s for s in run.stages if s.name == "plan").payload
    assert len(plan["sub_questions"]) == 1
    assert any(s.name == "synthesis" for s in run.stages) and run.answer
    calls = [c for s in run.stages for c in s.llm_calls]
    assert calls and all(c.model == TEST_MODEL and c.tokens_in > 0 for c in calls)
    assert not cached_calls(run)
    assert run.ranked
