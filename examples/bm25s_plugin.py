"""BM25 by the bm25s library, with its own tokenizer and index: a retriever HopTrace does not ship,
run beside GRIEVER, GEAR, SAG and GRASP with its stages traced.

    hoptrace bench --kb demo --plugin examples/bm25s_plugin.py --methods bm25s,griever,dense

The fuller plugin form: a Method subclass whose stages use HopTrace's tracer, so each shows in the
app's column, the gold funnel and the exported spans with its latency and payload.
"""
from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass

import bm25s

from retrieval.methods import Method
from retrieval.methods.base import final_stage
from retrieval.methods.plugins import KBView
from retrieval.trace.model import RankedPassage

_INDEXES = weakref.WeakKeyDictionary()   # one bm25s index per open KB, built on its first question
_LOCK = threading.Lock()


@dataclass
class Bm25sConfig:
    k1: float = 1.5
    b: float = 0.75
    stopwords: str = "en"


class Bm25s(Method):
    name = "bm25s"
    title = "BM25 (bm25s library, its own index)"
    Config = Bm25sConfig
    k_dependent = False

    def retrieve(self, question: str, k: int, tracer) -> list[RankedPassage]:
        kb = KBView(self.ctx)
        with tracer.stage("index", "bm25s index over the KB's passages") as st:
            with _LOCK:
                built = _INDEXES.get(self.ctx.store)
                st.payload = {"cached": built is not None}
                if built is None:
                    ids = kb.passage_ids()
                    texts = kb.texts(ids)
                    corpus = [f"{texts[i][0]}. {texts[i][1]}" for i in ids]
                    index = bm25s.BM25(k1=self.config.k1, b=self.config.b)
                    index.index(bm25s.tokenize(corpus, stopwords=self.config.stopwords, show_progress=False),
                                show_progress=False)
                    built = _INDEXES[self.ctx.store] = (index, ids)
            st.payload["passages"] = len(built[1])
        with tracer.stage("search", "bm25s search") as st:
            index, ids = built
            tokens = bm25s.tokenize([question], stopwords=self.config.stopwords, show_progress=False)
            docs, scores = index.retrieve(tokens, k=min(k, len(ids)), show_progress=False)
            hits = [(ids[int(d)], float(s)) for d, s in zip(docs[0], scores[0])]
            st.payload = {"query_tokens": len(tokens.ids[0]), "top": hits[:5]}
        titles = {pid: t for pid, (t, _) in kb.texts([h for h, _ in hits]).items()}
        ranked = [RankedPassage(pid, round(s, 6), titles.get(pid, "")) for pid, s in hits]
        return final_stage(tracer, ranked, question, "bm25s score")
