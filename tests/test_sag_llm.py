"""SAG with the real embedded model on one question (query entities + joint rerank)."""
import dataclasses

import pytest
from embedded import cached_calls, real_llm

from retrieval.methods import make_method

pytestmark = pytest.mark.slow


def test_sag_with_the_embedded_model(ctx):
    llm = real_llm()
    q = "Who was the first president of the association which published Journal of Psychotherapy Integration?"
    run = make_method("sag", dataclasses.replace(ctx, llm=llm), k_cand=15).run(q, k=5)
    assert run.status == "ok", run.error
    st = {s.name: s for s in run.stages}
    ents = [e["name"] for e in st["query_entities"].payload["entities"]]
    assert any("Psychotherapy" in e for e in ents)
    rerank = st["rerank"]
    assert rerank.llm_calls and rerank.llm_calls[0].tokens_in > 200
    assert 1 <= len(rerank.payload["selected"]) <= 5
    assert run.tokens_in == sum(c.tokens_in for s in run.stages for c in s.llm_calls)
    assert not cached_calls(run)
