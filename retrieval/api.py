"""The notebook API: three lines from a KB name to a rendered run.

    from retrieval import HopTrace
    ht = HopTrace("demo")
    ht.ask("griever", "Who was the first president of the association which published …?")

Nothing heavy happens at import; the KB, the embedder and (lazily, on the first LLM call)
the LLM are loaded when a HopTrace is made.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

from .core.paths import resolve_kb
from .core.records import Question
from .encoders.embedder import get_embedder
from .llm import LLMSettings, get_llm
from .llm.prices import attach_cost
from .methods import Context, make_method, method_names
from .store import open_store
from .trace.model import RunResult


class HopTrace:
    def __init__(self, kb: str = "demo", llm: Optional[str] = None, llm_model: Optional[str] = None,
                 profile: Optional[str] = None, plugins: Sequence[str] = (), method_urls: Sequence[str] = ()):
        """`kb`: a KB name, a .sqlite path or an es+http:// spec; `llm` as the CLI's --llm
        (default: the embedded model, started on the first call that needs it; "none" for none).
        `plugins`: your own methods (.py files or modules), `method_urls`: "NAME=URL" endpoints, as
        --plugin / --method-url; HOPTRACE_PLUGINS and installed entry points load too. A plugin
        that fails is named in a warning and `self.plugin_problems`."""
        import warnings

        from .methods.plugins import load_all, problems

        load_all(plugins, method_urls)
        self.plugin_problems = [p.line() for p in problems()]
        for line in self.plugin_problems:
            warnings.warn(line, stacklevel=2)
        store = open_store(kb if kb.startswith("es+") else str(resolve_kb(kb)))
        self.ctx = Context(store, get_embedder(store.info().embed_model), get_llm(LLMSettings.parse(llm, llm_model)),
                           profile=profile)
        self.ctx.warm()
        self.questions: list[Question] = store.questions()
        self._gold = {q.text: q.gold_passage_ids for q in self.questions}

    @staticmethod
    def methods() -> list[str]:
        return method_names()

    def ask(self, method: str, question: str, k: int = 5, answer: bool = False, **settings: Any) -> RunResult:
        """One run, traced; `settings` override the method's config (as --set does). In Jupyter
        the result renders as the app's column, gold passages starred when the KB knows them."""
        run = make_method(method, self.ctx, **settings).run(question, k=k, answer=answer)
        attach_cost(run, self.ctx.llm)
        run.gold = list(self._gold.get(run.question, []))
        return run
