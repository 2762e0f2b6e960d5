"""LLM extraction with the real embedded model: two passages through all three layers."""
import pytest

from retrieval.kb.extract.llm import TASKS, llm_extractors
from retrieval.llm import LLMSettings, get_llm

pytestmark = pytest.mark.slow


def test_embedded_model_extracts_triples_events_and_propositions(small_corpus):
    passages = [p for p in small_corpus[0] if p.title in ("Journal of Psychotherapy Integration",
                                                         "Fractional Calculus and Applied Analysis")]
    assert len(passages) == 2
    llm = get_llm(LLMSettings.parse("local")).start()
    out = {ex.task.layer: (ex, list(ex.extract(passages)))
           for ex in llm_extractors(llm, TASKS, batch_size=2)}
    for layer, (ex, results) in out.items():
        assert [r.passage_id for r in results] == [p.id for p in passages], layer
        assert all(r.failed is None for r in results), [r.failed for r in results]
        assert ex.summary()["calls"] >= (1 if layer == "propositions" else 2)
    triples = out["triples"][1][0].triples
    assert triples and any("Journal of Psychotherapy Integration" in (t.subject + t.object) for t in triples)
    event = out["events"][1][0].events[0]
    assert len(event.summary.split()) >= 5 and event.entities
    props = out["propositions"][1]
    assert all(len(r.propositions) >= 2 for r in props)
    assert any(e.type for r in props for p in r.propositions for e in p.entities)
