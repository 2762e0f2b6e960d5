"""The method interface: a method is a small pipeline of named stages over a Context.

`Method.run` validates the question, times the whole run, collects the stages through a
Tracer and turns a failed stage into a failed run (never an exception), so one broken
method cannot stop the others in a side-by-side comparison.
"""
from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import asdict, fields, is_dataclass, replace
from typing import Any, Callable, ClassVar, Optional

from ..core.errors import ConfigError
from ..core.validate import check_question
from ..store.base import Hit
from ..trace.model import RankedPassage, RunResult, Stage, StageFailed, Tracer
from . import layers
from .answer import stage_answer
from .context import Context


class Method(ABC):
    name: ClassVar[str]
    title: ClassVar[str]
    Config: ClassVar[type]
    # Does k change more than the cut-off (candidate depth, iterations)? Then a benchmark
    # runs the method once per k, as the papers' R@k columns do; otherwise it slices one run.
    k_dependent: ClassVar[bool] = True
    uses_llm: ClassVar[bool] = False   # shown in the app; such methods say so when no LLM is configured
    # The KB layers it reads and the layers whose vectors it searches (methods/layers.py): a KB
    # without one refuses the run, naming it, and a building KB serves it once they are whole.
    layers: ClassVar[tuple[str, ...]] = ("passages",)
    vectors: ClassVar[tuple[str, ...]] = ("passages",)
    profile: str = "paper"             # set by make_method (methods/profiles.py)
    paper_config: Any = None           # the paper's defaults, to list what this run changed

    def __init__(self, ctx: Context, config: Any = None, **overrides: Any):
        self.ctx = ctx
        cfg = config if config is not None else self.Config()
        if overrides:
            known = {f.name for f in fields(cfg)}
            unknown = set(overrides) - known
            if unknown:
                raise ConfigError(f"{self.name}: unknown setting(s) {sorted(unknown)}; known: {sorted(known)}")
            cfg = replace(cfg, **overrides)
        self.config = cfg

    @abstractmethod
    def retrieve(self, question: str, k: int, tracer: Tracer) -> list[RankedPassage]:
        """The pipeline. Each step opens `tracer.stage(...)`; returns the final ranking."""

    def run(self, question: str, k: int = 10, on_stage: Optional[Callable[[Stage], None]] = None,
            answer: bool = False, on_progress: Optional[Callable[[Stage], None]] = None) -> RunResult:
        """`on_stage` gets each stage as it finishes; `on_progress` gets a stage when it starts
        and whenever its LLM call reports progress (`stage.progress`)."""
        q = check_question(question)
        if k < 1:
            raise ConfigError(f"k must be at least 1, got {k}")
        layers.check(self.ctx.store, self.name, self.needs())
        tracer = Tracer(on_stage, on_progress)
        result = RunResult(self.name, q, config={"k": k, "profile": self.profile,
                                                 **(asdict(self.config) if is_dataclass(self.config) else {})})
        t0 = time.perf_counter()
        try:
            if self.uses_llm and self.ctx.llm is not None:  # without one it runs its fallback
                self.profile_stage(tracer)
            result.ranked = self.retrieve(q, k, tracer)[:k]
        except StageFailed as e:
            result.status, result.error = "error", str(e)
        result.answer = tracer.answer
        if answer and result.status == "ok" and result.answer is None:
            try:
                result.answer = stage_answer(self.ctx, tracer, q, result.ranked)
            except StageFailed:
                pass  # the answer stage shows the error; the ranking stands
        result.latency_ms = round((time.perf_counter() - t0) * 1000, 3)
        result.stages = tracer.stages
        return result


    def needs(self) -> tuple[str, ...]:
        """The KB units this run reads (its layers' rows, then the vectors it searches)."""
        return type(self).units_for(self.config)

    @classmethod
    def units_for(cls, config: Any) -> tuple[str, ...]:
        """The units a run with `config` reads: the class's, unless its config adds some (GEAR's
        base, GRIEVER's full-triples shortlist)."""
        return cls.layers + tuple(f"{layer} vectors" for layer in cls.vectors)

    def profile_stage(self, tracer: Tracer) -> None:
        """The run's profile and each value that differs from the paper (methods/profiles.py)."""
        from .profiles import differences
        diff = differences(self.config, self.paper_config) if self.paper_config is not None else {}
        with tracer.stage("profile", f"Profile: {self.profile}") as st:
            st.payload = {"profile": self.profile,
                          "differs_from_paper": {k: {"paper": a, "this_run": b} for k, (a, b) in diff.items()}}
            if diff:
                st.message = "differs from the paper in " + ", ".join(f"{k} = {b} (paper {a})"
                                                                      for k, (a, b) in diff.items())


def ranked_from_hits(ctx: Context, hits: list[Hit]) -> list[RankedPassage]:
    titles = {p.id: p.title for p in ctx.store.passages([h.id for h in hits])}
    return [RankedPassage(h.id, round(float(h.score), 6), titles.get(h.id, "")) for h in hits]


def final_stage(tracer: Tracer, ranked: list[RankedPassage], question: str, how: str) -> list[RankedPassage]:
    """Every method ends with this: the ranking, and a question → passages subgraph."""
    with tracer.stage("ranking", "Final ranking") as st:
        st.payload = {"how": how, "ranked": [{"rank": i + 1, "passage_id": r.passage_id, "title": r.title,
                                              "score": r.score} for i, r in enumerate(ranked)]}
        g = st.graph()
        q = g.node("q", "question", question)
        for i, r in enumerate(ranked):
            pid = g.node(r.passage_id, "passage", r.title, r.score, rank=i + 1)
            g.edge(q, pid, "retrieved", f"#{i + 1}", r.score)
        if not ranked:
            st.empty("no passage was retrieved")
    return ranked
