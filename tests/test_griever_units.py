"""GRIEVER's steps on small hand-made inputs whose right answers can be stated."""
import math

import pytest

from retrieval.core.records import Triple
from retrieval.methods.griever.clauses import split_relative_clauses
from retrieval.methods.griever.matcher import Match
from retrieval.methods.griever.rewrite import rewrite_query
from retrieval.methods.griever.scoring import extend_paths, partial_score, passage_scores, score_triple

NAPOLEON = ("When did Napolean occupy the city where the mother of the woman who brought "
            "Louis XV style to the court died?")


def test_splitter_on_the_papers_napoleon_question():
    subs = split_relative_clauses(NAPOLEON)
    assert [s.text for s in subs] == [
        NAPOLEON,
        "where the mother of the woman who brought Louis XV style to the court died?",
        "who brought Louis XV style to the court died?",
    ]
    assert [s.connector for s in subs] == ["", "where", "who"]


def test_a_leading_question_word_is_not_a_split_point():
    assert len(split_relative_clauses("Who married the publisher of The North Star?")) == 1
    assert len(split_relative_clauses("When was the city that hosted the 1900 Olympics founded?")) == 2


def m(name, score, ngram="", span=(0, 0)):
    return Match(name, name, score, ngram, span)


def test_eq1_and_eq2_on_a_two_triple_example():
    # t1 = (The North Star, published by, Frederick Douglass): the query names the paper and
    # the relation; t2 = (Frederick Douglass, spouse, Helen Pitts) only weakly matches.
    t1 = Triple("The North Star", "published by", "Frederick Douglass", "p1", 1)
    t2 = Triple("Frederick Douglass", "spouse", "Helen Pitts", "p2", 2)
    entity = {"The North Star": m("The North Star", 0.9), "Frederick Douglass": m("Frederick Douglass", 0.2),
              "Helen Pitts": m("Helen Pitts", 0.1)}
    predicate = {"published by": m("published by", 0.7), "spouse": m("spouse", 0.6)}
    # (The North Star, published by) is shared by 1 triple; (Frederick Douglass, spouse) by e = 3 triples
    freq = {("The North Star", "published by", False): 1, ("Frederick Douglass", "spouse", False): 3}

    # eq. (1): (s_e + s_p) / (2 (1 + log freq))
    assert partial_score(0.9, 0.7, 1) == pytest.approx(0.8)
    assert partial_score(0.2, 0.6, 3) == pytest.approx(0.8 / (2 * (1 + math.log(3))))

    s1 = score_triple(t1, entity, predicate, freq)
    # eq. (2): max over (s, p) = 0.8 and (p, o) = (0.2 + 0.7) / 2 = 0.45
    assert s1.score == pytest.approx(0.8)
    assert s1.side == "subject" and s1.join_entity == "Frederick Douglass"
    assert s1.partials["object"]["score"] == pytest.approx(0.45)

    s2 = score_triple(t2, entity, predicate, freq)
    # (s, p): 0.8 / (2 (1 + ln 3)) ≈ 0.1906; (p, o): (0.1 + 0.6) / 2 = 0.35 → the inverse pair wins
    assert s2.score == pytest.approx(0.35)
    assert s2.side == "object" and s2.join_entity == "Frederick Douglass"

    # paths: t1 then t2 share Frederick Douglass; running score = mean = 0.575
    paths = extend_paths(extend_paths([], [s1], {}), [s2], {})
    chain = [p for p in paths if len(p.triples) == 2]
    assert len(chain) == 1 and chain[0].score == pytest.approx(0.575)
    # passage score: max over paths through its triple of s_t × path score
    best = passage_scores(paths)
    assert best["p1"][0] == pytest.approx(0.8 * 0.8)             # t1 alone: 0.8 × 0.8
    assert best["p2"][0] == pytest.approx(0.35 * 0.575)          # t2 in the chain beats 0.35 × 0.35


def test_rewrite_on_the_north_star_example():
    q = "Who married the publisher of abolitionist newspaper The North Star?"
    t = Triple("The North Star", "published by", "Frederick Douglass", "p1", 1)
    ent_span = (q.index("The North Star"), q.index("The North Star") + len("The North Star"))
    pred_span = (q.index("publisher"), q.index("publisher") + len("publisher"))
    entity = {"The North Star": Match("The North Star", "The North Star", 0.93, "The North Star", ent_span)}
    predicate = {"published by": Match("published by", "published by", 0.61, "publisher", pred_span)}
    best = score_triple(t, entity, predicate, {})
    rw = rewrite_query(q, best, min_entity=0.5, min_predicate=0.3)
    assert rw.after == "Who married Frederick Douglass?"
    assert rw.inserted == "Frederick Douglass"
    # a weak entity match leaves the query alone, and says why
    weak = score_triple(t, {"The North Star": Match("The North Star", "The North Star", 0.3, "x", ent_span)},
                        predicate, {})
    kept = rewrite_query(q, weak, min_entity=0.5, min_predicate=0.3)
    assert kept.after == q and "0.30 < 0.5" in kept.reason


def test_rewrite_without_a_relation_match_replaces_only_the_entity():
    q = "Who married the publisher of The North Star?"
    span = (q.index("The North Star"), len(q) - 1)
    st = score_triple(Triple("The North Star", "published by", "Frederick Douglass", "p", 1),
                      {"The North Star": Match("The North Star", "The North Star", 0.9, "The North Star", span)}, {},
                      {})
    assert rewrite_query(q, st, 0.5, 0.3).after == "Who married the publisher of Frederick Douglass?"
