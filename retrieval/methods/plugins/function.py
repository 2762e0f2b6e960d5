"""A retriever given as a function `retrieve(question, k, kb)`: traced as three stages.

`call` (the function, timed), `map` (its hits mapped to the KB's passages, with what did not map)
and the final ranking every method ends with. A function that raises gives a failed run that is
stored with the error, like any method's failed stage.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ClassVar

from ...trace.model import RankedPassage, Tracer
from ..base import Method, final_stage
from .hits import map_hits
from .kbview import KBView


@dataclass
class PluginConfig:
    """A function plugin has no settings of HopTrace's; its own live in its file."""


def stage_hits(tracer: Tracer, hits: Any, kb: KBView, k: int, source: str) -> list[RankedPassage]:
    """The hits as given → the KB's passages: mapped by id, title or text; the rest named."""
    with tracer.stage("map", "Hits mapped to this KB's passages") as st:
        m = map_hits(hits, kb, k)
        st.payload = {"source": source, **m.payload(k)}
        if m.problems(k):
            st.message = "; ".join(m.problems(k))
        if not m.ranked:
            st.empty("no hit names a passage of this KB" if m.returned else "the retriever returned no hit")
    return m.ranked[:k]


class FunctionMethod(Method):
    """Subclassed per plugin by the loader, with `name`, `title`, `origin` and `fn` set."""
    Config = PluginConfig
    k_dependent: ClassVar[bool] = True   # a user's function may use k as it likes: bench runs it per k
    fn: ClassVar[Callable[..., Any]]
    origin: ClassVar[str] = ""

    def retrieve(self, question: str, k: int, tracer: Tracer) -> list[RankedPassage]:
        kb = KBView(self.ctx)
        with tracer.stage("call", f"Your retriever: {self.name}") as st:
            hits = type(self).fn(question, k, kb)
            st.payload = {"origin": self.origin, "returned": len(hits) if hasattr(hits, "__len__") else None,
                          "first": [h if isinstance(h, (str, dict)) else list(h) for h in list(hits)[:5]]
                          if isinstance(hits, (list, tuple)) else repr(hits)[:200]}
        ranked = stage_hits(tracer, hits, kb, k, "your function")
        return final_stage(tracer, ranked, question, f"{self.name}'s order, mapped to the KB")
