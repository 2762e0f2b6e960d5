"""How a recall@k was asked, said beside every figure that reads one.

Two protocols give different figures for a method whose retrieval depends on k (GRIEVER's
candidate depth grows with it): "per-k" asks the method at each k, as the papers' R@k / ms@k
columns do; "slice" asks once at the deepest k and reads each smaller k off the top of that one
ranking. For a method that merely cuts one ranking the two agree. The lab's shipped experiment
is a slice of k = 10 (one run a question keeps a recording affordable); `bench` and `reproduce`
ask at each k unless told otherwise.
"""
from __future__ import annotations

from typing import Iterable

from ..core.errors import ConfigError

PROTOCOLS = ("per-k", "slice")


def check(protocol: str) -> str:
    if protocol not in PROTOCOLS:
        raise ConfigError(f"unknown protocol {protocol!r}; choose one of {', '.join(PROTOCOLS)}")
    return protocol


def how(protocol: str, k: int, deepest: int) -> str:
    """How the figure at k was asked, in a few words: 'asked at k=5' or 'top 5 of k=10'."""
    if protocol == "slice" and k < deepest:
        return f"top {k} of k={deepest}"
    return f"asked at k={k}"


def label(metric: str, protocol: str, deepest: int) -> str:
    """A column header: the metric and how it was asked ('recall@5 (top 5 of k=10)'). em, f1,
    anything without a k, and stable@k (repetitions against each other, no gold) are returned as
    they are."""
    name, _, k = metric.partition("@")
    if not k.isdigit() or name == "stable":
        return metric
    return f"{metric} ({how(protocol, int(k), deepest)})"


def sentence(protocol: str, ks: Iterable[int]) -> str:
    """The protocol in one line, for the head of a table."""
    ks = sorted(set(ks))
    if not ks:
        return f"protocol {protocol}"
    if protocol == "slice":
        return (f"protocol slice: each method asked once at k={ks[-1]}, "
                f"its figures at k={'/'.join(map(str, ks))} read from the top of that ranking")
    return (f"protocol per-k: each method whose retrieval depends on k asked at each k "
            f"({'/'.join(map(str, ks))}); the others asked once at k={ks[-1]} and cut, which gives the same figures")
