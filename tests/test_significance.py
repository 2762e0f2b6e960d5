"""The paired comparison on hand-made per-question scores whose answers are known."""
from __future__ import annotations

import math

import pytest

from retrieval.bench.metrics import parse_metric, per_question_scores
from retrieval.bench.runner import QuestionResult
from retrieval.bench.significance import holm, mean_interval, paired, verdict
from retrieval.core.errors import ConfigError


def test_identical_runs_give_p_one_and_an_interval_around_zero():
    scores = [0.0, 0.5, 1.0, 1.0, 0.5, 0.0, 1.0, 0.5] * 3
    p = paired("a", scores, "b", list(scores))
    assert p.p == 1.0
    assert p.low <= 0 <= p.high and p.mean_diff == 0
    assert (p.wins, p.ties, p.losses) == (0, 24, 0)
    assert verdict(p) == "inconclusive" and p.needed_questions() is None


def test_a_constant_gain_on_twenty_questions_is_significant():
    b = [0.0, 0.5] * 10
    a = [x + 1 for x in b]
    p = paired("a", a, "b", b)
    assert p.p < 0.001
    assert p.mean_diff == pytest.approx(1.0) and p.low == pytest.approx(1.0) and p.high == pytest.approx(1.0)
    assert (p.wins, p.ties, p.losses) == (20, 0, 0)
    assert verdict(p) == "holds"
    assert verdict(paired("b", b, "a", a)) == "does not hold"


def test_a_small_noisy_difference_is_inconclusive_and_says_how_many_questions_it_would_need():
    a = [1, 0, 1, 0, 1, 1, 0, 0, 1, 0, 1, 0]
    b = [0, 1, 1, 0, 1, 0, 1, 0, 1, 0, 0, 0]
    p = paired("a", a, "b", b)
    assert p.mean_diff == pytest.approx(1 / 12)
    assert p.p > 0.05 and verdict(p) == "inconclusive"
    assert p.low < 0 < p.high
    need = p.needed_questions()
    assert need is not None and need > len(a)
    # the normal-approximation sample size: ((z_.975 + z_.8) * sd / mean)^2
    import statistics
    d = [x - y for x, y in zip(a, b)]
    assert need == math.ceil(((1.959964 + 0.841621) * statistics.stdev(d) / statistics.mean(d)) ** 2)


def test_mean_interval_contains_the_mean_and_collapses_without_spread():
    iv = mean_interval([0.0, 1.0] * 25)
    assert iv.low < 0.5 < iv.high and iv.n == 50
    flat = mean_interval([0.5] * 10)
    assert (flat.low, flat.mean, flat.high) == (0.5, 0.5, 0.5)


def test_holm_adjusts_step_down_and_keeps_order():
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5]) == [0.5]


def test_paired_refuses_unaligned_scores():
    with pytest.raises(ValueError, match="same questions"):
        paired("a", [1, 0], "b", [1])


def test_per_question_scores_read_the_run_at_k_and_answers():
    gold = ["g1", "g2"]
    rows = [QuestionResult("q1", "m", 5, ["x", "g1", "g2"], gold, 1, 0, 0, "ok"),
            QuestionResult("q1", "m", 2, ["x", "g1"], gold, 1, 0, 0, "ok"),
            QuestionResult("q1", "n", 10, ["g2"] + ["x"] * 9, gold, 1, 0, 0, "ok", em=1.0, f1=1.0)]
    assert per_question_scores(rows, "recall@2") == {"m": {"q1": 0.5}, "n": {"q1": 0.5}}
    assert per_question_scores(rows, "recall@5")["m"]["q1"] == 1.0
    assert per_question_scores(rows, "em") == {"n": {"q1": 1.0}}
    assert per_question_scores([r.__dict__ for r in rows], "anyhit@2")["m"]["q1"] == 1.0
    for bad in ("recall", "recall@0", "mrr@5", "em@5"):
        with pytest.raises(ConfigError, match="unknown metric"):
            parse_metric(bad)


def test_one_question_is_inconclusive_not_an_error():
    """scipy's permutation test needs two observations; one question tells two methods nothing apart."""
    p = paired("a", [1.0], "b", [0.0])
    assert p.n == 1 and p.p == 1.0 and p.wins == 1
