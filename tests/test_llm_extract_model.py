"""LLM extraction with the real embedded model: two passages through all three layers."""
import dataclasses

import pytest
from embedded import real_llm

from retrieval.kb.extract.llm import TASKS, llm_extractors

pytestmark = pytest.mark.slow


def _first_sentences(p, n: int):
    """The passage cut to its first `n` sentences: every layer's checks below still have their
    facts, and the model writes about a third less (issue 72: the suite's time)."""
    return dataclasses.replace(p, text=". ".join(p.text.split(". ")[:n]).rstrip(".") + ".")


def test_embedded_model_extracts_triples_events_and_propositions(small_corpus):
    passages = [_first_sentences(p, 2) for p in small_corpus[0]
                if p.title in ("Journal of Psychotherapy Integration", "Fractional Calculus and Applied Analysis")]
    assert len(passages) == 2
    # Triples and events ask once a passage, so one passage tests their prompts; propositions batch
    # (GRASP A.1.5), so both passages go in one request. The second passage's triples and events
    # were a third of the test's ~930 tokens written (issue 72: the suite's time).
    reads = {"triples": passages[:1], "events": passages[:1], "propositions": passages}
    llm = real_llm()
    out = {ex.task.layer: (ex, list(ex.extract(reads[ex.task.layer])))
           for ex in llm_extractors(llm, TASKS, batch_size=2)}
    for layer, (ex, results) in out.items():
        assert [r.passage_id for r in results] == [p.id for p in reads[layer]], layer
        assert all(r.failed is None for r in results), [r.failed for r in results]
        assert ex.summary()["calls"] >= (1 if layer == "propositions" else len(reads[layer]))
        assert ex.summary()["cached_calls"] == 0
    triples = out["triples"][1][0].triples
    assert triples and any("Journal of Psychotherapy Integration" in (t.subject + t.object) for t in triples)
    event = out["events"][1][0].events[0]
    assert len(event.summary.split()) >= 5 and event.entities
    props = out["propositions"][1]
    # Both passages decomposed (the suite's 0.5B on llama-server writes one proposition for the
    # second, two-sentence passage, and two for the first).
    assert all(r.propositions for r in props) and sum(len(r.propositions) for r in props) >= 3
    assert any(e.type for r in props for p in r.propositions for e in p.entities)


def test_embedded_model_reads_a_passage_once_for_all_three_layers(small_corpus):
    (passage,) = [p for p in small_corpus[0] if p.title == "Journal of Psychotherapy Integration"]
    llm = real_llm()
    (ex,) = llm_extractors(llm, TASKS, reads="one")
    (res,) = list(ex.extract([passage]))
    assert res.failed is None, res.failed
    assert ex.summary()["calls"] == 1 and ex.summary()["cached_calls"] == 0
    assert ex.layers == {"triples", "events", "propositions"}
    assert res.triples and any("Journal of Psychotherapy Integration" in (t.subject + t.object) for t in res.triples)
    assert len(res.events) == 1 and len(res.events[0].summary.split()) >= 5 and res.events[0].entities
    assert len(res.propositions) == len(res.triples) and all(p.text.endswith(".") for p in res.propositions)
    assert any(e.type for e in res.entities)
