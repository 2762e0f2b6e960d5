"""The paired comparison on hand-made per-question scores whose answers are known."""
from __future__ import annotations

import math

import pytest

from retrieval.bench.metrics import parse_metric, per_question_scores
from retrieval.bench.runner import QuestionResult
from retrieval.bench.significance import (
    RESAMPLES,
    SEED,
    holm,
    mean_interval,
    mean_intervals,
    paired,
    paired_many,
    verdict,
)
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


def test_many_pairs_in_one_call_give_what_a_call_each_and_the_two_sample_swap_test_give():
    """paired_many tests signs flipped on the differences, many rows a scipy call (the lab's first
    view: 22 methods, 231 pairs); each figure is the one a call of its own, and the p-value the one
    swapping each question's two scores gives (the test as documented)."""
    import numpy as np
    from scipy import stats

    rng = np.random.default_rng(3)
    pairs = [(f"a{i}", rng.integers(0, 3, n) / 2, f"b{i}", rng.integers(0, 3, n) / 2)
             for i, n in enumerate([30, 30, 30, 12, 12, 1, 0])]
    pairs.append(("same", [0.5] * 8, "same2", [0.5] * 8))
    many = paired_many(pairs)
    for pair, got in zip(pairs, many):
        one = paired(*pair)
        assert (got.a, got.b, got.n, got.wins, got.ties, got.losses) == (one.a, one.b, one.n, one.wins, one.ties,
                                                                         one.losses)
        assert [got.mean_diff, got.low, got.high, got.p] == pytest.approx([one.mean_diff, one.low, one.high, one.p],
                                                                          nan_ok=True, abs=0)
    x, y = np.asarray(pairs[0][1]), np.asarray(pairs[0][3])
    swap = stats.permutation_test((x, y), lambda u, v, axis: np.mean(u - v, axis=axis), vectorized=True,
                                  permutation_type="samples", n_resamples=RESAMPLES,
                                  random_state=np.random.default_rng(SEED))
    assert many[0].p == min(1.0, swap.pvalue)
    assert many[-1].p == 1.0 and many[-2].n == 0 and math.isnan(many[-2].p) and many[-3].p == 1.0
    samples = [p[1] for p in pairs]
    flat = [v for i in mean_intervals(samples) for v in (i.mean, i.low, i.high, i.n)]
    assert flat == pytest.approx([v for i in map(mean_interval, samples) for v in (i.mean, i.low, i.high, i.n)],
                                 nan_ok=True, abs=0)


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
