"""Paired comparison with uncertainty: per-question scores of two methods on the same questions.

The resampling is scipy's: a two-sided paired randomization test (`scipy.stats.permutation_test`
with `permutation_type="samples"`: each question's two scores are swapped or not, the statistic
is the mean difference) and percentile bootstrap intervals (`scipy.stats.bootstrap`). Both use
a fixed seed, so the same experiment prints the same figures. When many pairs are compared, the
p-values are adjusted with Holm's step-down method (it controls the family-wise error like
Bonferroni, and rejects at least as much); the adjustment is arithmetic on the p-values, not
resampling.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Optional, Sequence

import numpy as np

ALPHA = 0.05
RESAMPLES = 10_000
SEED = 0
# A paired difference smaller than this counts as a tie (recall values are fractions of a few
# gold passages, so real differences are ≥ 0.1).
TIE = 1e-9


@dataclass
class Interval:
    mean: float
    low: float
    high: float
    n: int

    def fmt(self, digits: int = 3) -> str:
        return f"{self.mean:.{digits}f} [{self.low:.{digits}f}, {self.high:.{digits}f}]"


@dataclass
class Paired:
    """Method a against method b on the same n questions (difference = a − b)."""
    a: str
    b: str
    n: int
    mean_diff: float
    low: float
    high: float
    p: float
    wins: int          # questions where a scored higher
    ties: int
    losses: int
    p_adjusted: Optional[float] = None   # Holm, when several pairs are compared
    sd_diff: float = 0.0

    @property
    def p_used(self) -> float:
        return self.p if self.p_adjusted is None else self.p_adjusted

    @property
    def significant(self) -> bool:
        return self.p_used < ALPHA

    def needed_questions(self) -> Optional[int]:
        """Questions a paired test would need to call this effect significant at α = 0.05 with 80 %
        power, if the observed mean difference and spread held (normal approximation); None when
        there is no observed effect to detect."""
        if abs(self.mean_diff) <= TIE or self.sd_diff <= 0:
            return None
        z = 1.959964 + 0.841621   # two-sided α = 0.05, power 0.8
        return max(self.n + 1, math.ceil((z * self.sd_diff / abs(self.mean_diff)) ** 2))

    def to_json(self) -> dict:
        d = asdict(self)
        d["significant"] = self.significant
        d["needed_questions"] = self.needed_questions()
        return d


def mean_interval(values: Sequence[float], confidence: float = 0.95) -> Interval:
    """The mean with a percentile bootstrap interval over questions."""
    return mean_intervals([values], confidence)[0]


def mean_intervals(samples: Sequence[Sequence[float]], confidence: float = 0.95) -> list[Interval]:
    """`mean_interval` of each sample. Samples of one length are resampled in one scipy call (its
    `axis`): the same seeded draws apply to every row, so each interval is the one a call of its own
    gives, at a tenth of the cost (a 22-method experiment's first view: 529 intervals)."""
    out: list[Optional[Interval]] = [None] * len(samples)
    spread: dict[int, list[int]] = {}
    arrays = [np.asarray(v, dtype=float) for v in samples]
    for i, x in enumerate(arrays):
        if len(x) == 0:
            out[i] = Interval(float("nan"), float("nan"), float("nan"), 0)
        elif len(x) < 2 or np.ptp(x) == 0:
            m = float(x.mean())
            out[i] = Interval(m, m, m, len(x))   # no spread: every resample has the same mean
        else:
            spread.setdefault(len(x), []).append(i)
    if spread:
        from scipy import stats

        for n, rows in spread.items():
            x = np.stack([arrays[i] for i in rows])
            ci = stats.bootstrap((x,), np.mean, axis=-1, confidence_level=confidence, n_resamples=RESAMPLES,
                                 method="percentile", batch=_batch(x), random_state=np.random.default_rng(SEED)
                                 ).confidence_interval
            for j, i in enumerate(rows):
                out[i] = Interval(float(arrays[i].mean()), float(ci.low[j]), float(ci.high[j]), n)
    return out


def _batch(x: np.ndarray) -> int:
    """Resamples a scipy call draws at once: ~50 was fastest for 231 rows of 100 questions; fewer
    for larger arrays, so a batch stays within ~4 M numbers. The draws do not depend on it."""
    return int(max(1, min(50, 4_000_000 // max(1, x.size))))


def paired(a_name: str, a: Sequence[float], b_name: str, b: Sequence[float]) -> Paired:
    """Mean per-question difference a − b with its 95 % interval, the two-sided paired randomization
    p-value and the win / tie / loss counts. `a` and `b` are aligned by question."""
    return paired_many([(a_name, a, b_name, b)])[0]


def paired_many(pairs: Sequence[tuple[str, Sequence[float], str, Sequence[float]]]) -> list[Paired]:
    """`paired` of each (a name, a, b name, b). Swapping a question's two scores flips the sign of its
    difference, so the randomization test runs on the differences (scipy's one-sample
    `permutation_type="samples"` flips signs), and the differences of one length go in one scipy
    call: the same p-values and intervals as a call a pair, ~10x faster."""
    diffs = []
    for _, a, _, b in pairs:
        x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
        if x.shape != y.shape:
            raise ValueError(f"paired scores need the same questions: {len(x)} vs {len(y)}")
        diffs.append(x - y)
    intervals = mean_intervals(diffs)
    p = [1.0] * len(diffs)
    tested: dict[int, list[int]] = {}
    for i, d in enumerate(diffs):
        # One question (scipy needs two), or every swap gives the same statistic: nothing to tell apart.
        if len(d) >= 2 and np.any(np.abs(d) > TIE):
            tested.setdefault(len(d), []).append(i)
    if tested:
        from scipy import stats

        for rows in tested.values():
            d = np.stack([diffs[i] for i in rows])
            res = stats.permutation_test((d,), lambda u, axis: np.mean(u, axis=axis), vectorized=True, axis=-1,
                                         permutation_type="samples", alternative="two-sided",
                                         n_resamples=RESAMPLES, batch=_batch(d),
                                         random_state=np.random.default_rng(SEED))
            for j, i in enumerate(rows):
                p[i] = float(min(1.0, np.atleast_1d(res.pvalue)[j]))
    out = []
    for (a_name, _, b_name, _), d, iv, pi in zip(pairs, diffs, intervals, p):
        n = len(d)
        if n == 0:
            out.append(Paired(a_name, b_name, 0, float("nan"), float("nan"), float("nan"), float("nan"), 0, 0, 0))
            continue
        wins, losses = int((d > TIE).sum()), int((d < -TIE).sum())
        out.append(Paired(a_name, b_name, n, iv.mean, iv.low, iv.high, pi, wins, n - wins - losses, losses,
                          sd_diff=float(d.std(ddof=1)) if n > 1 else 0.0))
    return out


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm–Bonferroni adjusted p-values, in the input order."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    out = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        out[i] = running
    return out


def verdict(p: Paired) -> str:
    """A claim 'a beats b' (or 'a ≥ b') judged on the paired test: holds — significant in the
    claim's direction; does not hold — significant the other way; inconclusive — the data cannot
    tell (for 'a ≥ b' that means no significant loss, but no shown gain either)."""
    if p.n == 0 or math.isnan(p.mean_diff):
        return "not measured"
    if p.significant:
        return "holds" if p.mean_diff > 0 else "does not hold"
    return "inconclusive"
