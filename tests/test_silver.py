"""The silver-reference scorer on hand-made triples with stated numbers."""
import numpy as np

from retrieval.core.records import EntityLink, Extraction, Triple
from retrieval.kb.extract.silver import embedding_similarity, match_triples, same_entity, score


def jaccard(a, b):
    """Predicate similarity for the test: word overlap (the real scorer uses embeddings)."""
    return np.array([len(set(x.split()) & set(y.split())) / len(set(x.split()) | set(y.split())) for x, y in zip(a, b)])


def T(s, p, o):
    return Triple(s, p, o, "p1")


REF = Extraction("p1", triples=[T("Ora", "founded by", "Ada Mireles"), T("Ora", "located in", "Vesna"),
                                T("Ada Mireles", "born in", "1790"), T("Ora", "has population", "4,000")],
                 entities=[EntityLink(n) for n in ("Ora", "Ada Mireles", "Vesna", "1790")])


def test_stated_numbers():
    got = Extraction("p1", triples=[
        T("the town of Ora", "was founded by", "Ada Mireles"),   # matches REF[0] (words within; predicate 2/3)
        T("Vesna", "located in", "Ora"),                          # matches REF[1] (reversed order)
        T("Ada Mireles", "died in", "1790"),                     # same entities, predicate 1/3 < 0.5: no match
        T("Ora", "is", "a town"),                                 # no reference triple
    ], entities=[EntityLink("Ora"), EntityLink("Vesna")])
    sc = score([got], {"p1": REF}, jaccard, threshold=0.5)
    assert (sc.reference_triples, sc.extracted_triples) == (4, 4)
    assert (sc.reference_matched, sc.extracted_matched) == (2, 2)
    assert sc.triple_recall == 0.5 and sc.precision == 0.5
    # entities: Ora, Vesna (entity list), Ada Mireles and 1790 (triple arguments) → 4/4
    assert sc.entity_recall == 1.0


def test_a_reference_triple_is_matched_once():
    got = [T("Ora", "founded by", "Ada Mireles"), T("Ora", "founded by", "Ada Mireles")]
    assert len(match_triples(got, [REF.triples[0]], jaccard)) == 1
    sc = score([Extraction("p1", triples=got)], {"p1": REF}, jaccard)
    assert sc.triple_recall == 0.25 and sc.precision == 0.5


def test_entity_matching_rules():
    assert same_entity("The Carl Rogers", "carl rogers")
    assert same_entity("psychologist Carl Rogers", "Carl Rogers")
    assert not same_entity("Carl", "Rogers")
    assert not same_entity("", "Ora")


def test_passages_without_reference_or_failed_are_not_scored():
    sc = score([Extraction("other", triples=[T("a", "b", "c")]), Extraction("p1", failed="timeout")],
               {"p1": REF}, jaccard)
    assert sc.passages == 0 and sc.triple_recall == 0.0


def test_with_the_real_embedder_paraphrased_predicates_match(embedder):
    sim = embedding_similarity(embedder)
    s = sim(["was founded by", "born in"], ["founded by", "died in"])
    assert s[0] > 0.8 and s[0] > s[1]


def test_a_kb_built_from_the_reference_scores_full_marks_and_a_missing_kb_is_named(small_kb, capsys):
    """`hoptrace silver --kb` reads a built KB's own triples and entities; the small KB's
    triples are the GPT-3.5 OpenIE file itself, so every reference triple is found."""
    import json

    from retrieval.cli import main

    out = small_kb.parent / "silver.json"
    assert main(["silver", "--kb", str(small_kb), "--out", str(out)]) == 0
    got = json.loads(out.read_text())
    assert got["passages"] == 80 and got["reference_triples"] > 300
    assert got["triple_recall"] == 1.0 and got["precision"] == 1.0 and got["entity_recall"] == 1.0
    assert "80 of its 80 passages are in the silver reference" in capsys.readouterr().out
    assert main(["silver", "--kb", str(small_kb.parent / "nope.sqlite")]) == 2
    assert "no KB at" in capsys.readouterr().err
