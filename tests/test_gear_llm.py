"""GEAR with the real embedded model (llama.cpp, the suite's Qwen2.5-Coder: tests/embedded.py) on one short
question."""
import dataclasses

import pytest
from embedded import TEST_MODEL, cached_calls, real_llm

from retrieval.methods import make_method

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def llm():
    return real_llm()


def test_gear_with_the_embedded_model(ctx, llm):
    q = "Who was the first president of the association which published Journal of Psychotherapy Integration?"
    run = make_method("gear", dataclasses.replace(ctx, llm=llm), max_iterations=1, read_max_words=60).run(
        q, k=5, answer=True)
    assert run.status == "ok", run.error
    read = next(s for s in run.stages if s.name == "read_1")
    call = read.llm_calls[0]
    assert call.model == TEST_MODEL and call.tokens_in > 100 and call.tokens_out > 0
    assert "Journal of Psychotherapy Integration" in call.prompt
    # the model produced well-formed triples (grammar-constrained) or said it found none
    assert read.status in ("ok", "empty")
    assert all(len(t) == 3 for t in read.payload["proximal_triples"])
    assert next(s for s in run.stages if s.name == "reason_1").payload["answerable"] in (True, False)
    assert run.tokens_in == sum(c.tokens_in for s in run.stages for c in s.llm_calls)
    assert not cached_calls(run)
    assert run.answer and isinstance(run.answer, str)
    assert "embedded llama.cpp" in llm.describe()
